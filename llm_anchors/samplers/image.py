"""Image perturbation: superpixels as features, hidden by a fill.

An image is cut into superpixels (scikit-image's SLIC or quickshift); a
perturbation hides each superpixel outside the rule with probability
``p_hide``, painting it with the fill (its own mean colour, or a fixed
value). Perturbations travel to the classifier as query strings
("<image digest>:<kept bits>"), so the engine's cache, dedupe and budget
apply as for text; `ImageSampler.render` turns them back into pixels.
"""

from __future__ import annotations

import hashlib
from collections import OrderedDict
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from .._exceptions import ConfigError, InvalidInputError
from ..memory.store import MemoryEntry, nearest_unused
from ..models.classifier import DecodingClassifier, model_name
from ..search.rules import Rule
from .base import keep_independently

__all__ = [
    "ImageClassifier",
    "ImageInstance",
    "ImageMemoryFeatures",
    "ImageSampler",
    "unit_range",
]

_GRID = 8  # the default memory key: the image as an 8 × 8 grid of mean colours


@dataclass(frozen=True, eq=False)
class ImageInstance:
    """One image (H × W × 3 floats), its superpixels and the picture hidden ones take."""

    query: str
    features: tuple[str, ...]
    image: np.ndarray
    segments: np.ndarray
    fill: np.ndarray
    digest: str

    def compose(self, kept: np.ndarray) -> np.ndarray:
        """The image with the superpixels not ``kept`` replaced by the fill."""
        return np.where(kept[self.segments][..., None], self.image, self.fill)


class ImageSampler:
    """Perturbs an image by hiding superpixels, keeping a rule's.

    segmentation: "slic" (``n_segments``, ``compactness``) or "quickshift"
        (``kernel_size``, ``max_dist``).
    fill: "mean" (each superpixel's mean colour) or a number (a flat grey).
    p_hide: chance that a superpixel outside the rule is hidden (0.5).
    max_images: images whose superpixels are kept for `render` (oldest dropped).
    max_pixels: the largest image accepted (H × W); a batch of perturbations
        is ``request_size`` copies of it in memory, so downscale bigger ones.
    """

    def __init__(
        self,
        *,
        segmentation: str = "slic",
        n_segments: int = 25,
        compactness: float = 10.0,
        kernel_size: float = 4.0,
        max_dist: float = 200.0,
        fill: str | float = "mean",
        p_hide: float = 0.5,
        max_images: int = 256,
        max_pixels: int = 1024 * 1024,
    ) -> None:
        if segmentation not in ("slic", "quickshift"):
            raise ConfigError(f"segmentation must be 'slic' or 'quickshift', got {segmentation!r}")
        if fill != "mean" and not isinstance(fill, int | float):
            raise ConfigError(f"fill must be 'mean' or a number, got {fill!r}")
        if not 0.0 < p_hide < 1.0:
            raise ConfigError(f"p_hide must lie strictly between 0 and 1, got {p_hide}")
        try:
            import skimage.segmentation
        except ImportError as exc:
            raise ConfigError("image explanations need scikit-image: pip install 'llm-anchors[image]'") from exc
        self._segmentation = skimage.segmentation
        self.segmentation, self.n_segments, self.compactness = segmentation, n_segments, compactness
        self.kernel_size, self.max_dist = kernel_size, max_dist
        self.fill, self.p_hide = fill, p_hide
        self.max_images, self.max_pixels = max_images, max_pixels
        self._images: OrderedDict[str, ImageInstance] = OrderedDict()

    def settings(self) -> dict[str, object]:
        return {"kind": "image", "segmentation": self.segmentation, "n_segments": self.n_segments,
                "compactness": self.compactness, "fill": self.fill, "p_hide": self.p_hide}  # fmt: skip

    def describe(self, instance: ImageInstance) -> str:
        fill = "its mean colour" if self.fill == "mean" else f"{self.fill:g}"
        return f"each superpixel outside the anchor filled with {fill} with probability {self.p_hide:g}, independently"

    # -- the sampler interface ------------------------------------------------

    def features(self, image: object) -> ImageInstance:
        """Segment ``image`` (H × W grey or H × W × 3 colour, uint8 or float) into superpixels."""
        pixels = _as_rgb(image)
        if pixels.shape[0] * pixels.shape[1] > self.max_pixels:
            raise InvalidInputError(
                f"image of {pixels.shape[0]} × {pixels.shape[1]} pixels is over max_pixels={self.max_pixels}: "
                "downscale it (or raise max_pixels and lower the explainer's request_size)"
            )
        digest = hashlib.sha1(pixels.tobytes() + repr(pixels.shape).encode()).hexdigest()[:16]
        if digest in self._images:
            self._images.move_to_end(digest)
            return self._images[digest]
        segments = self._segment(pixels)
        count = int(segments.max()) + 1
        means = np.array([pixels[segments == s].mean(axis=0) for s in range(count)])
        fill = means[segments] if self.fill == "mean" else np.full_like(pixels, float(self.fill))
        words = tuple(f"superpixel {s} {_where(segments == s)}" for s in range(count))
        instance = ImageInstance(f"{digest}:{'1' * count}", words, pixels, segments, fill, digest)
        self._images[digest] = instance
        while len(self._images) > self.max_images:
            self._images.popitem(last=False)
        return instance

    def _segment(self, pixels: np.ndarray) -> np.ndarray:
        if self.segmentation == "slic":
            segments = self._segmentation.slic(
                pixels, n_segments=self.n_segments, compactness=self.compactness, start_label=0, channel_axis=-1
            )
        else:
            segments = self._segmentation.quickshift(  # type: ignore[no-untyped-call]
                pixels, kernel_size=self.kernel_size, max_dist=self.max_dist, ratio=0.2, rng=0
            )
        _, dense = np.unique(segments, return_inverse=True)  # labels 0..k-1, none skipped
        return dense.reshape(segments.shape)

    def sample_present(self, instance: ImageInstance, rule: Rule, n: int, rng: np.random.Generator) -> np.ndarray:
        return keep_independently(n, len(instance.features), rule, self.p_hide, rng)

    def sample(
        self, instance: ImageInstance, rule: Rule, n: int, rng: np.random.Generator
    ) -> tuple[list[str], np.ndarray]:
        present = self.sample_present(instance, rule, n, rng)
        return [f"{instance.digest}:{''.join('1' if k else '0' for k in row)}" for row in present], present

    def render(self, texts: Sequence[str]) -> np.ndarray:
        """The (n × H × W × 3) perturbed images named by query strings of images seen by `features`."""
        out = []
        for text in texts:
            digest, _, bits = text.partition(":")
            instance = self._images.get(digest)
            if instance is None or len(bits) != len(instance.features):
                raise InvalidInputError(f"unknown image perturbation {text[:40]!r}: explain the image first")
            out.append(instance.compose(np.array([b == "1" for b in bits])))
        return np.stack(out)

    def held(self, query: str) -> ImageInstance | None:
        """The instance of an image this sampler segmented, by its query string (None once dropped)."""
        return self._images.get(query.partition(":")[0])

    def memory_features(self) -> ImageMemoryFeatures:
        """MAnchors' memory key and HT for images (`ImageMemoryFeatures`; its default key)."""
        return ImageMemoryFeatures()


class ImageClassifier(DecodingClassifier):
    """An image model as a `Classifier`: ``predict(images) -> labels`` on the
    (n × H × W × 3) float batches ``sampler``'s query strings name.

    ``name``: the model's identity, as `FunctionClassifier`'s.
    """

    def __init__(self, predict: Any, sampler: ImageSampler, *, name: str | None = None) -> None:
        super().__init__(predict, sampler.render, "image", name=name)


class ImageMemoryFeatures:
    """MAnchors for images: the memory key is ``embed(image)`` (e.g. the
    explained model's own features; ``embed_dim`` numbers) or by default the
    image's centred 8 × 8 mean-colour grid; HT maps each remembered
    superpixel to the nearest unused one by colour, place and size."""

    def __init__(self, embed: Callable[[np.ndarray], np.ndarray] | None = None, embed_dim: int | None = None) -> None:
        if (embed is None) != (embed_dim is None):
            raise ConfigError("embed and embed_dim go together")
        self._embed, self._embed_dim = embed, embed_dim

    @property
    def identity(self) -> str:
        return f"image-embed:{model_name(self._embed)}" if self._embed else f"image-colour-grid:{_GRID}"

    @property
    def dim(self) -> int:
        return self._embed_dim if self._embed_dim is not None else 3 * _GRID * _GRID

    def embed(self, instances: Sequence[ImageInstance]) -> np.ndarray:
        """Unit vectors: ``embed(image)`` when given, else the centred 8 × 8 colour grid."""
        out = np.zeros((len(instances), self.dim), dtype=np.float32)
        for i, instance in enumerate(instances):
            vector = self._embed(instance.image) if self._embed else _grid(instance.image)
            vector = np.asarray(vector, dtype=np.float32).ravel()
            if vector.shape != (self.dim,):
                raise ConfigError(f"embed returned {vector.shape[0]} numbers, embed_dim says {self.dim}")
            out[i] = vector / (np.linalg.norm(vector) or 1.0)
        return out

    def describe(self, instance: ImageInstance, positions: Sequence[int]) -> tuple[tuple[float, ...], ...]:
        """Per superpixel: mean and spread of colour (image range scaled to 0–1), centre, size."""
        table = _descriptors(instance)
        return tuple(tuple(float(x) for x in table[p]) for p in positions)

    def horizontal(self, entry: MemoryEntry, instance: ImageInstance) -> list[int]:
        """HT: each remembered superpixel → the nearest unused superpixel of ``instance`` (descriptor distance)."""
        table = _descriptors(instance)
        if not entry.rule_vectors:
            return []
        remembered = np.asarray(entry.rule_vectors, dtype=float)
        return nearest_unused(-np.linalg.norm(remembered[:, None, :] - table[None, :, :], axis=2))

    def keys(self, instance: ImageInstance) -> tuple[str, ...]:
        """Superpixels have no name shared across images: no anchor dictionary."""
        return ()


def _as_rgb(image: object) -> np.ndarray:
    if not isinstance(image, np.ndarray):
        raise InvalidInputError(f"an image must be a numpy array, got {type(image).__name__}")
    if image.ndim == 3 and image.shape[2] == 1:
        image = image[..., 0]
    if image.ndim == 2:
        image = np.repeat(image[..., None], 3, axis=2)
    if image.ndim != 3 or image.shape[2] != 3:
        raise InvalidInputError(f"an image must be H × W or H × W × 3, got shape {image.shape}")
    if min(image.shape[:2]) < 4:
        raise InvalidInputError(f"image too small to cut into superpixels: {image.shape[:2]}")
    pixels = image.astype(float)
    if not np.isfinite(pixels).all():
        raise InvalidInputError("image holds NaN or infinite values")
    return pixels


def _where(mask: np.ndarray) -> str:
    """Where a region lies, in words ("top-left", "centre", ...)."""
    ys, xs = np.nonzero(mask)
    row = ("top", "middle", "bottom")[min(2, int(3 * ys.mean() / mask.shape[0]))]
    col = ("left", "centre", "right")[min(2, int(3 * xs.mean() / mask.shape[1]))]
    return "(centre)" if (row, col) == ("middle", "centre") else f"({row}-{col})"


def unit_range(image: np.ndarray) -> np.ndarray:
    """The image's values stretched to 0–1 (a flat image stays flat)."""
    low, high = float(image.min()), float(image.max())
    scaled: np.ndarray = (image - low) / (high - low or 1.0)
    return scaled


def _descriptors(instance: ImageInstance) -> np.ndarray:
    scaled, segments = unit_range(instance.image), instance.segments
    h, w = segments.shape
    ys, xs = np.mgrid[0:h, 0:w]
    rows = []
    for s in range(len(instance.features)):
        mask = segments == s
        colours = scaled[mask]
        rows.append([*colours.mean(axis=0), *colours.std(axis=0), ys[mask].mean() / h, xs[mask].mean() / w,
                     mask.mean()])  # fmt: skip
    return np.array(rows)


def _grid(image: np.ndarray) -> np.ndarray:
    h, w, _ = image.shape
    ys = np.linspace(0, h, _GRID + 1).astype(int)
    xs = np.linspace(0, w, _GRID + 1).astype(int)
    cells = [image[ys[i] : max(ys[i + 1], ys[i] + 1), xs[j] : max(xs[j + 1], xs[j] + 1)].mean(axis=(0, 1))
             for i in range(_GRID) for j in range(_GRID)]  # fmt: skip
    grid = np.array(cells, dtype=float).ravel()
    centred: np.ndarray = grid - grid.mean()
    return centred
