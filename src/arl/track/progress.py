"""A tqdm bar that can show live metrics: `bar.set_metrics({"reward/mean": 0.41})`.

Off when stderr is not a terminal (CI logs, pytest, `> log.txt`) unless `force=True` or
`ARL_PROGRESS=1`; `ARL_PROGRESS=0` turns it off everywhere.
"""

from __future__ import annotations

import os

from tqdm import tqdm


class Progress(tqdm):
    def set_metrics(self, metrics: dict[str, float], refresh: bool = True) -> None:
        """Show `metrics` as the postfix, numbers to 3 significant digits."""
        shown = {k: (f"{v:.3g}" if isinstance(v, float) else v) for k, v in metrics.items()}
        self.set_postfix(shown, refresh=refresh)


def progress(total: int | None, desc: str | None = None, *, force: bool = False, **kw) -> Progress:
    """`with progress(cfg.steps, "grpo") as bar: ... bar.update(); bar.set_metrics(m)`."""
    env = os.environ.get("ARL_PROGRESS", "").strip()
    if force or env == "1":
        disable = False
    elif env == "0":
        disable = True
    else:
        disable = None  # tqdm: off when the stream is not a TTY
    kw.setdefault("dynamic_ncols", True)
    return Progress(total=total, desc=desc, disable=disable, **kw)
