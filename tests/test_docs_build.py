"""The documentation site builds with ``mkdocs build --strict``: a broken link, a broken anchor or an
API reference that does not resolve fails the test command (and so CI)."""

from __future__ import annotations

import importlib.util
import os
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parents[1]
_TOOLS = ("mkdocs", "material", "mkdocstrings", "mkdocstrings_handlers.python")

pytestmark = pytest.mark.skipif(
    any(importlib.util.find_spec(name.split(".")[0]) is None for name in _TOOLS),
    reason="mkdocs, mkdocs-material or mkdocstrings[python] is not installed "
    "(bash scripts/setup.sh installs them: the `docs` extra)",
)


def _build(config: Path, site: Path) -> subprocess.CompletedProcess[str]:
    env = dict(os.environ, NO_MKDOCS_2_WARNING="1")
    command = [sys.executable, "-m", "mkdocs", "build", "--strict", "-f", str(config), "-d", str(site)]
    return subprocess.run(command, capture_output=True, text=True, env=env, timeout=240)


def test_site_builds_strict(tmp_path: Path) -> None:
    done = _build(ROOT / "mkdocs.yml", tmp_path / "site")
    assert done.returncode == 0, done.stdout + done.stderr
    for page in ("index.html", "migrating/index.html", "distributed/index.html", "api/gluon/index.html"):
        assert (tmp_path / "site" / page).is_file(), page
    # the API reference is generated from docstrings, not empty stubs
    api = (tmp_path / "site" / "api" / "checkpoint" / "index.html").read_text()
    assert 'id="mxtorch.checkpoint.CheckpointManager"' in api


def test_every_page_is_in_the_nav() -> None:
    yaml = pytest.importorskip("yaml")

    def pages(node: Any) -> list[str]:
        if isinstance(node, str):
            return [node]
        if isinstance(node, list):
            return [p for item in node for p in pages(item)]
        if isinstance(node, dict):
            return [p for value in node.values() for p in pages(value)]
        return []

    nav = set(pages(yaml.safe_load((ROOT / "mkdocs.yml").read_text())["nav"]))
    on_disk = {p.relative_to(ROOT / "docs").as_posix() for p in (ROOT / "docs").rglob("*.md")}
    assert on_disk - nav == set(), "pages under docs/ missing from mkdocs.yml's nav"


@pytest.mark.slow  # slow tier (scripts/test.sh -m slow): a faster test of this path stays in the default run
def test_broken_link_anchor_or_reference_fails(tmp_path: Path) -> None:
    """The project's own settings (mkdocs.yml) on a small site with one planted fault of each kind."""
    yaml = pytest.importorskip("yaml")
    config = yaml.safe_load((ROOT / "mkdocs.yml").read_text())
    docs = tmp_path / "docs"
    docs.mkdir()
    (docs / "index.md").write_text(
        "# Home\n\n## Real section\n\n"
        "[a page that does not exist](no-such-page.md)\n\n"
        "[an anchor that does not exist](api.md#no-such-anchor)\n\n"
        "[a reference that does not resolve][mxtorch.checkpoint.NoSuchClass]\n")
    (docs / "api.md").write_text("# API\n\n::: mxtorch.checkpoint.CheckpointManager\n")
    config["docs_dir"] = str(docs)
    config["nav"] = [{"Home": "index.md"}, {"API": "api.md"}]
    for plugin in config["plugins"]:
        if isinstance(plugin, dict) and "mkdocstrings" in plugin:
            plugin["mkdocstrings"]["handlers"]["python"]["paths"] = [str(ROOT)]
    (tmp_path / "mkdocs.yml").write_text(yaml.safe_dump(config))
    done = _build(tmp_path / "mkdocs.yml", tmp_path / "site")
    out = done.stdout + done.stderr
    assert done.returncode != 0, out
    warnings = [line for line in out.splitlines() if line.startswith("WARNING")]
    for planted in ("no-such-page.md", "#no-such-anchor", "mxtorch.checkpoint.NoSuchClass"):
        assert any(planted in line for line in warnings), (planted, out)


def test_readme_is_the_front_door() -> None:
    """The README stays short, opens with the two commands, and its links lead to files that exist
    (mkdocs checks the pages under docs/, not the README)."""
    readme = (ROOT / "README.md").read_text()
    assert len(readme.splitlines()) <= 300
    first_block = readme.split("```bash\n", 1)[1].split("```", 1)[0].splitlines()
    assert [line.split("#")[0].strip() for line in first_block] == [
        "bash scripts/setup.sh && .venv/bin/mxtorch train", "bash scripts/test.sh"]
    setup = (ROOT / "scripts" / "setup.sh").read_text()
    assert '".[test,viz,docs,image,tensorboard]"' in setup  # docs tools, OpenCV, tensorboard
    targets = re.findall(r"\]\(([^)#\s]+)(?:#[^)]*)?\)", readme)
    assert targets and all((ROOT / t).exists() for t in targets if "://" not in t), \
        [t for t in targets if "://" not in t and not (ROOT / t).exists()]
