"""The package's layers import one way: data/metrics/defaults -> settings -> engine -> fields ->
retrieval -> features -> model/packing/synthesis -> training/diagnostics ->
evaluation/crossencoder -> serving -> api -> cli.
Siblings in a layer never import each other."""

import ast
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[2] / "fincrowd_ltr"
LAYERS = [
    {"data", "metrics", "progress", "defaults"},
    {"settings"},
    {"engine"},
    {"fields"},
    {"retrieval"},
    {"features"},
    {"model", "packing", "synthesis"},
    {"training", "diagnostics"},
    {"evaluation", "crossencoder"},
    {"serving"},
    {"api"},
    {"cli"},
]
LEVEL = {name: i for i, layer in enumerate(LAYERS) for name in layer}


def _imports(path: Path):
    tree = ast.parse(path.read_text())
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            yield node.module
        elif isinstance(node, ast.Import):
            yield from (a.name for a in node.names)


def test_every_import_points_down_the_layers():
    wrong = []
    for path in PACKAGE.rglob("*.py"):
        parts = path.relative_to(PACKAGE).with_suffix("").parts
        if parts[0] == "__init__":
            continue  # the package root re-exports the API lazily
        own = LEVEL.get(parts[0])
        assert own is not None, f"{path}: module outside the declared layers"
        for module in _imports(path):
            if not module.startswith("fincrowd_ltr."):
                continue
            target = module.split(".")[1]
            if target == parts[0]:
                continue
            level = LEVEL.get(target)
            assert level is not None, f"{path}: imports {module}, outside the declared layers"
            if level >= own:
                wrong.append(f"{'/'.join(parts)} -> {module}")
    assert not wrong, "imports against the layer order:\n" + "\n".join(sorted(wrong))


def _module_graph() -> dict[str, set[str]]:
    """Every module's imports of other package modules, function-level imports included
    (``from package import module`` names the module, not the package)."""
    modules = {
        ".".join(("fincrowd_ltr", *p.relative_to(PACKAGE).with_suffix("").parts))
        for p in PACKAGE.rglob("*.py")
        if p.name != "__init__.py"
    }
    graph = {}
    for name in modules:
        path = PACKAGE.joinpath(*name.split(".")[1:]).with_suffix(".py")
        found = set()
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
                for alias in node.names:
                    target = f"{node.module}.{alias.name}"
                    found.add(target if target in modules else node.module)
            elif isinstance(node, ast.Import):
                found |= {a.name for a in node.names}
        graph[name] = (found & modules) - {name}
    return graph


def test_no_import_circle_anywhere():
    graph = _module_graph()
    state: dict[str, int] = {}  # 1: on the current path, 2: done
    circles = []

    def visit(node: str, path: list[str]) -> None:
        state[node] = 1
        for nxt in sorted(graph[node]):
            if state.get(nxt) == 1:
                circles.append(" -> ".join([*path[path.index(nxt) :], nxt]))
            elif nxt not in state:
                visit(nxt, [*path, nxt])
        state[node] = 2

    for node in sorted(graph):
        if node not in state:
            visit(node, [node])
    assert not circles, "import circles:\n" + "\n".join(circles)


def test_evaluating_needs_no_lightning():
    import subprocess
    import sys

    code = (
        "import sys\n"
        "import fincrowd_ltr.api.evaluate, fincrowd_ltr.evaluation.report\n"
        "assert 'lightning' not in sys.modules, 'lightning imported'\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
