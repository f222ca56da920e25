"""Where `make setup` gets torch: the pip arguments that install a CPU build on this machine.

    python scripts/torch_index.py [--index auto|URL|""] TORCH_REQUIREMENT

prints the arguments to put before the requirement in `pip install` (nothing, or `--index-url URL`) and,
on stderr, one line saying why. Only the standard library: it runs before anything else is installed.

- `--index auto` (the Makefile's default, TORCH_INDEX=auto): on Linux, PyPI's torch is a CUDA build that
  pulls about 3 GB of nvidia-* packages, so torch comes from PyTorch's CPU wheel index, unless pip here
  already resolves the requirement to a CPU build (a `+cpu` local version) or to a wheel on this
  machine's disk (a `file:` URL: find-links, a local mirror), as on machines that reach only the
  package index. The check is `pip install --dry-run --report`, which fetches only metadata. On macOS
  and Windows PyPI's torch is the right one (no CUDA build there): no index.
- `--index ""` (TORCH_INDEX=): plain pip, whatever it resolves (on Linux the CUDA build from PyPI).
- `--index URL`: that index (e.g. https://download.pytorch.org/whl/cu128 for one CUDA version).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile

CPU_INDEX = "https://download.pytorch.org/whl/cpu"


def resolve(requirement: str) -> dict | None:
    """What `pip install requirement` would install for torch here ({"version", "url"}), or None when pip
    cannot tell (no network, no such version)."""
    with tempfile.TemporaryDirectory() as tmp:
        report = os.path.join(tmp, "report.json")
        done = subprocess.run([sys.executable, "-m", "pip", "install", "--dry-run", "--ignore-installed", "--no-deps",
                               "--quiet", "--report", report, requirement], capture_output=True, text=True)
        if done.returncode != 0 or not os.path.exists(report):
            return None
        with open(report) as f:
            installs = json.load(f).get("install", [])
    for item in installs:
        if item["metadata"]["name"].lower() == "torch":
            return {"version": item["metadata"]["version"], "url": item.get("download_info", {}).get("url", "")}
    return None


def choose(platform: str, resolved: dict | None) -> tuple[str | None, str]:
    """(the index torch should come from, None for pip's own choice; why), for TORCH_INDEX=auto."""
    if not platform.startswith("linux"):
        return None, f"{platform}: PyPI's torch has no CUDA build here"
    if resolved is not None:
        version, url = resolved["version"], resolved["url"]
        if "cpu" in version.partition("+")[2]:
            return None, f"pip resolves torch {version} (a CPU build) from {url}"
        if url.startswith("file:"):
            return None, f"pip resolves torch {version} to a wheel on this machine ({url})"
        return CPU_INDEX, f"pip would install torch {version} from {url}: a CUDA build on Linux; the CPU build instead"
    return CPU_INDEX, "pip could not resolve torch here (no network?): the CPU build from PyTorch's index"


def pip_args(index: str, requirement: str, platform: str = sys.platform) -> tuple[list[str], str]:
    if index != "auto":
        return ([f"--index-url={index}"] if index else []), f"TORCH_INDEX={index!r}"
    url, why = choose(platform, resolve(requirement) if platform.startswith("linux") else None)
    return ([f"--index-url={url}"] if url else []), why


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--index", default="auto", help='auto (default), "" (plain pip) or an index URL')
    parser.add_argument("requirement", nargs="?", default="torch")
    args = parser.parse_args(argv)
    words, why = pip_args(args.index.strip(), args.requirement)
    print(f"torch: {' '.join(words) or 'the package index as configured'} ({why})", file=sys.stderr)
    print(" ".join(words))
    return 0


if __name__ == "__main__":
    sys.exit(main())
