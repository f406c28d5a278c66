"""The version has one source (mxtorch/_version.py) and ``mxtorch --version`` prints it."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
import tomllib

import mxtorch
from mxtorch import _version
from mxtorch.cli.main import main

ROOT = Path(__file__).resolve().parents[1]


def test_one_source() -> None:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())
    assert "version" not in project["project"] and "version" in project["project"]["dynamic"]
    assert project["tool"]["setuptools"]["dynamic"]["version"] == {"attr": "mxtorch._version.__version__"}
    assert mxtorch.__version__ == _version.__version__
    assert f"## {_version.__version__}" in (ROOT / "CHANGELOG.md").read_text()


def test_cli_version(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as stop:
        main(["--version"])
    assert stop.value.code == 0
    assert capsys.readouterr().out.strip() == f"mxtorch {_version.__version__}"


def test_cli_version_as_a_command() -> None:
    done = subprocess.run([sys.executable, "-m", "mxtorch.cli.main", "--version"], capture_output=True,
                          text=True, timeout=120, cwd=ROOT)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == f"mxtorch {_version.__version__}"
