#!/usr/bin/env bash
# Creates .venv (once) and installs mxtorch with its test and docs tools; CPU torch is pinned by
# constraints-cpu.txt. Where apt is usable as root, also installs Debian's
# dataset-fashion-mnist (the full Fashion-MNIST); otherwise the subset shipped inside
# mxtorch is used by `mxtorch train`. As root, also iproute2 (`ip`, `tc`) when missing: the
# emulated-cluster tests (tests/cluster, marked `cluster`) need it and skip without it.
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-python3}
if [ ! -x .venv/bin/python ]; then
  "$PY" -m venv .venv
fi
.venv/bin/python -m pip install -q --disable-pip-version-check -c constraints-cpu.txt -e ".[test,viz,docs,image,tensorboard]"
if ! { command -v ip && command -v tc; } >/dev/null 2>&1 \
   && command -v apt-get >/dev/null 2>&1 && [ "$(id -u)" = 0 ]; then
  if ! (apt-get install -y -qq iproute2 || (apt-get update -qq && apt-get install -y -qq iproute2)) >/dev/null 2>&1; then
    echo "note: could not install iproute2; the cluster tests (tests/cluster) will be skipped" >&2
  fi
fi
if [ ! -f /usr/share/datasets/fashion-mnist/train-images-idx3-ubyte.gz ] \
   && command -v apt-get >/dev/null 2>&1 && [ "$(id -u)" = 0 ]; then
  if ! (apt-get install -y -qq dataset-fashion-mnist || (apt-get update -qq && apt-get install -y -qq dataset-fashion-mnist)) >/dev/null 2>&1; then
    echo "note: could not install dataset-fashion-mnist; mxtorch train will use its embedded subset" >&2
  fi
fi
