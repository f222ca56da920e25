"""One-variable comparisons: run every arm of a chapter with the same seeds, in one folder that can be
extended and resumed.

    plan = Plan.create("runs/compare/losses", "grpo", "mini", base={}, arms=parse_vary(["loss_fn=is,ppo"]), seeds=[0, 1, 2],
                       resolve=functools.partial(config.resolve, grpo.Config, grpo.PRESETS))
    run_all(plan)              # each run is `arl run` in its own process, its log under logs/

`resolve(preset, overrides) -> config` is the chapter's config resolver: the caller (the CLI) passes it,
so nothing here imports a recipe.

Layout: `compare.json` (the plan), `runs/<chapter>/<arm>-seed<k>/` (ordinary run folders), `logs/`.
A run is finished when its `eval/summary.json` exists; an unfinished one is resumed from its last
checkpoint, so an interrupted comparison picks up where it stopped.
"""

from __future__ import annotations

import dataclasses
import json
import os
import re
import subprocess
import sys
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass, field
from pathlib import Path

from . import _io
from .progress import progress

PLAN_FILE = "compare.json"


@dataclass
class Arm:
    name: str
    overrides: dict[str, str]

    @property
    def slug(self) -> str:
        return re.sub(r"[^A-Za-z0-9_.+-]+", "-", self.name.replace("=", "-")).strip("-") or "base"


def parse_vary(items: list[str]) -> list[Arm]:
    """Arms from `--vary key=a,b,c` options: one arm per value, each changing only that key against the
    base; several --vary options give one-at-a-time arms for each key. Each arm is compared with its
    one-switch partner (`pair_arms`): the first arm of its key, or an earlier arm that is its baseline. No --vary: one arm, the preset as it is, run over the seeds
    (seed replicates, e.g. of a multi-stage chapter whose stages are the comparison)."""
    arms: list[Arm] = []
    for item in items:
        if "=" not in item:
            raise ValueError(f"--vary {item!r}: write key=value1,value2 (for example loss_fn=ppo,cispo)")
        key, values = item.split("=", 1)
        key = key.strip().replace("-", "_")
        for value in (v.strip() for v in values.split(",")):
            if not value:
                raise ValueError(f"--vary {item!r}: an empty value; separate values by commas without blanks")
            arm = Arm(f"{key}={value}", {key: value})
            if any(a.name == arm.name for a in arms):
                raise ValueError(f"--vary: the arm {arm.name} is given twice")
            arms.append(arm)
    return arms or [Arm("preset", {})]


IGNORED_DIFF = ("seed", "start_seed", "threads", "tracker")
"""Config fields that may differ between runs without changing what is compared."""


def pair_arms(arms: list[Arm], configs: dict[str, dict]) -> dict[str, str | None]:
    """Each arm's partner: the first arm before it in the plan whose resolved config differs from its
    own in some of the fields its switch sets (`arm.overrides`) and in no other field, so every
    difference in the report is one switch against its own baseline:

        partner(b) = first a before b with  0 < |diff(cfg_a, cfg_b)| and diff(cfg_a, cfg_b) <= keys(b.overrides)

    (`IGNORED_DIFF` fields left out). None when no earlier arm qualifies: the first arm (the
    reference), or e.g. `--vary b=u,v` where neither value is b's preset value, so b=u differs from
    every earlier arm in two fields; `configs`: arm name -> its config as a dict."""
    def diff(a: str, b: str) -> set[str]:
        keys = (set(configs[a]) | set(configs[b])) - set(IGNORED_DIFF)
        return {k for k in keys if json.dumps(configs[a].get(k)) != json.dumps(configs[b].get(k))}

    partners: dict[str, str | None] = {}
    for i, arm in enumerate(arms):
        switch = set(arm.overrides)
        partners[arm.name] = next((a.name for a in arms[:i] if diff(a.name, arm.name) and diff(a.name, arm.name) <= switch),
                                  None)
    return partners


@dataclass
class Plan:
    folder: Path
    chapter: str
    preset: str
    base: dict[str, str]
    arms: list[Arm]
    seeds: list[int]
    notes: dict = field(default_factory=dict)
    per_seed: list[str] = field(default_factory=list)
    """Config fields set to each run's seed, like `seed` (`--start-per-seed`: start_seed, a cold start per seed)."""
    resolve: Callable[[str, dict], object] | None = field(default=None, repr=False, compare=False)
    """The chapter's `resolve(preset, overrides) -> Config` (not saved: the caller gives it)."""

    @classmethod
    def create(cls, folder, chapter: str, preset: str, base: dict[str, str], arms: list[Arm], seeds: list[int],
               resolve: Callable[[str, dict], object], per_seed: list[str] = ()) -> "Plan":
        """A new plan, or an existing one in `folder` extended by new arms and seeds (chapter, preset and
        base settings must be the same: a comparison holds one fixed setting)."""
        folder = Path(folder)
        if folder.exists() and not folder.is_dir():
            raise FileExistsError(f"--out {folder} is a file; pass a folder for the comparison")
        if folder.is_dir() and not (folder / PLAN_FILE).is_file() and any(folder.iterdir()):
            raise FileExistsError(f"--out {folder} holds files but no {PLAN_FILE}: it is not a comparison; pass an "
                                  f"empty or new folder, or a comparison folder to extend")
        if (folder / PLAN_FILE).is_file():
            old = cls.open(folder, resolve)
            for what, a, b in (("chapter", old.chapter, chapter), ("preset", old.preset, preset), ("--set", old.base, base),
                               ("--start-per-seed", old.per_seed, list(per_seed))):
                if a != b:
                    raise ValueError(f"{folder} compares {what} {a!r}, not {b!r}; choose another --out for a new comparison")
            names = {a.name for a in old.arms}
            old.arms += [a for a in arms if a.name not in names]
            old.seeds += [s for s in seeds if s not in old.seeds]
            plan = old
        else:
            plan = cls(folder, chapter, preset, dict(base), list(arms), list(seeds), per_seed=list(per_seed), resolve=resolve)
        plan.check()
        plan.save()
        return plan

    @classmethod
    def open(cls, folder, resolve: Callable[[str, dict], object] | None = None) -> "Plan":
        folder = Path(folder)
        if not (folder / PLAN_FILE).is_file():
            raise FileNotFoundError(f"{folder} has no {PLAN_FILE}: it is not a comparison made by `arl compare`")
        d = json.loads((folder / PLAN_FILE).read_text())
        return cls(folder, d["chapter"], d["preset"], d["base"], [Arm(**a) for a in d["arms"]], d["seeds"], d.get("notes", {}),
                   d.get("per_seed", []), resolve)

    def save(self) -> None:
        d = {"chapter": self.chapter, "preset": self.preset, "base": self.base,
             "arms": [asdict(a) for a in self.arms], "seeds": self.seeds, "notes": self.notes, "per_seed": self.per_seed}
        self.folder.mkdir(parents=True, exist_ok=True)
        _io.atomic_write_text(self.folder / PLAN_FILE, json.dumps(d, indent=2) + "\n")

    def check(self) -> None:
        """Resolve every arm's config for every seed, so that a bad key or value fails before any run."""
        if not self.arms:
            raise ValueError("a comparison needs at least one arm")
        if not self.seeds:
            raise ValueError("--seeds must be at least 1")
        slugs = [a.slug for a in self.arms]
        if len(set(slugs)) != len(slugs):
            raise ValueError(f"two arms share a folder name: {slugs}")
        for name in ("seed", *self.per_seed):
            if name in self.base or any(name in a.overrides for a in self.arms):
                raise ValueError(f"{name} is set to each run's seed (--seeds{', --start-per-seed' if name != 'seed' else ''}), "
                                 "not by --vary or --set")
        for arm in self.arms:
            self.config(arm, self.seeds[0])

    def overrides(self, arm: Arm, seed: int) -> dict[str, str]:
        return {**self.base, **arm.overrides, **{name: str(seed) for name in ("seed", *self.per_seed)}}

    def config(self, arm: Arm, seed: int):
        """The resolved config of `arm` at `seed` (through the chapter's `resolve`)."""
        if self.resolve is None:
            raise ValueError(f"the plan in {self.folder} was opened without its chapter's config resolver")
        try:
            return self.resolve(self.preset, self.overrides(arm, seed))
        except ValueError as e:
            raise ValueError(f"arm {arm.name}: {e}") from None

    def partners(self) -> dict[str, str | None]:
        """Each arm's one-switch partner (`pair_arms`), from the configs resolved at the first seed."""
        return pair_arms(self.arms, {a.name: dataclasses.asdict(self.config(a, self.seeds[0])) for a in self.arms})

    def run_dir(self, arm: Arm, seed: int) -> Path:
        return self.folder / "runs" / self.chapter / f"{arm.slug}-seed{seed}"

    def finished(self, arm: Arm, seed: int) -> bool:
        return (self.run_dir(arm, seed) / "eval" / "summary.json").is_file()

    def command(self, arm: Arm, seed: int, threads: int) -> list[str]:
        head = [sys.executable, "-m", "arl.cli", "--threads", str(threads), "run", self.chapter]
        folder = self.run_dir(arm, seed)
        if (folder / "config.json").is_file():
            return head + ["--resume", str(folder)]
        return head + ["--preset", self.preset, "--out", str(self.folder / "runs"), "--name", folder.name,
                       *[f"{k}={v}" for k, v in self.overrides(arm, seed).items()]]


def _die_with_parent(parent: int):
    """A `preexec_fn`: the run is SIGKILLed when the comparison that started it dies, however it dies (a
    kill -9 included), so no orphan goes on writing a run folder that a rerun resumes (Linux: prctl)."""
    def set_death_signal() -> None:
        try:
            import ctypes

            ctypes.CDLL(None, use_errno=True).prctl(1, 9, 0, 0, 0)  # PR_SET_PDEATHSIG, SIGKILL
        except (OSError, AttributeError):
            return
        if os.getppid() != parent:  # the comparison died before the signal was set
            os._exit(1)
    return set_death_signal


def default_jobs() -> int:
    """Runs at once: one per core (up to 8), each with one torch thread. The tiny models use a second
    thread poorly, so on 2 cores two 1-thread runs finish 9 GRPO mini runs in 17 minutes where one
    2-thread run at a time takes about 25 (docs/chapters/losses.md)."""
    return max(1, min(8, os.cpu_count() or 1))


def run_all(plan: Plan, jobs: int | None = None, threads: int | None = None) -> list[str]:
    """Run (or resume) every unfinished (arm, seed), `jobs` at once with `threads` torch threads each
    (default: the cores shared among the jobs); returns the failures as 'arm seed k: log path'."""
    jobs = jobs or default_jobs()
    threads = threads or max(1, (os.cpu_count() or 1) // jobs)
    todo = [(arm, seed) for seed in plan.seeds for arm in plan.arms if not plan.finished(arm, seed)]
    logs = plan.folder / "logs"
    logs.mkdir(parents=True, exist_ok=True)
    failures: list[str] = []

    def one(item) -> None:
        arm, seed = item
        log = logs / f"{arm.slug}-seed{seed}.log"
        with open(log, "a", encoding="utf-8") as f:
            # the death signal follows the thread that starts the child: a pool thread, alive until every run is done
            rc = subprocess.run(plan.command(arm, seed, threads), stdout=f, stderr=subprocess.STDOUT,
                                env={**os.environ, "ARL_PROGRESS": "0"}, preexec_fn=_die_with_parent(os.getpid())).returncode
        if rc != 0 or not plan.finished(arm, seed):
            failures.append(f"{arm.name} seed {seed}: exit {rc}, see {log}")

    done = len(plan.arms) * len(plan.seeds) - len(todo)
    with progress(len(plan.arms) * len(plan.seeds), f"compare {plan.chapter}", initial=done, unit="run") as bar:
        with ThreadPoolExecutor(max_workers=jobs) as pool:
            for _ in pool.map(lambda item: (one(item), bar.update()), todo):
                pass
    return failures
