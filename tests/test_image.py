"""Image sampler, explainer and MAnchors on synthetic pictures with a known anchor."""

import numpy as np
import pytest

from llm_anchors import ConfigError, ImageClassifier, ImageExplainer, ImageSampler, InvalidInputError, MAnchorsExplainer
from llm_anchors.display import anchor_image, save_anchor_png
from llm_anchors.samplers import ImageMemoryFeatures


def picture(shift=0, size=32):
    """A grey picture with a red square (top-left) and a blue one (bottom-right)."""
    image = np.full((size, size, 3), 0.5)
    image[4 + shift : 12 + shift, 4 + shift : 12 + shift] = (1.0, 0.0, 0.0)
    image[20:28, 20:28] = (0.0, 0.0, 1.0)
    return image


def red_pixels(images):
    return ((images[..., 0] > 0.8) & (images[..., 1] < 0.2) & (images[..., 2] < 0.2)).sum(axis=(1, 2))


def predict(images):
    """1 when most of a red square is visible."""
    return (red_pixels(np.asarray(images)) >= 40).astype(int)


@pytest.fixture
def sampler():
    return ImageSampler(n_segments=16, compactness=10.0, fill=0.0)


def test_superpixels_cover_the_image_and_render_back(sampler):
    instance = sampler.features(picture())
    k = len(instance.features)
    assert 4 <= k <= 40 and set(np.unique(instance.segments)) == set(range(k))
    assert instance.query == f"{instance.digest}:{'1' * k}"
    texts, present = sampler.sample(instance, frozenset({0}), 20, np.random.default_rng(0))
    assert present[:, 0].all() and present.shape == (20, k)
    images = sampler.render(texts)
    for image, kept in zip(images, present, strict=True):
        hidden = ~kept[instance.segments]
        assert np.array_equal(image[~hidden], instance.image[~hidden]) and (image[hidden] == 0.0).all()
    assert np.array_equal(sampler.render([instance.query])[0], instance.image)


def test_grey_uint8_images_are_accepted(sampler):
    grey = (picture()[..., 0] * 255).astype(np.uint8)
    assert sampler.features(grey).image.shape == (32, 32, 3)


@pytest.mark.parametrize("bad", [np.zeros((2, 2, 3)), np.zeros((8, 8, 4)), "cat.png", np.full((8, 8), np.nan)])
def test_bad_images_get_a_typed_error(sampler, bad):
    with pytest.raises(InvalidInputError):
        sampler.features(bad)


def test_an_image_over_max_pixels_is_refused_before_any_work():
    images = ImageSampler(max_pixels=32 * 31)
    with pytest.raises(InvalidInputError, match="max_pixels"):
        images.features(picture())
    assert images.features(picture(size=31)).image.shape == (31, 31, 3)


def test_unknown_perturbations_and_bad_settings_are_refused(sampler):
    with pytest.raises(InvalidInputError, match="explain the image first"):
        sampler.render(["0123456789abcdef:1010"])
    with pytest.raises(ConfigError):
        ImageSampler(segmentation="watershed")
    with pytest.raises(ConfigError):
        ImageMemoryFeatures(embed=lambda image: image.ravel())


async def test_the_red_square_is_the_anchor(sampler, tmp_path):
    explainer = ImageExplainer(predict, sampler, seed=0)
    image = picture()
    exp = await explainer.explain(image)
    assert exp.data.label == 1 and exp.data.anchor
    instance = sampler.features(image)
    square = red_pixels(image[None])[0]
    anchored = np.isin(instance.segments, exp.data.positions)
    covered = ((image[..., 0] > 0.8) & (image[..., 1] < 0.2) & anchored).sum()
    assert covered >= 40  # the anchor holds enough of the red square to keep the label on its own
    blue = np.isin(instance.segments, np.unique(instance.segments[20:28, 20:28]))
    assert not (blue & anchored & (image[..., 2] > 0.8)).any()  # and none of the blue one
    assert covered <= square
    assert await explainer.estimate_precision(image, exp.data.positions, n=1000) >= 0.95
    path = save_anchor_png(exp, tmp_path / "anchor.png", sampler)
    assert path.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    shown = anchor_image(exp, sampler)
    assert shown.shape == image.shape and not np.allclose(shown[~anchored], image[~anchored])


async def test_manchors_maps_superpixels_onto_the_shifted_square(sampler):
    m = MAnchorsExplainer(ImageClassifier(predict, sampler), sampler=sampler, seed=0)
    first = await m.explain(picture())
    assert first.meta.memory_hit is False and len(m.store) == 1
    assert len(m.store.entries[0].rule_vectors[0]) == 9  # colour mean and spread, centre, size
    second = await m.explain(picture(shift=2))
    assert second.meta.memory_hit is True and second.meta.memory.similarity >= 0.6
    moved = sampler.features(picture(shift=2))
    mapped = [moved.features.index(w) for w in second.meta.memory.ht_rule]
    red = (moved.image[..., 0] > 0.8) & (moved.image[..., 1] < 0.2)
    assert all(red[moved.segments == p].any() for p in mapped)  # HT landed on the red square
    assert await m.estimate_precision(picture(shift=2), second.data.positions) >= 0.95


def test_quickshift_and_a_fixed_fill():
    images = ImageSampler(segmentation="quickshift", kernel_size=3, max_dist=6, fill=0.25)
    instance = images.features(picture())
    assert len(instance.features) >= 3
    hidden = images.render([f"{instance.digest}:{'0' * len(instance.features)}"])[0]
    assert (hidden == 0.25).all()


def test_a_model_embedding_keys_the_memory():
    calls = []

    def features(image):
        calls.append(image.shape)
        return np.array([image[..., 0].mean(), image[..., 2].mean()])

    images = ImageSampler(n_segments=16, fill=0.0)
    keyed = ImageMemoryFeatures(features, embed_dim=2)
    vectors = keyed.embed([images.features(picture())])
    assert calls == [(32, 32, 3)] and vectors.shape == (1, 2)
    assert np.linalg.norm(vectors[0]) == pytest.approx(1.0)
    assert keyed.identity.startswith("image-embed:") and keyed.identity.endswith(".features")
    m = MAnchorsExplainer(ImageClassifier(predict, images), sampler=images, memory_features=keyed, seed=0)
    assert m.features is keyed and m.store.embedder_id == keyed.identity
    with pytest.raises(ConfigError, match="embed_dim"):
        ImageMemoryFeatures(features, embed_dim=3).embed([images.features(picture())])
