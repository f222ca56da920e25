"""The package's layers, walked from the code's own imports (every `import`, also inside functions;
`if TYPE_CHECKING:` blocks aside, they import nothing when the code runs), and the shape of the recipes.

LAYERS is the order the code keeps, bottom first: a module imports only from its own layer or below.
It is DESIGN.md's layer list with the places where the code has a reason to differ: the local engine
(`client`, `backend`) runs the built-in losses and loads the model zoo, so `losses` and `models` sit
below it; environments wrap the mini tasks and grade with the verifiers, so `data` and `rewards` sit
below `envs`; the rollout drives environments, so `envs` sits below `rollout`; and the modules DESIGN.md
does not list (`settings`, `config`, `checkpoints`, `coldstart`, `distill`, `decide`, `export`) have their place.
"""

import ast
from pathlib import Path

import pytest

SRC = Path(__file__).resolve().parents[1] / "src"
LAYERS = [
    {"types", "settings", "config", "losses", "advantages", "rewards", "atomic", "extras"},
    {"checkpoints", "models", "tools"},
    {"backend", "data"},
    {"client", "envs", "export"},
    {"rollout", "serve"},
    {"eval", "track", "coldstart"},
    {"report", "decide", "distill", "path", "audit"},
    {"rl"},
    {"recipes"},
    {"cli"},
]
FACE = "__init__"
"""`arl/__init__.py`, the package's face (the client API): it may import anything below the recipes."""


def unit(module: str) -> str:
    """The layer unit of a dotted module name under `arl`: its package or top-level module."""
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else FACE


def layer(name: str) -> int:
    if name == FACE:
        return LAYERS.index({"rl"})
    return next(i for i, units in enumerate(LAYERS) if name in units)


def _type_checking(node) -> bool:
    return isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test)


def imports(path: Path) -> list[tuple[int, str]]:
    """(line, dotted module) of every arl import in a file, relative ones resolved."""
    parts = path.relative_to(SRC).with_suffix("").parts
    package = list(parts[:-1])
    out = []

    def visit(node):
        if _type_checking(node):
            return
        if isinstance(node, ast.Import):
            out.extend((node.lineno, a.name) for a in node.names if a.name.split(".")[0] == "arl")
        elif isinstance(node, ast.ImportFrom):
            base = package[: len(package) - node.level + 1] if node.level else []
            module = base + (node.module.split(".") if node.module else [])
            if module and module[0] == "arl":
                for a in node.names:  # `from arl import settings` imports the module arl.settings
                    sub = SRC.joinpath(*module, a.name)
                    target = module + [a.name] if sub.is_dir() or sub.with_suffix(".py").is_file() else module
                    out.append((node.lineno, ".".join(target)))
        for child in ast.iter_child_nodes(node):
            visit(child)
    visit(ast.parse(path.read_text()))
    return out


FILES = sorted((SRC / "arl").rglob("*.py"))


def test_every_module_has_a_layer():
    units = {unit(".".join(f.relative_to(SRC).with_suffix("").parts)) for f in FILES}
    assert units - {FACE} <= set().union(*LAYERS), "a new package or module needs its place in LAYERS"


@pytest.mark.parametrize("path", FILES, ids=lambda p: str(p.relative_to(SRC / "arl")))
def test_imports_point_down(path):
    here = unit(".".join(path.relative_to(SRC).with_suffix("").parts).removesuffix(".__init__"))
    upward = [f"line {line}: {module}" for line, module in imports(path)
              if unit(module) != here and layer(unit(module)) > layer(here)]
    assert upward == [], f"{path.name} ({here}) imports from a layer above it"


def test_nothing_below_the_recipes_imports_a_recipe():
    """Only the recipes themselves and the CLI may import `arl.recipes` (the CLI hands the compare code
    what it needs of a recipe)."""
    offenders = [f"{p.relative_to(SRC)}:{line}" for p in FILES
                 if p.parent.name != "recipes" and p.name != "cli.py"
                 for line, module in imports(p) if module.startswith("arl.recipes")]
    assert offenders == []
    assert not [p for p in FILES if p.parent.name != "recipes" and p.name != "cli.py" and "arl.recipes" in p.read_text()]


def test_data_and_envs_are_not_tied_both_ways():
    """Environments use the tasks (`data`); the tasks never import an environment."""
    assert not [(p.name, m) for p in (SRC / "arl" / "data").glob("*.py") for _, m in imports(p) if m.startswith("arl.envs")]


def test_the_walk_sees_function_local_and_relative_imports():
    """The walk has teeth: the CLI's imports inside its functions are found and resolved; a type-only
    import is not an arrow."""
    cli = {module for _, module in imports(SRC / "arl" / "cli.py")}
    assert {"arl.recipes", "arl.track.compare", "arl.report.compare", "arl.settings"} <= cli
    multiturn = {module for _, module in imports(SRC / "arl" / "rollout" / "multiturn.py")}
    assert "arl.tools.calls" in multiturn and not any(m.startswith("arl.envs") for m in multiturn)
    assert layer("rl") > layer("report") > layer("eval") > layer("rollout") > layer("envs") > layer("data")


RECIPES = sorted(p for p in (SRC / "arl" / "recipes").glob("*.py") if p.name != "__init__.py")


@pytest.mark.parametrize("path", RECIPES, ids=lambda p: p.stem)
def test_every_recipe_shows_its_datums_and_its_update_calls(path):
    """A chapter's loop builds its datums with a `rollout.datums` helper and calls the client's
    forward_backward and optim_step itself, in its own file, short enough to read at once."""
    tree = ast.parse(path.read_text())
    calls = {n.func.attr if isinstance(n.func, ast.Attribute) else getattr(n.func, "id", "")
             for n in ast.walk(tree) if isinstance(n, ast.Call)}
    assert calls & {"rl_datum", "trajectory_datum", "sft_datum", "decision_datum"}, "no datum built in the recipe"
    assert calls & {"forward_backward", "forward_backward_custom"} and "optim_step" in calls
    main = next(n for n in tree.body if isinstance(n, ast.FunctionDef) and n.name == "main")
    loop = max((n.end_lineno - n.lineno + 1 for n in ast.walk(main) if isinstance(n, (ast.For, ast.While))), default=0)
    assert loop <= 60 and len(path.read_text().splitlines()) <= 180
