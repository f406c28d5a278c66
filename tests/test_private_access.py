"""Other packages use the Trainer's and Parameter's public surface, and no package imports another
package's private names (walked with ``ast``; imports inside functions count too).

* No module outside ``mxtorch/gluon/`` reads or writes a private attribute (``_x``) of a
  ``gluon.Trainer`` or ``gluon.Parameter``.  Which names are theirs is read from the two classes
  (every ``_x`` they define or assign), so a new private is covered at once.  An attribute with
  such a name is a module's own when a class of that module assigns it (``self._x = ...``), unless
  that class subclasses Trainer or Parameter: a subclass elsewhere uses the public surface too.
* No module imports a private name (``from ..gluon.nn.conv_layers import _Conv``, ``from ..nd
  import _io``) of another top-level package of mxtorch (``mxtorch.gluon``, ``mxtorch.nd``, ...).
  The public names of a package's ``_x`` modules are what it offers its neighbours; the modules at
  the root, ``mxtorch/_dtype.py`` and the like, are the whole package's shared helpers and may be
  imported anywhere.

``ALLOWED`` lists the exceptions, each with its reason.
"""

from __future__ import annotations

import ast
import textwrap
from dataclasses import dataclass
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent / "mxtorch"
OWNER_FILES = {"Trainer": ROOT / "gluon" / "trainer.py", "Parameter": ROOT / "gluon" / "parameter_core.py"}

_LAYER_INTERNALS = ("re-implements gluon layers (tensor-parallel shards, compaction that removes channels) "
                    "on their internals: the convolution/pooling/RNN bases, the loss's axis helpers; a layer "
                    "API for this belongs with the layers (as their symbol translations moved there)")
ALLOWED: dict[str, tuple[frozenset[str], str]] = {
    # module path below mxtorch/: (the private names it may use, why)
    "contrib/_pruning_compact.py": (frozenset({"_scale"}), "BatchNorm's own `scale` switch, read by "
                                    "compaction to fold it: a Block field, not the Trainer's _scale"),
    "parallel/tp_loss.py": (frozenset({"_as_tensor", "_class_axis_loss_mean", "_norm_axis"}),
                            _LAYER_INTERNALS),
    "parallel/tp_rnn.py": (frozenset({"_RNNLayer", "_check_states"}), _LAYER_INTERNALS),
    "cluster/launch.py": (frozenset({"_stop"}),
                          "the elastic launcher's stop of a job's process groups, shared with the cluster "
                          "launcher; it becomes a public launcher helper when launcher/ is reorganised "
                          "(issue 34 item 4)"),
}


def _allowed(f: Finding) -> bool:
    return f.path in ALLOWED and f.name in ALLOWED[f.path][0]


@dataclass(frozen=True)
class Finding:
    path: str
    line: int
    name: str
    what: str

    def __str__(self) -> str:
        return f"mxtorch/{self.path}:{self.line}: {self.what}"


def _is_private(name: str) -> bool:
    return name.startswith("_") and not (name.startswith("__") and name.endswith("__"))


def _assigned_self_attrs(cls: ast.ClassDef) -> set[str]:
    """Names a class gives its instances: ``self._x = ...`` / ``self._x: T = ...`` and
    ``object.__setattr__(self, "_x", ...)``."""
    out: set[str] = set()
    for node in ast.walk(cls):
        targets: list[ast.expr] = []
        if isinstance(node, ast.Assign):
            targets = list(node.targets)
        elif isinstance(node, ast.AnnAssign):
            targets = [node.target]
        for t in targets:
            for sub in ast.walk(t):
                if isinstance(sub, ast.Attribute) and getattr(sub.value, "id", None) == "self":
                    out.add(sub.attr)
        if isinstance(node, ast.Call) and getattr(node.func, "attr", None) == "__setattr__" \
                and len(node.args) >= 2 and isinstance(node.args[1], ast.Constant) \
                and isinstance(node.args[1].value, str):
            out.add(node.args[1].value)
    return out


def _class_level_names(cls: ast.ClassDef) -> set[str]:
    """The methods and class attributes a class body defines."""
    out: set[str] = set()
    for node in cls.body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            out.add(node.name)
        elif isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name):
            out.add(node.target.id)
        elif isinstance(node, ast.Assign):
            out.update(t.id for t in node.targets if isinstance(t, ast.Name))
    return out


def owner_private_names() -> dict[str, str]:
    """{private name: 'Trainer' or 'Parameter'} for every ``_x`` the two classes define or assign."""
    names: dict[str, str] = {}
    for cls_name, path in OWNER_FILES.items():
        tree = ast.parse(path.read_text())
        cls = next(n for n in tree.body if isinstance(n, ast.ClassDef) and n.name == cls_name)
        for n in _assigned_self_attrs(cls) | _class_level_names(cls):
            if _is_private(n):
                names.setdefault(n, cls_name)
    return names


def _base_names(cls: ast.ClassDef) -> set[str]:
    return {b.attr if isinstance(b, ast.Attribute) else getattr(b, "id", "") for b in cls.bases}


def attribute_findings(rel: str, source: str, private: dict[str, str]) -> list[Finding]:
    tree = ast.parse(source)
    module_owned: set[str] = set()
    for cls in (n for n in ast.walk(tree) if isinstance(n, ast.ClassDef)):
        owned = _assigned_self_attrs(cls) | _class_level_names(cls)
        if _base_names(cls) & set(OWNER_FILES):
            owned -= set(private)  # a Trainer/Parameter subclass does not own its base's privates
        module_owned |= owned
    out = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Attribute) and node.attr in private and node.attr not in module_owned:
            owner = private[node.attr]
            out.append(Finding(rel, node.lineno, node.attr,
                               f"touches {owner}.{node.attr}, a private of gluon's {owner}: use its public "
                               "surface (or add one in gluon/)"))
    return out


def _package_of(module: str) -> str:
    """The top-level package of a dotted mxtorch module ('' for the root and its modules)."""
    parts = module.split(".")
    if len(parts) < 2:
        return ""
    top = parts[1]
    return "" if (ROOT / f"{top}.py").exists() else top


def _resolve(rel: str, node: ast.ImportFrom) -> str:
    if node.level == 0:
        return node.module or ""
    here = ["mxtorch", *Path(rel).with_suffix("").parts]
    if here[-1] == "__init__":
        here = here[:-1]
    else:
        here = here[:-1]  # the package the module is in
    base = here[: len(here) - (node.level - 1)]
    return ".".join(base + ([node.module] if node.module else []))


def import_findings(rel: str, source: str) -> list[Finding]:
    mine = _package_of("mxtorch." + ".".join(Path(rel).with_suffix("").parts))
    out = []
    for node in ast.walk(ast.parse(source)):
        targets: list[tuple[str, str | None]] = []
        if isinstance(node, ast.ImportFrom):
            module = _resolve(rel, node)
            targets = [(module, a.name) for a in node.names]
        elif isinstance(node, ast.Import):
            targets = [(a.name, None) for a in node.names]
        for module, name in targets:
            if module != "mxtorch" and not module.startswith("mxtorch."):
                continue
            full = module if name is None else f"{module}.{name}"
            theirs = _package_of(full)
            if not theirs or theirs == mine:
                continue
            imported = full.split(".")[-1]  # the name bound here: a module's public names are its API
            if _is_private(imported):
                out.append(Finding(rel, node.lineno, imported,
                                   f"imports {full}, private to the package mxtorch.{theirs}: import a "
                                   "public name (export one there if it is needed)"))
    return out


def all_findings() -> list[Finding]:
    private = owner_private_names()
    out: list[Finding] = []
    for path in sorted(ROOT.rglob("*.py")):
        rel = path.relative_to(ROOT).as_posix()
        source = path.read_text()
        if not rel.startswith("gluon/"):
            out += attribute_findings(rel, source, private)
        out += import_findings(rel, source)
    return out


def test_no_private_access_across_packages() -> None:
    found = [f for f in all_findings() if not _allowed(f)]
    assert not found, "\n".join(map(str, found))


def test_every_allowance_is_still_needed() -> None:
    used = {(f.path, f.name) for f in all_findings()}
    stale = [(path, name) for path, (names, _) in ALLOWED.items() for name in sorted(names)
             if (path, name) not in used]
    assert not stale, f"ALLOWED entries no code needs any more (remove them): {stale}"


def test_the_owner_names_are_read_from_the_classes() -> None:
    private = owner_private_names()
    expected = {"_kvstore": "Trainer", "_updaters": "Trainer", "_param2idx": "Trainer",
                "_kv_initialized": "Trainer", "_params_to_init": "Trainer", "_data": "Parameter",
                "_set_copies": "Parameter", "_trainer_ref": "Parameter"}
    assert {k: private.get(k) for k in expected} == expected


@pytest.mark.parametrize("code,expected", [
    ("def f(trainer):\n    return trainer._kvstore\n", "_kvstore"),
    ("def f(p):\n    p._data = None\n", "_data"),
    ("from ..gluon.trainer import Trainer\nclass T(Trainer):\n    def g(self):\n        self._scale *= 2\n",
     "_scale"),
    ("def f(trainer):\n    return trainer._updaters[0].states\n", "_updaters"),
])
def test_a_planted_private_access_is_found(code: str, expected: str) -> None:
    found = attribute_findings("amp/planted.py", textwrap.dedent(code), owner_private_names())
    assert [f.name for f in found] == [expected]


def test_a_module_s_own_attribute_of_the_same_name_is_not_a_finding() -> None:
    code = "class Module:\n    def __init__(self):\n        self._kvstore = None\n" \
           "    def borrow(self, other):\n        self._kvstore = other._kvstore\n"
    assert attribute_findings("module/planted.py", code, owner_private_names()) == []


@pytest.mark.parametrize("rel,code,bad", [
    ("amp/planted.py", "from ..gluon.nn.conv_layers import _Conv\n", True),
    ("amp/planted.py", "def f():\n    from ..nd import _io\n", True),
    ("amp/planted.py", "import mxtorch.gluon._trainer_states\n", True),
    ("amp/planted.py", "from ..gluon._trainer_states import encode\n", False),  # a public name of it
    ("amp/planted.py", "from ..gluon.nn import Conv2D\n", False),
    ("amp/planted.py", "from .._dtype import to_torch_dtype\n", False),  # the root's shared helpers
    ("gluon/planted.py", "from ._trainer_states import encode\n", False),  # inside its own package
    ("gluon/nn/planted.py", "from .._block_fields import MXNetBlockFields\n", False),
])
def test_a_planted_private_import_is_found(rel: str, code: str, bad: bool) -> None:
    assert bool(import_findings(rel, code)) is bad
