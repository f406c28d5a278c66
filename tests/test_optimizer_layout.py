"""The optimizer package's module layout: one-way imports, no function-level imports dodging a cycle."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest
import torch

import mxtorch.optimizer as opt

PKG = Path(opt.__file__).parent


def _imports(path: Path) -> tuple[set[str], list[str]]:
    """(modules imported at module level from this package, function-level imports)."""
    tree = ast.parse(path.read_text())
    top: set[str] = set()
    for node in tree.body:
        if isinstance(node, ast.ImportFrom) and node.level == 1:
            top.add(node.module or "")
    nested = [
        f"{path.name}:{n.lineno}"
        for f in ast.walk(tree)
        if isinstance(f, (ast.FunctionDef, ast.AsyncFunctionDef))
        for n in ast.walk(f)
        if isinstance(n, (ast.Import, ast.ImportFrom))
    ]
    return top, nested


def test_no_function_level_imports_in_the_package() -> None:
    nested = [n for p in sorted(PKG.glob("*.py")) for n in _imports(p)[1]]
    assert nested == []


@pytest.mark.parametrize("low", ["checks", "tensors", "rows"])
def test_helper_modules_import_no_optimizer_module(low: str) -> None:
    top, _ = _imports(PKG / f"{low}.py")
    assert top <= {"checks", "tensors"}, top


def test_base_does_not_import_the_modules_built_on_it() -> None:
    top, _ = _imports(PKG / "base.py")
    assert not top & {"sparse", "updater", "fused"}, top


def test_no_module_over_700_lines() -> None:
    long = {p.name: n for p in PKG.glob("*.py") if (n := len(p.read_text().splitlines())) > 700}
    assert long == {}


@pytest.mark.parametrize("name", ["ftml", "ftrl"])
def test_a_rule_dividing_by_the_learning_rate_rejects_a_zero_step_lr(name: str) -> None:
    o = opt.create(name, learning_rate=0.1)
    o.set_learning_rate(0.0) if name == "ftml" else setattr(o, "lr", 0.0)
    w = torch.ones(3)
    with pytest.raises(ValueError, match="divides by the learning rate"):
        o.update(0, w, torch.ones(3), o.create_state(0, w))


def test_pair_state_optimizers_keep_two_zero_tensors_like_the_weight() -> None:
    w = torch.ones(2, 3, dtype=torch.float64)
    for name in ["adam", "adamw", "adamax", "nadam", "lamb", "adadelta", "ftrl"]:
        state = opt.create(name).create_state(0, w)
        assert isinstance(state, tuple) and len(state) == 2, name
        for s in state:
            assert s.shape == w.shape and s.dtype == w.dtype and not s.any(), name
        assert state[0] is not state[1]


def test_mxnet_class_level_registry_entry_points() -> None:
    assert isinstance(opt.Optimizer.create_optimizer("ADAM", learning_rate=0.5), opt.Adam)
    assert opt.Optimizer.register(opt.SGD) is opt.SGD  # same class again: quiet
    with pytest.raises(ValueError, match=r"unknown optimizer 'sdg': known optimizers are \[.*'sgd'"):
        opt.Optimizer.create_optimizer("sdg")
