"""An install that fits every laptop.

- Without the extras' packages (textworld and jericho, bm25s, the serve extra's, the trackers'), `import
  arl`, `arl list` and every chapter's module load; a chapter that needs a missing extra stops with one
  line naming it (`pip install 'agentic-rl-lab[textworld]'`) before its run folder exists. The packages
  are hidden from a child process by a `sitecustomize` on its PYTHONPATH, as if they had never been
  installed.
- pyproject.toml declares what the code imports, no more: the extras' packages are not in the base
  dependencies, `all` holds every extra, `dev` holds `all`.
- scripts/torch_index.py, which picks where `make setup` gets torch: PyTorch's CPU wheel index on an
  ordinary Linux machine (PyPI's torch is a CUDA build there), nothing extra where pip already resolves
  a CPU build or a local wheel, and PyPI on macOS and Windows.
"""

from __future__ import annotations

import ast
import importlib.util
import json
import os
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

from arl import extras
from arl.recipes import CHAPTERS, NEEDS

ROOT = Path(__file__).resolve().parents[1]
ARL = Path(sys.executable).with_name("arl")
BLOCKED = ("textworld", "jericho", "bm25s", "fastapi", "uvicorn", "tinker", "tinker_cookbook", "tensorboard",
           "swanlab", "wandb", "mlflow")
"""The extras' packages (and the optional trackers'): a plain `pip install agentic-rl-lab` has none of them."""

SITECUSTOMIZE = '''
import os, sys

# None in sys.modules: `import textworld` raises ModuleNotFoundError and importlib.util.find_spec says None
# (as libraries ask before they use an optional package), as if it had never been installed.
for name in os.environ["ARL_TEST_BLOCK"].split(","):
    sys.modules[name] = None
'''


@pytest.fixture(scope="module")
def bare_env(tmp_path_factory):
    """The environment of a child process that cannot import the BLOCKED packages."""
    folder = tmp_path_factory.mktemp("blocker")
    (folder / "sitecustomize.py").write_text(SITECUSTOMIZE)
    env = {**os.environ, "ARL_TEST_BLOCK": ",".join(BLOCKED), "ARL_PROGRESS": "0", "ARL_NUM_THREADS": "1",
           "PYTHONPATH": os.pathsep.join([str(folder), os.environ.get("PYTHONPATH", "")]).rstrip(os.pathsep)}
    env.pop("ARL_DEBUG", None)
    return env


def _arl(args, env, cwd):
    return subprocess.run([str(ARL), *args], env=env, cwd=cwd, capture_output=True, text=True, timeout=300)


def test_without_the_extras_arl_imports_and_every_chapter_module_loads(bare_env, tmp_path):
    script = f"""
import importlib, json, sys
blocked = {list(BLOCKED)!r}
hidden = []
for name in blocked:
    try:
        importlib.import_module(name)
    except ImportError:
        hidden.append(name)
import arl, arl.envs, arl.tools, arl.rollout, arl.rl, arl.report, arl.track
from arl.tools import Passage, format_passages
from arl.recipes import CHAPTERS, load
loaded = [chapter for chapter in CHAPTERS if load(chapter).Config]
print(json.dumps({{"hidden": hidden, "loaded": loaded, "present": sorted(m for m in blocked if sys.modules.get(m) is not None),
                  "passages": format_passages([Passage("p", "Askel", "Askel is a town.")])}}))
"""
    done = subprocess.run([sys.executable, "-c", script], env=bare_env, cwd=tmp_path, capture_output=True, text=True,
                          timeout=300)
    assert done.returncode == 0, done.stderr
    out = json.loads(done.stdout.strip().splitlines()[-1])
    assert out["hidden"] == list(BLOCKED), "the blocker has teeth: none of the packages imports"
    assert out["loaded"] == list(CHAPTERS) and out["present"] == []
    assert out["passages"] == "Askel is a town."


def test_arl_list_without_the_extras(bare_env, tmp_path):
    done = _arl(["list"], bare_env, tmp_path)
    assert done.returncode == 0, done.stderr
    assert [line.split()[0] for line in done.stdout.splitlines()] == list(CHAPTERS)


@pytest.mark.parametrize("chapter, extra", [("textworld", "textworld"), ("search-r1", "search")])
def test_a_chapter_without_its_extra_names_it_before_its_run_folder(bare_env, tmp_path, chapter, extra):
    done = _arl(["run", chapter, "--preset", "smoke", "--out", "runs"], bare_env, tmp_path)
    assert done.returncode == 2
    assert done.stdout == ""
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith(f"arl run {chapter}: the {chapter} chapter needs"), done.stderr
    assert lines[0].endswith(f"pip install 'agentic-rl-lab[{extra}]'")
    assert not (tmp_path / "runs").exists()
    # its --help needs nothing; a comparison is refused the same way, before its folder
    assert _arl(["run", chapter, "--help"], bare_env, tmp_path).returncode == 0
    if chapter == "textworld":
        done = _arl(["compare", chapter, "--seeds", "1", "--out", "cmp"], bare_env, tmp_path)
        assert done.returncode == 2 and f"agentic-rl-lab[{extra}]" in done.stderr and not (tmp_path / "cmp").exists()


def test_every_chapter_that_needs_textworld_or_bm25s_says_so():
    """NEEDS lists each chapter whose code reaches the extras' packages: the TextWorld games (through
    `arl.data.textworld_games`) or the BM25 index (`arl.tools.search.BM25Index`, through `arl.rl.search`)."""
    reaches = {"textworld": ("envs.textworld", "rl.games", "textworld_games"), "search": ("BM25Index", "rl.search")}
    for chapter, (module, _) in CHAPTERS.items():
        text = (ROOT / "src" / Path(*module.split("."))).with_suffix(".py").read_text()
        for extra, marks in reaches.items():
            assert any(m in text for m in marks) == (extra in NEEDS.get(chapter, ())), (chapter, extra)
    assert all(need in extras.EXTRAS or need == extras.LINUX for needs in NEEDS.values() for need in needs)
    assert set(NEEDS) <= set(CHAPTERS)


def test_missing_extra_message(monkeypatch):
    monkeypatch.setitem(extras.EXTRAS, "nothing", ("arl_no_such_module",))
    with pytest.raises(extras.MissingExtra, match=r"^the x chapter needs the arl_no_such_module package: "
                                                  r"pip install 'agentic-rl-lab\[nothing\]'$"):
        extras.check(["nothing"], "the x chapter")
    monkeypatch.setattr(sys, "platform", "darwin")
    with pytest.raises(extras.MissingExtra, match=r"^the retool chapter runs model-written code in a sandbox .* "
                                                  r"run it on Linux \(a container, or WSL 2 on Windows\)$"):
        extras.check([extras.LINUX], "the retool chapter")


# --- pyproject.toml ---------------------------------------------------------------------------------------

PROJECT = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
IMPORT_NAMES = {"pillow": "PIL", "math-verify": "math_verify"}
UNDECLARED_BY_TRANSFORMERS = {"jinja2", "gguf"}
"""transformers needs these for chat templates and GGUF files without declaring them; arl never imports them."""


def _name(requirement: str) -> str:
    return requirement.split(";")[0].split("[")[0].strip().split("<")[0].split(">")[0].split("=")[0].split("!")[0] \
        .strip().lower()


def _imported_modules() -> set[str]:
    names = set()
    for path in (ROOT / "src" / "arl").rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Import):
                names |= {a.name.split(".")[0] for a in node.names}
            elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
                names.add(node.module.split(".")[0])
    return names


def test_every_dependency_is_imported_and_the_heavy_ones_are_extras():
    base = [_name(r) for r in PROJECT["dependencies"]]
    imported = _imported_modules()
    unused = [d for d in base if IMPORT_NAMES.get(d, d.replace("-", "_")) not in imported
              and d not in UNDECLARED_BY_TRANSFORMERS]
    assert unused == [], "declared but never imported: remove them from pyproject.toml"
    assert UNDECLARED_BY_TRANSFORMERS <= set(base)
    optional = PROJECT["optional-dependencies"]
    for extra in extras.EXTRAS:
        assert extra in optional and not {_name(r) for r in optional[extra]} & set(base)
    assert {"textworld", "bm25s"} & set(base) == set()
    assert optional["all"] == [f"agentic-rl-lab[{','.join(extras.EXTRAS)}]"]
    assert "agentic-rl-lab[all]" in optional["dev"]


# --- where torch comes from (scripts/torch_index.py) ---------------------------------------------------------

spec = importlib.util.spec_from_file_location("torch_index", ROOT / "scripts" / "torch_index.py")
torch_index = importlib.util.module_from_spec(spec)
spec.loader.exec_module(torch_index)
CPU = "https://download.pytorch.org/whl/cpu"
PYPI_WHEEL = "https://files.pythonhosted.org/packages/01/79/1f2d/torch-2.13.0-cp311-cp311-manylinux_2_28_x86_64.whl"


@pytest.mark.parametrize("platform, resolved, index", [
    # an ordinary Linux machine: PyPI's torch is the CUDA build, so the CPU index
    ("linux", {"version": "2.13.0", "url": PYPI_WHEEL}, CPU),
    # no answer from pip (offline): the CPU index all the same
    ("linux", None, CPU),
    # this project's machines: a local CPU wheel in find-links
    ("linux", {"version": "2.13.0+cpu", "url": "file:///opt/wheels/torch-2.13.0%2Bcpu-cp311-cp311-linux.whl"}, None),
    # a CPU build from an index pip is already configured with (a mirror of the CPU index)
    ("linux", {"version": "2.13.0+cpu", "url": "https://mirror.example/whl/cpu/torch-2.13.0+cpu.whl"}, None),
    # a wheel on this machine's disk, whatever its build: the machine's owner put it there
    ("linux", {"version": "2.13.0", "url": "file:///srv/wheels/torch-2.13.0-cp311-cp311-linux.whl"}, None),
    # macOS and Windows: PyPI's torch has no CUDA
    ("darwin", None, None),
    ("win32", None, None),
])
def test_torch_index_choice(platform, resolved, index):
    assert torch_index.choose(platform, resolved)[0] == index


def test_torch_index_setting_overrides_the_detection(monkeypatch):
    monkeypatch.setattr(torch_index, "resolve", lambda requirement: pytest.fail("no detection for an explicit index"))
    assert torch_index.pip_args("", "torch==2.13.0", "linux")[0] == []
    cu = "https://download.pytorch.org/whl/cu128"
    assert torch_index.pip_args(cu, "torch==2.13.0", "linux")[0] == [f"--index-url={cu}"]
    monkeypatch.setattr(torch_index, "resolve", lambda requirement: {"version": "2.13.0", "url": PYPI_WHEEL})
    assert torch_index.pip_args("auto", "torch==2.13.0", "linux")[0] == [f"--index-url={CPU}"]
    assert torch_index.pip_args("auto", "torch==2.13.0", "darwin")[0] == []


def test_torch_index_here_agrees_with_what_pip_resolves():
    """The script end to end, as `make setup` runs it: its choice follows what pip resolves on this machine."""
    resolved = torch_index.resolve("torch==2.13.0")
    done = subprocess.run([sys.executable, str(ROOT / "scripts" / "torch_index.py"), "torch==2.13.0"],
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    expected = torch_index.choose(sys.platform, resolved)[0]
    assert done.stdout.strip() == (f"--index-url={expected}" if expected else "")
    assert done.stderr.startswith("torch: ")
