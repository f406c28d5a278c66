"""Part (d) of bench/compression.py, time to accuracy over an emulated link: its pure logic (time
to target, the ratio, the table, option checks) in-process, its skip note where namespaces cannot
be made, and (slow, root) a tiny run of two methods on a 2-host cluster.  No timings are checked."""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
from types import ModuleType

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
BENCH_DIR = os.path.join(ROOT, "bench")
BENCH = os.path.join(BENCH_DIR, "compression.py")
SKIP_ABC = ["--sizes", "", "--wire-models", "", "--train-models", ""]


def _load_bench() -> ModuleType:
    if BENCH_DIR not in sys.path:
        sys.path.insert(0, BENCH_DIR)  # the bench scripts import their siblings (_models, cluster) by name
    spec = importlib.util.spec_from_file_location("bench_compression", BENCH)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up while the file runs
    spec.loader.exec_module(module)
    return module


bc = _load_bench()


def _args(*argv: str):
    return bc.build_parser().parse_args(list(argv))


def _run(method: str, log, steps: int | None = None, train_s: float | None = None, wire: float = 1000.0):
    steps = log[-1][1] if steps is None else steps
    train_s = log[-1][0] if train_s is None else train_s
    return bc.TTARun(method, log, steps, train_s, 0.5, wire)


def test_time_to_target_is_the_first_evaluation_at_or_above_it() -> None:
    log = [(5.0, 20, 0.65), (10.0, 40, 0.79), (15.0, 60, 0.82), (20.0, 80, 0.81), (25.0, 100, 0.84)]
    assert bc.time_to_target(log, 0.82) == (15.0, 60)  # equal counts as reached
    assert bc.time_to_target(log, 0.83) == (25.0, 100)  # a later dip does not matter, the first hit does
    assert bc.time_to_target(log, 0.5) == (5.0, 20)
    assert bc.time_to_target(log, 0.9) is None
    assert bc.time_to_target([], 0.5) is None


def test_speedup_exact_and_bounded_by_the_run_that_missed() -> None:
    base = _run("none", [(10.0, 40, 0.7), (20.0, 80, 0.83)])
    fast = _run("fp16", [(8.0, 40, 0.7), (16.0, 80, 0.83)])
    missed = _run("2bit", [(20.0, 100, 0.6), (40.0, 200, 0.7)])
    assert bc.tta_speedup(base, fast, 0.8) == ("1.25", 1.25)
    assert bc.tta_speedup(base, missed, 0.8) == ("<0.50", None)  # missed after 40 s: ratio below 20/40
    assert bc.tta_speedup(missed, base, 0.8) == (">2.00", None)  # base missed after 40 s, other took 20
    assert bc.tta_speedup(missed, missed, 0.8) == ("n/a", None)


def test_rows_and_table() -> None:
    runs = [_run("none", [(10.0, 40, 0.7), (20.0, 80, 0.83)], wire=23298088),
            _run("powersgd", [(30.0, 240, 0.78), (60.2, 480, 0.79)], wire=52368)]
    rows = bc.tta_rows(runs, 0.82)
    assert [r["method"] for r in rows] == ["none", "powersgd"]
    assert rows[0]["reached"] and rows[0]["time_to_target_s"] == 20.0 and rows[0]["steps_to_target"] == 80
    assert rows[0]["speedup"] == "1.00" and rows[0]["step_ms"] == 250.0
    assert not rows[1]["reached"] and rows[1]["time_to_target_s"] is None and rows[1]["speedup"] == "<0.33"
    assert rows[1]["log"] == [[30.0, 240, 0.78], [60.2, 480, 0.79]]
    json.dumps(rows)  # the JSON line is made of these
    lines = bc.format_tta_table(rows, 0.82)
    assert "time to 0.82" in lines[0] and "none/this" in lines[0]
    assert lines[1].split() == ["none", "20.0", "s", "80", "250.0", "0.8300", "0.5", "22.22", "MiB", "1.00"]
    assert lines[2].split() == ["powersgd", ">", "60.2", "s", ">480", "125.4", "0.7900", "0.5", "51.14",
                                "KiB", "<0.33"]


def test_option_checks_say_what_to_change() -> None:
    assert bc.check_tta_args(_args()) == list(bc.COMPRESSORS)
    picked = bc.check_tta_args(_args("--tta-compressors", "fp16,topk", "--tta-rate", "none"))
    assert picked == ["fp16", "topk"]
    bad = [
        (("--tta-compressors", "fp16,3bit"), "unknown ['3bit']"),
        (("--tta-compressors", "fp16,fp16"), "twice"),
        (("--tta-rate", "1gbps"), "bytes per second"),
        (("--tta-target", "0"), "(0, 1]"),
        (("--tta-target", "80"), "(0, 1]"),
        (("--tta-hosts", "1"), "at least two"),
        (("--tta-budget", "0"), "--tta-budget"),
        (("--tta-eval-every", "0"), "--tta-eval-every must be >= 1"),
        (("--tta-lr", "-1"), "--tta-lr"),
    ]
    for argv, words in bad:
        with pytest.raises(ValueError) as e:
            bc.check_tta_args(_args(*argv))
        assert words in str(e.value), (argv, str(e.value))
    assert bc.check_tta_args(_args("--tta-budget", "0", "--tta-max-steps", "50")) == list(bc.COMPRESSORS)


@pytest.mark.slow  # slow tier (scripts/test.sh -m slow): a faster test of this path stays in the default run
def test_a_bad_option_stops_the_script_before_any_part_runs() -> None:
    r = subprocess.run([sys.executable, BENCH, *SKIP_ABC, "--tta-target", "2"], capture_output=True,
                       text=True, timeout=60, cwd=ROOT)
    assert r.returncode == 2 and "--tta-target 2.0 is an accuracy" in r.stderr, r.stderr[-2000:]


def test_without_namespaces_part_d_is_one_line_and_no_error(monkeypatch, capsys) -> None:
    import mxtorch.cluster

    monkeypatch.setattr(mxtorch.cluster, "support_problem", lambda: "creating network namespaces needs root")
    bc.print_tta(_args("--tta-compressors", "fp16"))
    out = capsys.readouterr().out.strip().splitlines()
    assert out == ["(d) time-to-accuracy skipped: the emulated cluster needs network namespaces: creating "
                   "network namespaces needs root"]


@pytest.mark.slow  # two short jobs on a 2-host cluster: ~20 s
@pytest.mark.cluster
def test_two_methods_on_a_two_host_cluster() -> None:
    from mxtorch.cluster import support_problem

    problem = support_problem()
    if problem is not None:
        pytest.skip(f"needs network namespaces: {problem}")
    r = subprocess.run([sys.executable, BENCH, *SKIP_ABC, "--tta-compressors", "fp16", "--tta-budget", "0",
                        "--tta-max-steps", "4", "--tta-eval-every", "2", "--tta-eval-size", "200"],
                       capture_output=True, text=True, timeout=240, cwd=ROOT)
    assert r.returncode == 0, f"{r.stdout[-3000:]}\n{r.stderr[-3000:]}"
    line = next(ln for ln in r.stdout.splitlines() if ln.startswith("(d) json "))
    res = json.loads(line[len("(d) json "):])
    runs = {run["method"]: run for run in res["runs"]}
    assert list(runs) == ["none", "fp16"] and res["rate"] == "1gbit" and res["hosts"] == 2
    for run in runs.values():
        assert run["steps"] <= 4 and 1 <= len(run["log"]) <= 2 and 0.0 <= run["final_accuracy"] <= 1.0
    # fp16 sends half the bytes of the fp32 gradients (a 2-worker ring all-reduce sends them once)
    fp32 = runs["none"]["wire_bytes_per_step"]
    assert runs["fp16"]["wire_bytes_per_step"] == pytest.approx(fp32 / 2, rel=0.01)
    assert "time to 0.82" in r.stdout
