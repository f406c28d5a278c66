"""The mxtorch logger tree: the rank in every record, MXTORCH_LOG_LEVEL / --log-level, and the
parameter-server processes' lines going through logging (issue 30)."""

from __future__ import annotations

import logging
import os
import subprocess
import sys

import ps_stats_workers as w  # noqa: I001  (tests/ is on sys.path)
import pytest

from mxtorch import _logging
from mxtorch.cli.main import main
from mxtorch.kvstore.ps.testing import ps_cluster
from mxtorch.profiler._process import identity, set_identity

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
_SNIPPET = ("import logging, mxtorch; log = logging.getLogger('mxtorch.kvstore.test'); "
            "log.debug('dbg line'); log.info('info line'); log.warning('warn line')")


def _stderr(env: dict[str, str]) -> str:
    base = {k: v for k, v in os.environ.items()
            if k not in ("RANK", "DMLC_ROLE", "DMLC_WORKER_ID", _logging.LOG_LEVEL_ENV)}
    base["PYTHONPATH"] = ROOT + os.pathsep + base.get("PYTHONPATH", "")
    run = subprocess.run([sys.executable, "-c", _SNIPPET], env={**base, **env}, capture_output=True,
                         text=True, timeout=120)
    assert run.returncode == 0, run.stderr
    return run.stderr


@pytest.mark.slow  # slow tier (scripts/test.sh -m slow): a faster test of this path stays in the default run
def test_records_carry_the_rank_and_the_level_comes_from_the_variable():
    quiet = _stderr({"RANK": "3"})
    assert "info line" not in quiet and "dbg line" not in quiet  # the default: warnings and up
    assert "WARNING mxtorch.kvstore.test [rank 3]: warn line" in quiet
    loud = _stderr({"RANK": "3", _logging.LOG_LEVEL_ENV: "debug"})
    assert "DEBUG mxtorch.kvstore.test [rank 3]: dbg line" in loud
    assert "INFO mxtorch.kvstore.test [rank 3]: info line" in loud
    bad = _stderr({_logging.LOG_LEVEL_ENV: "chatty"})
    assert "MXTORCH_LOG_LEVEL='chatty' is not a log level" in bad and "[-]: warn line" in bad


def test_an_application_that_configured_logging_gets_the_records_once_with_their_rank(caplog, capsys):
    caplog.set_level(logging.INFO)  # a handler on the root logger: mxtorch's own stays silent
    saved = (identity().role, identity().rank, identity().world_size)
    set_identity("server", 2, 4)
    try:
        logging.getLogger("mxtorch.kvstore.test").warning("hello")
    finally:
        identity().role, identity().rank, identity().world_size = saved
    (record,) = [r for r in caplog.records if r.getMessage() == "hello"]
    assert record.rank == "server 2"
    assert "hello" not in capsys.readouterr().err


def test_log_level_option_is_checked_and_passed_on(monkeypatch, capsys, tmp_path):
    out = str(tmp_path / "job.json")
    monkeypatch.delenv(_logging.LOG_LEVEL_ENV, raising=False)
    with pytest.raises(SystemExit) as exc:
        main(["--log-level", "loud", "trace", "merge", "nowhere", "-o", out])
    assert exc.value.code == 2
    assert "mxtorch trace: error: --log-level='loud' is not a log level" in capsys.readouterr().err
    assert _logging.LOG_LEVEL_ENV not in os.environ
    try:
        with pytest.raises(SystemExit):  # a valid level, then the subcommand's own error
            main(["trace", "--log-level", "INFO", "merge", "nowhere", "-o", out])
        assert os.environ[_logging.LOG_LEVEL_ENV] == "INFO"
        assert logging.getLogger("mxtorch").level == logging.INFO
    finally:
        os.environ.pop(_logging.LOG_LEVEL_ENV, None)
        _logging.set_level(None)


def test_scheduler_lines_go_through_logging_with_its_role():
    with ps_cluster(2, 1, timeout=120) as c:
        c.start_workers(w.counted_job)
        assert all(o.ok for o in c.join_workers()), [o.error for o in c.join_workers()]
        c.wait_exit()
        err = c.stderr("scheduler")
    assert "INFO mxtorch.kvstore.ps.scheduler [scheduler]: job started: 1 server(s), 2 worker(s)" in err, err
    assert "[scheduler]: job finished" in err, err
