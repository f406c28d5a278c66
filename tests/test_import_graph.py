"""The import graph of mxtorch: every import statement (module level, inside functions, under
``TYPE_CHECKING``), walked with ``ast``; no modules import each other in a circle, no module imports
from a layer above its own (the layer table of docs/architecture.md), and every gluon module
imports on its own."""

from __future__ import annotations

import ast
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent / "mxtorch"
DOC = ROOT.parent / "docs" / "architecture.md"

# The layers, lowest first: a module imports from its own layer or those below.  A module belongs
# to the layer of its longest listed prefix.  docs/architecture.md's table lists the same layers,
# highest first (a test below compares the two).
LAYERS: list[tuple[str, list[str]]] = [
    ("foundation", ["base", "registry", "checkpoint_io", "context", "_dtype", "_aliases", "_forward",
                    "_closing", "bounded_json", "util", "progress", "_version", "stateful", "_logging",
                    "numpy_dtypes", "engine", "_capi"]),
    ("arrays", ["nd", "numpy", "ndarray_methods", "_tensor_overrides", "_mxnet_methods", "_array_exchange",
                "autograd", "_recording", "contrib.autograd", "contrib.text", "runtime", "random", "operator",
                "image", "recordio"]),
    ("transport", ["distributed", "compression", "profiler"]),
    ("symbolic graphs", ["symbol", "executor", "_monitor_taps", "_executor_memory", "_sparse_grads", "viz",
                         "_autograd_symbol"]),
    ("training parts", ["optimizer", "lr_scheduler", "initializer", "metric"]),
    ("stores", ["kvstore"]),
    ("Gluon", ["gluon"]),
    ("symbolic training", ["module", "model", "model_files", "callback", "monitor", "io", "image.image_iter",
                           "rnn"]),
    ("checkpoints", ["checkpoint"]),
    ("elastic jobs", ["elastic"]),
    ("integrations", ["amp", "horovod"]),
    ("contrib", ["contrib"]),
    ("model parallelism", ["parallel"]),
    ("test helpers", ["test_utils"]),
    ("tools, CLI", ["cli", "launcher", "cluster"]),
]

# Cycles not yet taken apart, each as the module prefixes its members may have: a cycle found must
# lie inside one of these (so they may only shrink; a new one fails).  A prefix ending in "." admits
# that package's modules.  (Empty: inside the arrays layer the operators read autograd's recording
# state from mxtorch._recording, below both, and MXNet method mode's rules get nd's operators handed
# to them; inside the symbolic layer the passes and the executor read the graph's structure from
# symbol._graph, below the Symbol that calls them.)
KNOWN_CYCLES: list[tuple[str, ...]] = []

# Imports against the layers not yet removed, as (importer, imported): may only shrink.  (Empty: the
# arrays layer reaches the symbolic one only through what that layer registers or hands it:
# mx.autograd.get_symbol/Symbol registered by _autograd_symbol, mx.nd.CachedOp's plan by the Symbol.)
KNOWN_UPWARD: set[tuple[str, str]] = set()

# Modules moved up a layer whose old path stays importable, old -> new: commands and scripts written
# before the move (`python -m mxtorch.elastic.agent`) keep working.  The old module only hands out
# the new one (checked below: no code of its own, imported by no module of the package), so its
# import of the new path keeps a name alive; it is not a dependency of its layer on a higher one.
MOVED: dict[str, str] = {"mxtorch.elastic.agent": "mxtorch.launcher.elastic_agent"}


def _modules(root: Path = ROOT) -> dict[str, Path]:
    out = {}
    for path in root.rglob("*.py"):
        parts = list(path.relative_to(root.parent).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts.pop()
        out[".".join(parts)] = path
    return out


def _targets(node: ast.Import | ast.ImportFrom, package: str, mods: dict[str, Path]) -> list[str]:
    """The modules an import statement loads (of those in ``mods``), relative imports resolved."""
    if isinstance(node, ast.Import):
        names = [a.name for a in node.names]
    else:
        base = node.module or ""
        if node.level:
            anchor = package.split(".")
            anchor = anchor[: len(anchor) - (node.level - 1)]
            base = ".".join(anchor + ([base] if base else []))
        # ``from pkg import sub`` imports the submodule, ``from pkg import name`` the package
        names = [f"{base}.{a.name}" if f"{base}.{a.name}" in mods else base for a in node.names]
    out = []
    for name in names:
        while name and name not in mods:  # ``import a.b.c`` of a name inside a module: that module
            name = name.rpartition(".")[0]
        if name:
            out.append(name)
    return out


def import_graph(root: Path = ROOT) -> dict[str, set[str]]:
    """Each module -> the modules its import statements name: at module level, in functions and
    classes, in try/if blocks and under ``TYPE_CHECKING`` (a lazy or typing-only import still ties
    the two modules together)."""
    mods = _modules(root)
    graph: dict[str, set[str]] = {m: set() for m in mods}
    for name, path in mods.items():
        package = name if path.name == "__init__.py" else name.rpartition(".")[0]
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if isinstance(node, (ast.Import, ast.ImportFrom)):
                graph[name] |= {t for t in _targets(node, package, mods) if t != name}
    return graph


def cycles(graph: dict[str, set[str]]) -> set[tuple[str, ...]]:
    """The strongly connected components with more than one module (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: set[tuple[str, ...]] = set()

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in sorted(graph[v]):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                found.add(tuple(sorted(comp)))

    sys.setrecursionlimit(max(sys.getrecursionlimit(), 10_000))
    for v in sorted(graph):
        if v not in index:
            visit(v)
    return found


def _inside(cycle: tuple[str, ...], known: tuple[str, ...]) -> bool:
    return all(m in known or any(p.endswith(".") and m.startswith(p) for p in known) for m in cycle)


def new_cycles(found: set[tuple[str, ...]]) -> list[tuple[str, ...]]:
    """The cycles of ``found`` that lie inside no known one."""
    return sorted(c for c in found if not any(_inside(c, k) for k in KNOWN_CYCLES))


def layer_of(module: str) -> int | None:
    best, rank = "", None
    for i, (_, prefixes) in enumerate(LAYERS):
        for p in prefixes:
            full = f"mxtorch.{p}"
            if (module == full or module.startswith(full + ".")) and len(full) > len(best):
                best, rank = full, i
    return rank


def upward_imports(graph: dict[str, set[str]]) -> set[tuple[str, str]]:
    out = set()
    for a, targets in graph.items():
        la = layer_of(a)
        for t in targets - {MOVED.get(a)}:
            lt = layer_of(t)
            if la is not None and lt is not None and lt > la:
                out.add((a, t))
    return out


def test_cycle_finder_sees_a_cycle() -> None:
    assert cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == {("a", "b", "c")}
    assert cycles({"a": {"b"}, "b": set()}) == set()


def _plant(tmp_path: Path, files: dict[str, str]) -> Path:
    root = tmp_path / "pkg"
    for rel, text in files.items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text(text)
    return root


def test_a_function_level_cycle_is_found(tmp_path: Path) -> None:
    # a.py imports b at the top; b imports a only inside a function (relative, two levels up)
    root = _plant(tmp_path, {
        "__init__.py": "", "a.py": "from .sub import b\n", "sub/__init__.py": "",
        "sub/b.py": "def f():\n    from .. import a\n    return a\n",
        "c.py": "import typing\nif typing.TYPE_CHECKING:\n    from pkg.sub.b import f\n"})
    graph = import_graph(root)
    assert graph["pkg.sub.b"] == {"pkg.a"} and graph["pkg.c"] == {"pkg.sub.b"}
    assert cycles(graph) == {("pkg.a", "pkg.sub.b")}
    assert new_cycles(cycles(graph)) == [("pkg.a", "pkg.sub.b")]


def test_a_known_cycle_is_allowed_and_only_inside_its_prefixes(monkeypatch: pytest.MonkeyPatch) -> None:
    # the allow-list mechanism stays for a cycle met later: it admits what lies inside, nothing else
    monkeypatch.setattr(sys.modules[__name__], "KNOWN_CYCLES", [("pkg.a", "pkg.sub.")])
    assert new_cycles({("pkg.a", "pkg.sub.b")}) == []
    assert new_cycles({("pkg.a", "pkg.c")}) == [("pkg.a", "pkg.c")]


def test_the_graph_sees_gluon_layers() -> None:
    graph = import_graph()
    assert "mxtorch.gluon.parameter_core" in graph["mxtorch.gluon.parameter_dict"]
    assert "mxtorch.gluon.serialization" in graph["mxtorch.gluon.parameter_dict"]
    assert "mxtorch.gluon.block" not in graph["mxtorch.gluon.parameter_core"]
    # function-level: the launcher starts the elastic agent it imports inside join_elastic()
    assert "mxtorch.launcher.elastic_agent" in graph["mxtorch.launcher.elastic"]


def test_no_import_cycles_among_mxtorch_modules() -> None:
    found = cycles(import_graph())
    assert new_cycles(found) == [], f"new import cycles: {new_cycles(found)}"


def test_no_module_imports_from_a_layer_above_its_own() -> None:
    graph = import_graph()
    unplaced = sorted(m for m in graph if m != "mxtorch" and layer_of(m) is None)
    assert unplaced == [], f"give these modules a layer in LAYERS (and docs/architecture.md): {unplaced}"
    upward = upward_imports(graph)
    assert upward - KNOWN_UPWARD == set(), f"imports against the layers: {sorted(upward - KNOWN_UPWARD)}"


def test_the_docs_list_the_same_layers() -> None:
    rows = [line.split("|")[1].strip() for line in DOC.read_text().splitlines()
            if line.startswith("| ") and not line.startswith(("| layer ", "| ---"))]
    assert rows == [name for name, _ in reversed(LAYERS)], "docs/architecture.md's layer table differs"
    table = DOC.read_text()
    for name, prefixes in LAYERS:
        row = next(line for line in table.splitlines() if line.startswith(f"| {name} |"))
        cell = row.split("|")[2]
        for p in prefixes:
            path = p.replace(".", "/")
            named = re.search(rf"`{re.escape(path)}(/|\.py)?`", cell)
            assert named, f"docs/architecture.md's {name!r} row does not name `{path}`"


GLUON_MODULES = sorted(m for m in _modules() if m.startswith("mxtorch.gluon"))

# Each module imported first, with no other mxtorch module loaded: an import order that only works
# when something else was imported before fails here.  torch stays loaded between modules (it is
# not ours, and loading it 40 times would take minutes).
_EACH_ALONE = """
import importlib, sys, traceback
failed = []
for name in sys.argv[1:]:
    for m in [m for m in sys.modules if m == "mxtorch" or m.startswith("mxtorch.")]:
        del sys.modules[m]
    try:
        importlib.import_module(name)
    except Exception:
        failed.append(name + ": " + traceback.format_exc())
print("\\n".join(failed))
sys.exit(1 if failed else 0)
"""


@pytest.mark.slow  # slow tier (scripts/test.sh -m slow): a faster test of this path stays in the default run
def test_every_gluon_module_imports_first() -> None:
    assert len(GLUON_MODULES) > 30
    proc = subprocess.run([sys.executable, "-c", _EACH_ALONE, *GLUON_MODULES], capture_output=True,
                          text=True, timeout=300)
    assert proc.returncode == 0, proc.stdout + proc.stderr


FRESH = ["mxtorch.gluon.parameter", "mxtorch.gluon.parameter_core", "mxtorch.gluon.parameter_dict",
         "mxtorch.gluon.serialization", "mxtorch.gluon.block", "mxtorch.gluon.rnn.rnn_cell",
         "mxtorch.gluon.symbol_block", "mxtorch.gluon.symbolic"]


@pytest.mark.slow  # slow tier (scripts/test.sh -m slow): a faster test of this path stays in the default run
def test_gluon_modules_import_in_fresh_interpreters() -> None:
    # one interpreter per module, all started at once (each is mostly waiting on torch's import)
    procs = {m: subprocess.Popen([sys.executable, "-c", f"import {m}"], stdout=subprocess.PIPE,
                                 stderr=subprocess.PIPE, text=True) for m in FRESH}
    failed = {}
    for m, proc in procs.items():
        _, err = proc.communicate(timeout=120)
        if proc.returncode != 0:
            failed[m] = err[-2000:]
    assert not failed, failed


@pytest.mark.parametrize("old", sorted(MOVED))
def test_moved_modules_keep_their_old_path(old: str) -> None:
    import importlib

    assert importlib.import_module(old) is importlib.import_module(MOVED[old])


@pytest.mark.parametrize("old", sorted(MOVED))
def test_a_moved_module_s_old_path_is_only_an_alias(old: str) -> None:
    graph = import_graph()
    assert graph[old] == {MOVED[old]}, f"{old} imports more than {MOVED[old]}: {sorted(graph[old])}"
    assert not [m for m, targets in graph.items() if old in targets], f"modules import the old path {old}"
    tree = ast.parse(_modules()[old].read_text())
    code = (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)
    defined = [n for n in ast.walk(tree) if isinstance(n, code)]
    assert not defined, f"{old} holds code of its own: move it to {MOVED[old]}"


def test_no_module_of_the_package_is_over_700_lines() -> None:
    # issue 14's rule: a module that grows past this is doing more than one job; split it
    long = {name: n for name, path in _modules().items() if (n := len(path.read_text().splitlines())) > 700}
    assert long == {}, f"split these modules (lines): {long}"
