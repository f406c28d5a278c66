#!/usr/bin/env bash
# Creates .venv (once) and installs mxtorch with its test tools; CPU torch is pinned by
# constraints-cpu.txt. Where apt is usable as root, also installs Debian's
# dataset-fashion-mnist (the full Fashion-MNIST); otherwise the subset shipped inside
# mxtorch is used by `mxtorch train`.
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-python3}
if [ ! -x .venv/bin/python ]; then
  "$PY" -m venv .venv
fi
.venv/bin/python -m pip install -q --disable-pip-version-check -c constraints-cpu.txt -e ".[test]"
if [ ! -f /usr/share/datasets/fashion-mnist/train-images-idx3-ubyte.gz ] \
   && command -v apt-get >/dev/null 2>&1 && [ "$(id -u)" = 0 ]; then
  if ! (apt-get install -y -qq dataset-fashion-mnist || (apt-get update -qq && apt-get install -y -qq dataset-fashion-mnist)) >/dev/null 2>&1; then
    echo "note: could not install dataset-fashion-mnist; mxtorch train will use its embedded subset" >&2
  fi
fi
