"""The import graph of mxtorch: every gluon module imports on its own, and no mxtorch modules
import each other in a circle (module-level imports, walked with ``ast``)."""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent / "mxtorch"

# Cycles among modules outside this checker's reach when it was written, each as the sorted
# members of one strongly connected component.  The list may only shrink: a new cycle fails.
KNOWN_CYCLES: set[tuple[str, ...]] = set()


def _modules() -> dict[str, Path]:
    out = {}
    for path in ROOT.rglob("*.py"):
        parts = list(path.relative_to(ROOT.parent).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts.pop()
        out[".".join(parts)] = path
    return out


def _is_type_checking(node: ast.stmt) -> bool:
    return isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test)


def _top_level_imports(tree: ast.Module) -> list[ast.Import | ast.ImportFrom]:
    """Imports run when the module is imported: its body, and try/if bodies (not TYPE_CHECKING)."""
    out: list[ast.Import | ast.ImportFrom] = []
    stack: list[ast.stmt] = list(tree.body)
    while stack:
        node = stack.pop()
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            out.append(node)
        elif isinstance(node, ast.Try):
            stack += node.body + node.orelse + node.finalbody
            for h in node.handlers:
                stack += h.body
        elif isinstance(node, ast.If) and not _is_type_checking(node):
            stack += node.body + node.orelse
    return out


def import_graph() -> dict[str, set[str]]:
    mods = _modules()
    graph: dict[str, set[str]] = {m: set() for m in mods}
    for name, path in mods.items():
        package = name if path.name == "__init__.py" else name.rpartition(".")[0]
        for node in _top_level_imports(ast.parse(path.read_text(), str(path))):
            if isinstance(node, ast.Import):
                targets = [a.name for a in node.names]
            else:
                base = node.module or ""
                if node.level:
                    anchor = package.split(".")
                    anchor = anchor[: len(anchor) - (node.level - 1)]
                    base = ".".join(anchor + ([base] if base else []))
                # ``from pkg import sub`` imports the submodule, ``from pkg import name`` the package
                targets = [f"{base}.{a.name}" if f"{base}.{a.name}" in mods else base for a in node.names]
            graph[name] |= {t for t in targets if t in mods and t != name}
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


def test_cycle_finder_sees_a_cycle() -> None:
    assert cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == {("a", "b", "c")}
    assert cycles({"a": {"b"}, "b": set()}) == set()


def test_the_graph_sees_gluon_layers() -> None:
    graph = import_graph()
    assert "mxtorch.gluon.parameter_core" in graph["mxtorch.gluon.parameter_dict"]
    assert "mxtorch.gluon.serialization" in graph["mxtorch.gluon.parameter_dict"]
    assert "mxtorch.gluon.block" not in graph["mxtorch.gluon.parameter_core"]


def test_no_import_cycles_among_mxtorch_modules() -> None:
    found = cycles(import_graph())
    assert found <= KNOWN_CYCLES, f"new import cycles: {sorted(found - KNOWN_CYCLES)}"


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


def test_every_gluon_module_imports_first() -> None:
    assert len(GLUON_MODULES) > 30
    proc = subprocess.run([sys.executable, "-c", _EACH_ALONE, *GLUON_MODULES], capture_output=True,
                          text=True, timeout=300)
    assert proc.returncode == 0, proc.stdout + proc.stderr


FRESH = ["mxtorch.gluon.parameter", "mxtorch.gluon.parameter_core", "mxtorch.gluon.parameter_dict",
         "mxtorch.gluon.serialization", "mxtorch.gluon.block", "mxtorch.gluon.rnn.rnn_cell",
         "mxtorch.gluon.symbol_block", "mxtorch.gluon.symbolic"]


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


def test_no_module_of_the_package_is_over_700_lines() -> None:
    # issue 14's rule: a module that grows past this is doing more than one job; split it
    long = {name: n for name, path in _modules().items() if (n := len(path.read_text().splitlines())) > 700}
    assert long == {}, f"split these modules (lines): {long}"
