"""Every chapter's smoke run, and the metric rows it is expected to log.

    python tests/smoke.py --write [CHAPTER ...]         regenerate tests/expected/smoke/CHAPTER.json
    python tests/smoke.py --write --cpu [CHAPTER ...]   this CPU's own rows: CHAPTER.VENDOR-FAMILY-MODEL.json

The expected rows are what must not change when code only moves: every logged value but wall times
(`time/*`, `DOMAIN/time/*`, keys ending in `_s`) and memory (`memory/*`). Regenerate them only for a change that is meant
to change what a smoke run does, and say so in its commit message.

A run uses one torch thread, float64 models (`ARL_DTYPE`: in float32 the last bits of every sum depend on
the CPU's kernels, and after a few steps a sample can flip: two machines logged different rows for the
same commit) and its own ARL_HOME (`home()`), with the models and generated games
linked from the shared cache (they are built deterministically): cold starts are trained inside it, so
no cold start trained elsewhere with another thread count (whose float sums differ) can leak in. The
run is `python tests/traced_run.py`: the `arl` command with the arl functions it executed recorded
(tests/test_recipes.py reads them to check that each `--help` field is read).
"""

from __future__ import annotations

import json
import math
import os
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
EXPECTED = ROOT / "tests" / "expected" / "smoke"
SHARED = ("models", "textworld")
"""Folders of the shared cache that a smoke home links to: built deterministically, whatever the threads."""


def volatile(key: str) -> bool:
    """A logged value that differs between two identical runs: a wall time or a memory reading
    (`time/step`, `general/time/step`, `sandbox/latency_mean_s`, `memory/...`)."""
    return bool({"time", "memory"} & set(key.split("/")[:-1])) or key.endswith("_s")


def comparable(rows: list[dict]) -> list[dict]:
    return [{k: v for k, v in r.items() if not volatile(k)} for r in rows]


def home() -> Path:
    """A private ARL_HOME for smoke runs (one per process), linked to the shared cache's models and games."""
    global _HOME
    if _HOME is None:
        shared = Path(os.environ.get("ARL_HOME", Path.home() / ".cache" / "arl")).expanduser()
        _HOME = Path(tempfile.mkdtemp(prefix="arl-smoke-home-"))
        for name in SHARED:
            (shared / name).mkdir(parents=True, exist_ok=True)
            (_HOME / name).symlink_to(shared / name)
    return _HOME


_HOME: Path | None = None


def env() -> dict[str, str]:
    return {**os.environ, "PYTHONPATH": str(ROOT / "src"), "ARL_HOME": str(home()), "ARL_NUM_THREADS": "1",
            "ARL_PROGRESS": "0", "ARL_DTYPE": "float64"}


def command(trace: Path, *args: str) -> list[str]:
    return [sys.executable, str(ROOT / "tests" / "traced_run.py"), str(trace), *args]


def run_smoke(chapter: str, out: Path, name: str = "s", *overrides: str) -> subprocess.CompletedProcess:
    """`arl run CHAPTER --preset smoke` into `out/CHAPTER/name`, traced into `out/CHAPTER/name.trace.json`."""
    return subprocess.run(command(out / chapter / f"{name}.trace.json", "run", chapter, "--preset", "smoke", "--out",
                                  str(out), "--name", name, *overrides),
                          capture_output=True, text=True, env=env(), timeout=900)


def cpu_key() -> str:
    """This CPU's vendor, family and model (/proc/cpuinfo), e.g. AuthenticAMD-25-17. Even float64 smoke runs part
    between CPU generations for a few chapters (losses, spec-o3 and tempo: a gradient norm 4e-4 apart after one
    update, or a sampled token that flips), so such a chapter keeps a second set of rows for the other CPU."""
    try:
        lines = Path("/proc/cpuinfo").read_text().splitlines()
    except OSError:
        return "unknown"
    info: dict[str, str] = {}
    for line in lines:
        key, _, value = line.partition(":")
        info.setdefault(key.strip(), value.strip())
    return "-".join(info.get(k, "x").replace(" ", "") for k in ("vendor_id", "cpu family", "model"))


def expected_file(chapter: str) -> Path:
    """This CPU's rows for the chapter where it has its own, else the chapter's rows."""
    own = EXPECTED / f"{chapter}.{cpu_key()}.json"
    return own if own.is_file() else EXPECTED / f"{chapter}.json"


def expected(chapter: str) -> list[dict]:
    return json.loads(expected_file(chapter).read_text())


FLOAT_TOLERANCE = (1e-4, 1e-5)
"""(relative, absolute) tolerance of a logged float. The runs are float64, but what crosses the client
API (logprobs, advantages, loss outputs) is float32, as the Tinker API's `TensorData` is: a value can land
one float32 step apart on two CPUs (6e-8 relative; 1e-6 absolute in the sampler/trainer logprob gap). A
real edit changes a reward, a count, a mean of a few dozen samples or a loss by far more."""


def differences(got: list[dict], want: list[dict]) -> list[str]:
    """Where two row lists differ: a missing or extra row or key, or a value (floats to `FLOAT_TOLERANCE`)."""
    out = []
    if len(got) != len(want):
        out.append(f"{len(got)} rows, expected {len(want)}")
    for g, w in zip(got, want):
        step = w.get("step")
        for key in sorted(set(g) | set(w)):
            if key not in g or key not in w:
                out.append(f"step {step}: key {key!r} only in the {'run' if key in g else 'expected rows'}")
            elif not (g[key] == w[key] or (isinstance(g[key], float) and isinstance(w[key], float)
                                           and math.isclose(g[key], w[key], rel_tol=FLOAT_TOLERANCE[0],
                                                            abs_tol=FLOAT_TOLERANCE[1]))):
                out.append(f"step {step}: {key} = {g[key]!r}, expected {w[key]!r}")
    return out


def main(argv: list[str]) -> int:
    sys.path.insert(0, str(ROOT / "src"))
    from arl.recipes import CHAPTERS
    from arl.track import RunDir

    if not argv or argv[0] != "--write":
        print(__doc__)
        return 2
    per_cpu = "--cpu" in argv
    chapters = [a for a in argv[1:] if a != "--cpu"] or list(CHAPTERS)
    EXPECTED.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory() as out:
        for chapter in chapters:
            done = run_smoke(chapter, Path(out))
            if done.returncode != 0:
                print(done.stderr[-3000:], file=sys.stderr)
                return 1
            rows = comparable(RunDir.open(Path(out) / chapter / "s").read_metrics())
            target = EXPECTED / (f"{chapter}.{cpu_key()}.json" if per_cpu else f"{chapter}.json")
            target.write_text(json.dumps(rows, indent=1) + "\n")
            print(f"{chapter}: {len(rows)} rows -> {target}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
