"""mxtorch.registry: the one set of naming rules every registry follows."""

from __future__ import annotations

import sys
import types

import pytest

from mxtorch.registry import Registry, RegistryError


class Cosine:
    pass


def test_names_are_case_insensitive_and_aliases_share_the_entry():
    reg: Registry[type] = Registry("schedule")
    reg.register(Cosine, aliases=("cos",))
    assert reg["COSINE"] is Cosine and reg["Cos"] is Cosine and reg.get("cos") is Cosine
    assert "cosine" in reg and "COS" in reg and "linear" not in reg and 3 not in reg
    assert reg.names() == ["cos", "cosine"] and len(reg) == 2
    assert dict(reg) == {"cos": Cosine, "cosine": Cosine}


def test_an_unknown_name_lists_the_known_ones_in_the_familys_error():
    class ScheduleError(ValueError):
        pass

    reg: Registry[type] = Registry("schedule", error=ScheduleError)
    reg.register(Cosine)
    with pytest.raises(ScheduleError, match=r"unknown schedule 'cosin': known schedules are \['cosine'\]"):
        reg["cosin"]
    with pytest.raises(TypeError, match="a non-empty string"):
        Registry("x").register(object(), name="")
    assert reg.find("cosin") is None and reg.get("cosin") is None and reg.get("cosin", Cosine) is Cosine


def test_default_error_is_both_mxnet_error_and_value_error_with_a_plain_message():
    from mxtorch.base import MXNetError

    with pytest.raises(MXNetError) as info:
        Registry("metric")["acc"]
    assert isinstance(info.value, ValueError) and isinstance(info.value, KeyError)
    assert str(info.value).startswith("unknown metric 'acc'")


def test_re_registering_the_same_class_is_quiet_and_another_object_warns_and_replaces(recwarn):
    reg: Registry[type] = Registry("schedule")
    reg.register(Cosine)
    twin = type("Cosine", (), {"__module__": Cosine.__module__, "__qualname__": Cosine.__qualname__})
    reg.register(twin)  # the same class, its module imported twice
    assert not recwarn.list and reg.get("cosine") is twin

    class Other:
        pass

    with pytest.warns(UserWarning, match=r"schedule 'cosine': .*Other replaces .*Cosine"):
        reg.register(Other, name="Cosine")
    assert reg["cosine"] is Other


def test_a_check_rejects_objects_of_another_family():
    def must_be_class(obj):
        if not isinstance(obj, type):
            raise TypeError(f"schedules are classes, got {obj!r}")

    reg: Registry[type] = Registry("schedule", check=must_be_class)
    with pytest.raises(TypeError, match="schedules are classes"):
        reg.register(3, name="three")
    assert reg.names() == []


def test_a_lazy_entry_imports_its_module_on_first_use_only(monkeypatch):
    reg: Registry[type] = Registry("backend")
    name = "mxtorch_test_lazy_backend"
    calls = []

    def load():
        calls.append(1)
        reg.register(Cosine, name="far")

    module = types.ModuleType(name)
    monkeypatch.setitem(sys.modules, name, module)
    reg.lazy("Far", name)
    assert "far" in reg and reg.names() == ["far"]
    monkeypatch.delitem(sys.modules, name)
    finder_calls = []

    class Loader:
        def find_spec(self, fullname, path=None, target=None):
            if fullname != name:
                return None
            import importlib.util
            finder_calls.append(fullname)
            return importlib.util.spec_from_loader(fullname, self)

        def create_module(self, spec):
            return None

        def exec_module(self, mod):
            load()

    monkeypatch.setattr(sys, "meta_path", [Loader(), *sys.meta_path])
    assert not calls
    assert reg["FAR"] is Cosine and calls == [1] and finder_calls == [name]
    assert reg["far"] is Cosine and calls == [1]


def test_a_lazy_module_that_does_not_register_is_reported():
    reg: Registry[type] = Registry("backend")
    reg.lazy("nothing", "json")
    with pytest.raises(RegistryError, match="should be registered by importing 'json'"):
        reg["nothing"]
