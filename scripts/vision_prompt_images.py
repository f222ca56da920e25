"""Draw the picture of docs/chapters/vision-grpo.md: one test figure per question kind, as the tiny
model sees it (the pixels the image processor hands the vision tower, 112 x 112), with the grid of
28 x 28-pixel blocks that become its 16 image tokens, the question's options and the gold letter.

    .venv/bin/python scripts/vision_prompt_images.py [--out docs/chapters/img/vision-grpo-prompts.png]
"""

from __future__ import annotations

import argparse
import io
from pathlib import Path

import numpy as np
from PIL import Image
from transformers.models.qwen2_vl.image_processing_pil_qwen2_vl import smart_resize

from arl import models
from arl.data import figures
from arl.models import tiny_vlm
from arl.models.images import expected_tokens
from arl.rl.vision import FigureConfig


def seen_pixels(png: bytes) -> np.ndarray:
    """The image after the processor's resize (sides to multiples of 28 within its pixel bounds), 0-255 RGB."""
    image = Image.open(io.BytesIO(png)).convert("RGB")
    h, w = smart_resize(image.height, image.width, factor=28, min_pixels=tiny_vlm.MIN_PIXELS,
                        max_pixels=tiny_vlm.MAX_PIXELS)
    return np.asarray(image if (h, w) == (image.height, image.width) else image.resize((w, h), Image.BICUBIC))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", default="docs/chapters/img/vision-grpo-prompts.png")
    args = parser.parse_args()
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    processor = models.load_image_processor("arl/tiny-qwen2-vl-3m")
    _, _, test = figures.make_split(0, 0, 200)
    mini_kinds = FigureConfig().kind_list()
    picks = [next(f for f in test if f.kind == kind) for kind in figures.KINDS]
    fig, axes = plt.subplots(1, len(picks), figsize=(3.0 * len(picks), 4.4))
    for ax, f in zip(axes, picks):
        pixels = seen_pixels(f.png())
        ax.imshow(pixels, interpolation="nearest")
        for edge in range(28, pixels.shape[0], 28):
            ax.axhline(edge - 0.5, color="#999999", lw=0.6, ls=":")
            ax.axvline(edge - 0.5, color="#999999", lw=0.6, ls=":")
        n = expected_tokens(processor, f.size, f.size)
        preset = "mini and full" if f.kind in mini_kinds else "full"
        ax.set_title(f"{f.kind} ({preset}): {n} image tokens", fontsize=10)
        options = "\n".join(f"{letter}. {choice}" for letter, choice in zip(figures.LETTERS, f.choices))
        ax.set_xlabel(f"{f.question}\n{options}\ngold: {f.answer}", fontsize=8, loc="left")
        ax.set_xticks([])
        ax.set_yticks([])
    fig.tight_layout()
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(out, dpi=110)
    print(out)


if __name__ == "__main__":
    main()
