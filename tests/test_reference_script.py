"""A script written the way the reference lab calls PyTRIO runs on the local engine, unchanged but for
its import and model name (examples/pytrio_style.py)."""

import os
import subprocess
import sys
from pathlib import Path

from conftest import TINY

ROOT = Path(__file__).resolve().parents[1]


def test_pytrio_style_script_runs():
    out = subprocess.run([sys.executable, str(ROOT / "examples" / "pytrio_style.py"), "--model", TINY, "--steps", "4"],
                         capture_output=True, text=True, env=os.environ.copy(), timeout=600)
    assert out.returncode == 0, out.stderr[-3000:]
    for name in ("importance_sampling", "ppo", "cispo", "dro"):
        assert f"loss_fn={name}" in out.stdout
    assert "sampler_path arl://" in out.stdout and "state_path arl://" in out.stdout
    assert "async OPD step" in out.stdout
