"""The symbolic examples run unchanged (in this process, with their command lines) and compute what
they say."""

from __future__ import annotations

import contextlib
import io
import re
import runpy
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent


def _run(script: str, *args: str) -> str:
    buf = io.StringIO()
    with pytest.MonkeyPatch.context() as mp, contextlib.redirect_stdout(buf):
        mp.setattr(sys, "argv", [script, *args])
        runpy.run_path(str(ROOT / script), run_name="__main__")
    return buf.getvalue()


def test_executor_example_prints_hand_derived_values() -> None:
    text = _run("examples/executor_basics.py")
    assert "z = [3.]  dz/dx = [1.]  dz/dy = [1.]" in text
    assert "simple_bind: z = [6.]" in text
    # loss = sum((x*w - y)^2) = 1 + 4 + 9; d/dw = 2 (x w - y) x
    assert "loss = [14.]  dloss/dw = [ -2.  -8. -18.]" in text


def test_module_linear_regression_recovers_the_coefficients() -> None:
    text = _run("examples/module_linear_regression.py", "--epochs", "5")
    w = [float(v) for v in re.search(r"weight: \[\[(.*?)\]\]", text).group(1).split()]  # type: ignore[union-attr]
    b = float(re.search(r"bias: \[(.*?)\]", text).group(1))  # type: ignore[union-attr]
    assert abs(w[0] - 2.0) < 0.05 and abs(w[1] + 3.4) < 0.05 and abs(b - 4.2) < 0.05


@pytest.mark.slow  # slow tier (scripts/test.sh -m slow): a faster test of this path stays in the default run
def test_symbolic_mlp_trains_on_the_shipped_fashion_mnist_and_reloads(tmp_path: Path) -> None:
    text = _run("examples/symbolic_mlp.py", "--epochs", "1", "--prefix", str(tmp_path / "mlp"))
    acc = float(re.search(r"validation accuracy: ([0-9.]+)", text).group(1))  # type: ignore[union-attr]
    again = float(re.search(r"reloaded checkpoint accuracy: ([0-9.]+)", text).group(1))  # type: ignore[union-attr]
    assert acc > 0.6  # one epoch; 10 classes: chance is 0.1
    assert again == acc
    assert (tmp_path / "mlp-symbol.json").is_file() and (tmp_path / "mlp-0001.params").is_file()
