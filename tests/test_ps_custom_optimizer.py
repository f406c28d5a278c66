"""Custom optimizers on the parameter servers: a class registered with
``mxtorch.optimizer.register`` in the user's module runs on the servers once they import that
module (MXTORCH_PS_SERVER_IMPORTS, ``mxtorch launch --server-import``, ``mxtorch server
--import``); without it the error names the module and the setting; nothing a message names is
imported."""

from __future__ import annotations

import os
import subprocess
import sys

import ps_custom_optimizer as custom  # noqa: I001  (tests/ is on sys.path)
import pytest
from torch.testing import assert_close

from mxtorch.cli.launch import options_from_args
from mxtorch.cli.main import build_parser
from mxtorch.distributed.env import DistributedConfigError
from mxtorch.kvstore.base import KVStoreError
from mxtorch.kvstore.ps import PSConfig
from mxtorch.kvstore.ps.server import import_server_modules
from mxtorch.kvstore.ps.testing import run_ps_job
from mxtorch.launcher import LaunchError

STEPS = 3
# the 8x5 weight is above the bound: cut into slices on both servers, each with its own state
SLICED = {"MXNET_KVSTORE_BIGARRAY_BOUND": "8", "MXTORCH_PS_PIECE_BYTES": "16"}
BASE = {"DMLC_ROLE": "server", "DMLC_PS_ROOT_URI": "127.0.0.1", "DMLC_PS_ROOT_PORT": "9000",
        "DMLC_NUM_SERVER": "1", "DMLC_NUM_WORKER": "1"}


def test_servers_importing_the_users_module_run_its_optimizer_as_one_process_would():
    env = {**SLICED, "MXTORCH_PS_SERVER_IMPORTS": "ps_custom_optimizer"}
    results = run_ps_job(custom.dist_train, 2, 2, STEPS, timeout=120, env=env)
    reference = custom.train(None, STEPS, None, 1)
    for params in results:
        assert len(params) == len(reference)
        for got, want in zip(params, reference):
            assert_close(got, want)


def test_servers_without_the_module_say_which_module_and_setting_to_use():
    text = run_ps_job(custom.dist_error, 1, 1, timeout=120)[0]
    assert "'halfstepsgd'" in text and "HalfStepSGD" in text, text
    assert "MXTORCH_PS_SERVER_IMPORTS=ps_custom_optimizer" in text
    assert "--server-import ps_custom_optimizer" in text and "update_on_kvstore=False" in text


def test_the_setting_is_parsed_and_checked():
    cfg = PSConfig.from_env({**BASE, "MXTORCH_PS_SERVER_IMPORTS": " mylib.optim , other "})
    assert cfg.server_imports == ("mylib.optim", "other")
    assert PSConfig.from_env(BASE).server_imports == ()
    for bad in ("mylib/optim.py", "a,,b", "1abc", "a.b-c"):
        with pytest.raises(DistributedConfigError, match="MXTORCH_PS_SERVER_IMPORTS") as e:
            PSConfig.from_env({**BASE, "MXTORCH_PS_SERVER_IMPORTS": bad})
        assert "not a module name" in str(e.value)


def test_a_module_that_fails_to_import_is_named_with_its_error(tmp_path, monkeypatch):
    (tmp_path / "broken_optimizers.py").write_text("raise RuntimeError('no GPU here')\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    with pytest.raises(KVStoreError, match="'broken_optimizers'.*RuntimeError: no GPU here"):
        import_server_modules(("ps_custom_optimizer", "broken_optimizers"))
    with pytest.raises(KVStoreError, match="'mxtorch_has_no_such_module'.*ModuleNotFoundError"):
        import_server_modules(("mxtorch_has_no_such_module",))
    import_server_modules(("ps_custom_optimizer", "json"))  # importable ones: no error


@pytest.mark.slow  # slow tier (scripts/test.sh -m slow): a faster test of this path stays in the default run
def test_mxtorch_server_import_fails_before_joining_and_names_the_module():
    env = {**{k: v for k, v in os.environ.items() if not k.startswith(("DMLC_", "MXTORCH_"))}, **BASE,
           "DMLC_PS_ROOT_PORT": "1", "MXTORCH_DIST_TIMEOUT": "30"}
    env.pop("DMLC_ROLE")
    cli = [sys.executable, "-m", "mxtorch.cli.main", "server", "--import"]
    r = subprocess.run([*cli, "mxtorch_no_such_mod"], capture_output=True, text=True, timeout=300, env=env)
    assert r.returncode == 1 and "cannot import module 'mxtorch_no_such_mod'" in r.stderr, r.stderr
    r = subprocess.run([*cli, "not a module"], capture_output=True, text=True, timeout=300, env=env)
    assert r.returncode == 2 and "'not a module' is not a module name" in r.stderr, r.stderr


def _launch_options(*argv: str):
    return options_from_args(build_parser().parse_args(["launch", *argv, "python", "t.py"]), environ={})


def test_launch_server_import_reaches_the_servers_only():
    spec = _launch_options("-n", "2", "-s", "1", "--server-import", "mylib.optim", "--server-import", "b",
                           "--env-server", "MXTORCH_PS_SERVER_IMPORTS:first").job_spec()
    assert spec.server_env["MXTORCH_PS_SERVER_IMPORTS"] == "first,mylib.optim,b"
    assert "MXTORCH_PS_SERVER_IMPORTS" not in spec.env and "MXTORCH_PS_SERVER_IMPORTS" not in spec.worker_env
    with pytest.raises(LaunchError, match="--server-import.*'my-lib' is not a module name"):
        _launch_options("-s", "1", "--server-import", "my-lib").job_spec()
