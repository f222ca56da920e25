"""One readable file per chapter: a `Config` dataclass, `PRESETS` and `main(cfg, run, resume)`.

Recipes import the library, never each other; the library never imports a recipe.
"""

from __future__ import annotations

import importlib

CHAPTERS = {
    "grpo": ("arl.recipes.grpo", "01 GRPO: group-relative policy optimisation on mini arithmetic word problems"),
    "sft": ("arl.recipes.sft", "01 GRPO's control: continued SFT from the same cold start for the same wall time"),
}


def load(chapter: str):
    if chapter not in CHAPTERS:
        raise ValueError(f"unknown chapter {chapter!r}; `arl list` shows them: {', '.join(CHAPTERS)}")
    return importlib.import_module(CHAPTERS[chapter][0])
