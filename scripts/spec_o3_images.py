"""Draw the picture of docs/chapters/spec-o3.md: trajectories of a trained Spec-o3 run as the model saw
them, one per task, from the run's last logged step: the full-spectrum prompt image, what the policy
wrote, the tool's rendered window (the image observation) and the answer. The images are the run's own
(`images/`, 224 x 56 pixels, the size the vision tower gets: 8 x 2 tokens of 28 x 28 pixels each).

    .venv/bin/python scripts/spec_o3_images.py [--run runs/compare/spec-o3/runs/spec-o3/tool-true-seed0]
        [--out docs/chapters/img/spec-o3-trajectories.png]
"""

from __future__ import annotations

import argparse
import io
import textwrap
from pathlib import Path

import numpy as np
from PIL import Image

from arl.track import RunDir


def pixels(run: RunDir, name: str) -> np.ndarray:
    return np.asarray(Image.open(io.BytesIO(run.read_image(name))).convert("RGB"))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--run", default="runs/compare/spec-o3/runs/spec-o3/tool-true-seed0")
    parser.add_argument("--out", default="docs/chapters/img/spec-o3-trajectories.png")
    args = parser.parse_args()
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    run = RunDir.open(Path(args.run))
    rows = run.read_rollouts(max(m["step"] for m in run.read_metrics()))
    picked = {}
    for row in rows:  # the first episode of each task that zoomed
        if row["task"] not in picked and len(row["turns"]) > 1 and row["turns"][0].get("images"):
            picked[row["task"]] = row
    fig, axes = plt.subplots(len(picked), 2, figsize=(11, 2.1 * len(picked)), squeeze=False)
    for (task, row), (left, right) in zip(sorted(picked.items()), axes):
        first, last = row["turns"][0], row["turns"][-1]
        for ax, name, title in ((left, row["images"][0], f"prompt image ({task}, gold {row['answer']}): full spectrum"),
                                (right, first["images"][0], "tool observation: the window the policy asked for")):
            image = pixels(run, name)
            ax.imshow(image, interpolation="nearest")
            for x in range(28, image.shape[1], 28):  # the 28 x 28 blocks that become the image tokens
                ax.axvline(x - 0.5, color="tab:orange", lw=0.4, ls=":")
            ax.axhline(27.5, color="tab:orange", lw=0.4, ls=":")
            ax.set_xticks([])
            ax.set_yticks([])
            ax.set_title(title, fontsize=8, loc="left")
        call = first["text"].replace("\n", " ")
        said = f"policy: {call}\nthen: {last['text']}  (reward {row['reward']:+.1f})"
        right.text(0, -0.12, "\n".join(textwrap.wrap(said, 120)), transform=right.transAxes,
                   fontsize=6.5, va="top", ha="left", family="monospace")
    fig.tight_layout(h_pad=3.2)
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(args.out, dpi=130)
    print(args.out)


if __name__ == "__main__":
    main()
