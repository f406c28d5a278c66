#!/usr/bin/env bash
# The project's test command: install (idempotent), lint (ruff), type-check (mypy), test (pytest).
# Extra arguments go to pytest, e.g. `bash scripts/test.sh -m slow` for the slow tests.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
.venv/bin/ruff check mxtorch tests bench tools
.venv/bin/mypy mxtorch
.venv/bin/python -m pytest -q -m "not slow and not cluster" "$@"
