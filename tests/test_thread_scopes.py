"""MXNet's per-thread scopes: ``AttrScope.current`` / ``NameManager.current`` / ``Context.default_ctx``
are class attributes MXNet code reads and assigns, each thread seeing its own; a block's
``name_scope()`` names the symbols made inside it under the block's prefix."""

from __future__ import annotations

import threading
import warnings
from typing import Any

from mxtorch.attribute import AttrScope
from mxtorch.name import NameManager

import mxtorch as mx
from mxtorch.context import Context
from mxtorch.util import is_np_array, np_array


def _in_thread(fn: Any) -> Any:
    out: list[Any] = []
    t = threading.Thread(target=lambda: out.append(fn()))
    t.start()
    t.join(timeout=30)
    return out[0]


def test_assigned_attr_scope_is_this_threads_only() -> None:
    AttrScope.current = AttrScope(group="main")
    try:
        assert AttrScope.current._attr == {"group": "main"}
        assert _in_thread(lambda: AttrScope.current._attr) == {}
        assert mx.sym.var("v").attr("group") == "main"
    finally:
        AttrScope.current = AttrScope()


def test_assigned_name_manager_counts_per_thread() -> None:
    NameManager.current = NameManager()
    assert NameManager.current.get(None, "conv") == "conv0"
    assert _in_thread(lambda: NameManager.current.get(None, "conv")) == "conv0"
    assert NameManager.current.get(None, "conv") == "conv1"
    with NameManager():
        assert NameManager.current.get(None, "conv") == "conv0"


def test_default_ctx_assignment_is_the_threads_current_context() -> None:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        old = Context.default_ctx
        Context.default_ctx = mx.gpu(3)  # naming a GPU context allocates nothing
        try:
            assert mx.context.current_context() == mx.gpu(3)
            assert _in_thread(mx.context.current_context) == mx.cpu(0)
            assert Context.devtype2str[Context.default_ctx.device_typeid] == "gpu"
        finally:
            Context.default_ctx = old


def test_name_scope_prefixes_symbols_made_inside() -> None:
    net = mx.gluon.nn.Dense(2, prefix="head_")
    with net.name_scope():
        s = mx.sym.FullyConnected(mx.sym.var("x"), num_hidden=2)
    assert s.name == "head_fullyconnected0"


def test_np_array_mode_is_per_thread() -> None:
    with np_array(True):
        assert is_np_array()
        assert _in_thread(is_np_array) is False
    assert not is_np_array()
