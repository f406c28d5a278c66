"""Run Horovod's own MXNet tests against ``mxtorch.horovod`` by import swap.

Nothing of Horovod is kept in this repository: give a Horovod checkout (``git clone
https://github.com/horovod/horovod``); this copies ``test/parallel/base_test_mxnet.py`` and
``test_mxnet1.py`` to a scratch directory, rewrites ``horovod.mxnet`` -> ``mxtorch.horovod`` and
``mxnet`` -> ``mxtorch``, turns off the MXNet-version gates (mxtorch re-creates MXNet 1.x but has
its own version number), provides the one helper the tests import from ``test/utils/common.py``,
and runs them under ``mxtorch launch -n N``; rank 0's JUnit report is summarised.

    python tools/horovod_tests.py /path/to/horovod [-n 2] [--mxnet-methods] [--numpy-dtypes]

Measured (2026-11-28 21:46 UTC, Horovod 2626dc8, 2 ranks, gloo, 5 GPU-only tests skipped): 51 of
the 57 CPU tests pass; 56 with ``--mxnet-methods`` (MXTORCH_MXNET_METHODS=1: ``x.size`` as a
number, integer ``/=`` staying integer); all 57 with ``--mxnet-methods --numpy-dtypes``
(MXTORCH_NUMPY_DTYPES=1: ``tensor.dtype == np.float16``).  Since mx.nd.NDArray and hvd's
collectives returning NDArrays for NDArrays (2026-11-28 23:50 UTC): 56 of 57 by default; the one
left, ``test_compression_fp16``, compares ``x.dtype`` with ``np.float16`` (``x.dtype`` is torch's:
docs/migrating.md) and passes with ``--numpy-dtypes``.
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import subprocess
import sys
import tempfile
import xml.etree.ElementTree as ET
from pathlib import Path

FILES = ("base_test_mxnet.py", "test_mxnet1.py")
SWAPS = (
    (r"import horovod\.mxnet as hvd", "import mxtorch.horovod as hvd"),
    (r"horovod\.mxnet", "mxtorch.horovod"),
    (r"^(\s*)import mxnet as mx", r"\1import mxtorch as mx"),
    (r"from mxnet([ .])", r"from mxtorch\1"),
    (r"version\.parse\(mx\.__version__\)\.major != 1", "False"),
    (r"version\.parse\(mx\.__version__\) < version\.parse\('1\.5\.0'\)", "False"),
)
COMMON = '''import os


def skip_or_fail_gpu_test(test, message):
    if os.environ.get("HOROVOD_TEST_GPU", "0") not in ("", "0"):
        test.fail(message)
    test.skipTest(message)
'''


def prepare(horovod: Path, scratch: Path) -> Path:
    parallel = scratch / "parallel"
    (scratch / "utils").mkdir(parents=True)
    parallel.mkdir()
    for name in FILES:
        text = (horovod / "test" / "parallel" / name).read_text()
        for pattern, repl in SWAPS:
            text = re.sub(pattern, repl, text, flags=re.M)
        (parallel / name).write_text(text)
    (scratch / "utils" / "common.py").write_text(COMMON)
    return parallel


def summarise(report: Path) -> dict[str, list[str]]:
    root = ET.parse(report).getroot()
    out: dict[str, list[str]] = {"passed": [], "failed": [], "skipped": []}
    for case in root.iter("testcase"):
        kinds = {child.tag for child in case}
        key = "failed" if kinds & {"failure", "error"} else "skipped" if "skipped" in kinds else "passed"
        name = case.attrib["name"]
        skip = case.find("skipped")
        if key == "skipped" and skip is not None:  # the reason: which need a GPU
            name += f" ({skip.attrib.get('message', '').strip()[:120]})"
        out[key].append(name)
    return out


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("horovod", type=Path, help="a Horovod checkout")
    p.add_argument("-n", type=int, default=2, help="ranks (default 2)")
    p.add_argument("--mxnet-methods", action="store_true", help="run with MXTORCH_MXNET_METHODS=1")
    p.add_argument("--numpy-dtypes", action="store_true", help="run with MXTORCH_NUMPY_DTYPES=1")
    p.add_argument("--timeout", type=int, default=900)
    args = p.parse_args(argv)
    if not (args.horovod / "test" / "parallel" / FILES[0]).is_file():
        p.error(f"{args.horovod} has no test/parallel/{FILES[0]}: give the root of a Horovod checkout")
    scratch = Path(tempfile.mkdtemp(prefix="mxtorch-hvd-tests-"))
    try:
        parallel = prepare(args.horovod, scratch)
        runner = scratch / "rank.sh"
        runner.write_text(f'cd {parallel} && exec {sys.executable} -m pytest -q -p no:cacheprovider '
                          f'--timeout=120 test_mxnet1.py --junitxml={scratch}/rank$RANK.xml\n')
        env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(Path(__file__).resolve().parents[1]),
                                                             os.environ.get("PYTHONPATH", "")])}
        if args.mxnet_methods:
            env["MXTORCH_MXNET_METHODS"] = "1"
        if args.numpy_dtypes:
            env["MXTORCH_NUMPY_DTYPES"] = "1"
        subprocess.run([sys.executable, "-m", "mxtorch.cli.main", "launch", "-n", str(args.n), "--timeout",
                        str(args.timeout), "bash", str(runner)], env=env, check=False)
        result = summarise(scratch / "rank0.xml")
        for kind in ("skipped", "failed"):
            for name in result[kind]:
                print(f"{kind}: {name}")
        print(f"horovod test_mxnet1.py on {args.n} ranks: {len(result['passed'])} passed, "
              f"{len(result['failed'])} failed, {len(result['skipped'])} skipped")
        return 0 if not result["failed"] else 1
    finally:
        shutil.rmtree(scratch, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
