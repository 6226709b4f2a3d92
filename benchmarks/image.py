"""Anchors vs MAnchors on images: a small model trained here, not the paper's setting.

    python -m benchmarks.image --n 100

The paper explains YOLOv8 on an ImageNet subset (speedup 1.92×); neither
is available offline. Here: an MLP trained on scikit-learn's 8 × 8 digits
upscaled to 32 × 32, explaining held-out digits (seeded order, seed 42);
superpixels by SLIC (36 asked for, ~13 made), hidden superpixels painted black (the
digits' background). MAnchors' memory key is the image's 8 × 8 mean-colour
grid; HT maps superpixels by colour/position/size descriptors. Writes the
table, JSON, the cumulative/distribution plots and a sheet of anchors.
"""

from __future__ import annotations

import argparse
import asyncio
import time
from pathlib import Path
from typing import Any

import numpy as np

from llm_anchors import Explanation, ImageClassifier, ImageExplainer, ImageSampler, MAnchorsExplainer
from llm_anchors.datasets import shuffled
from llm_anchors.display import anchor_image

from ._common import (
    FIDELITY,
    add_comparison_args,
    compare,
    explain_rows,
    plots,
    result_path,
    run_suffix,
    search_settings,
    tau_sim,
    with_memory,
    write_json,
)
from ._models import train_digits

PAPER = {"speedup": 1.92, "setting": "YOLOv8 on 2,000 ImageNet images (10 classes)"}


def sampler() -> ImageSampler:
    return ImageSampler(n_segments=36, compactness=1.0, fill=0.0)


async def run(args: argparse.Namespace) -> dict[str, Any]:
    model, images, labels, accuracy = train_digits(args.seed)
    order = [int(i) for i in shuffled(len(images), args.shuffle_seed)[: args.n]]
    stream = [np.repeat(images[i][..., None], 3, axis=2) for i in order]
    plain_sampler = sampler()
    settings = search_settings(args)
    async with ImageExplainer(
        model.predict, plain_sampler, seed=args.seed, name="digits-mlp-anchors", **settings
    ) as plain:
        a = await explain_rows(plain, stream, order, args.fresh_samples, label="Anchors")
        sheet = [(stream[i], await plain.explain(stream[i])) for i in range(min(8, len(stream)))]
    memory_sampler = sampler()
    classifier = ImageClassifier(model.predict, memory_sampler, name="digits-mlp-manchors")
    options = with_memory(
        dict(strategy=args.strategy, tau_sim=tau_sim(args, args.strategy), tau_mid=args.tau_mid, **settings)
    )
    async with MAnchorsExplainer(classifier, sampler=memory_sampler, seed=args.seed, **options) as memory:
        m = await explain_rows(memory, stream, order, args.fresh_samples, label="MAnchors")
    anchors_png = anchor_sheet(plain_sampler, sheet, result_path(f"image_digits_n{args.n}_anchors.png"))
    return {"accuracy": accuracy, "anchors": a, "manchors": m, "anchors_png": str(anchors_png)}


def anchor_sheet(images: ImageSampler, shown: list[tuple[np.ndarray, Explanation]], path: Path) -> Path:
    """The first explanations: each digit beside its anchor (superpixels outside it dimmed)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(2, len(shown), figsize=(1.6 * len(shown), 3.6), squeeze=False)
    for j, (image, exp) in enumerate(shown):
        axes[0, j].imshow(image)
        axes[0, j].set_title(f"label {exp.data.label}", fontsize=9)
        axes[1, j].imshow(anchor_image(exp, images, image))
        axes[1, j].set_title(f"prec {exp.data.precision:.2f}", fontsize=9)
        for ax in axes[:, j]:
            ax.axis("off")
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


def markdown(result: dict[str, Any], c: dict[str, Any], n: int, strategy: str = "guided") -> str:
    a, m = c["anchors"], c["manchors"]
    lines = [
        f"### Anchors vs MAnchors ({strategy}), MLP on upscaled digits (32 × 32), N={n} — "
        "not the paper's YOLOv8/ImageNet",
        "",
        "| | Anchors | MAnchors | paper (YOLOv8, ImageNet) |",
        "| --- | ---: | ---: | ---: |",
        f"| speedup (Σ time) | | {c['speedup']:.2f}× | {PAPER['speedup']}× |",
        f"| sampling reduction | | {c['sampling_reduction']:.0%} | |",
        f"| memory hits | | {c['memory_hits']} / {n} | |",
        f"| Σ time (s) | {a['time_s']:.1f} | {m['time_s']:.1f} | |",
        f"| Σ samples | {a['samples']:,} | {m['samples']:,} | |",
    ]
    for key in (*FIDELITY, "empty", "coverage_both_non_empty", "length_both_non_empty", "below_tau"):
        lines.append(
            f"| {key} | {a[key]['mean']:.3f} ± {a[key]['ci95']:.3f} | {m[key]['mean']:.3f} ± {m[key]['ci95']:.3f} | |"
        )
    lines.append(f"\nModel accuracy on the held-out digits: {result['accuracy']:.3f}.")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--n", type=int, default=100)
    parser.add_argument("--strategy", default="guided", choices=["guided", "paper"], help="MAnchors' strategy")
    add_comparison_args(parser)
    args = parser.parse_args(argv)
    started = time.perf_counter()
    result = asyncio.run(run(args))
    n = len(result["anchors"])
    c = compare(result["anchors"], result["manchors"], "gpt-4o-mini")
    pngs = plots(result["anchors"], result["manchors"], f"image_digits_n{n}{run_suffix(args)}")
    print()
    print(markdown(result, c, n, args.strategy))
    path = write_json(
        f"image_digits_n{n}" + run_suffix(args),
        {"params": vars(args), "total_time_s": time.perf_counter() - started, "paper": PAPER, "compare": c,
         "plots": [str(p) for p in pngs], **result},
    )  # fmt: skip
    print("\nwrote " + ", ".join(str(p) for p in [path, *pngs, result["anchors_png"]]))


if __name__ == "__main__":
    main()
