"""``mxtorch plan --cores``: which cores the plan is for, and that the option reaches the planner."""

from __future__ import annotations

import pytest

from mxtorch.cli import plan as plan_cli
from mxtorch.cli.main import build_parser, main
from mxtorch.parallel import planner


def _args(*extra: str):
    return build_parser().parse_args(["plan", *extra])


def test_cores_default_to_this_machine_only_when_the_plan_is_for_this_machine():
    here = planner.usable_cores()
    assert here >= 1
    assert plan_cli.job_cores(_args()) == here  # no --bandwidth: the probe measures this machine
    assert plan_cli.job_cores(_args("--bandwidth", "10Gbit")) is None  # another machine: a core each
    assert plan_cli.job_cores(_args("--bandwidth", "10Gbit", "--cores", "3")) == 3
    assert plan_cli.job_cores(_args("--cores", "0")) is None
    with pytest.raises(SystemExit, match="--cores must be >= 0"):
        plan_cli.job_cores(_args("--cores", "-1"))


def _fixed_costs(units, sample, repeats=5):
    """Per-layer costs that do not depend on this machine's load (the predictions compare exactly)."""
    return [planner.LayerCost(u.path, 2e-5, 4e-5, 4096.0, 4096.0, 65536) for u in units]


def test_the_cores_option_reaches_the_planner_and_slows_oversubscribed_plans(monkeypatch, capsys):
    from mxtorch import parallel

    monkeypatch.setattr(planner, "profile_layers", _fixed_costs)
    seen: list[tuple[int | None, list]] = []
    real = parallel.plan

    def spy(*args, **kwargs):
        plans = real(*args, **kwargs)
        seen.append((kwargs.get("cores"), plans))
        return plans

    monkeypatch.setattr(parallel, "plan", spy)
    common = ["plan", "--model", "mlp", "--world-size", "4", "--batch-size", "64", "--bandwidth", "10Gbit",
              "--memory", "1GiB", "--top", "3"]
    assert main(common) == 0
    assert "share" not in capsys.readouterr().out.splitlines()[0]
    assert main([*common, "--cores", "1"]) == 0
    out = capsys.readouterr().out
    assert "the processes share 1 cores" in out.splitlines()[0]
    assert "CPU work of the 4 processes" in out  # explain() of the winner shows the CPU bound
    (c0, alone), (c1, shared) = seen
    assert (c0, c1) == (None, 1)

    def key(p):
        return (p.config, p.micro_batches, p.schedule, p.checkpointing,
                tuple(p.split_points))

    before = {key(p): p.predicted_step_s for p in alone}
    assert set(before) == {key(p) for p in shared}
    for p in shared:  # four processes on one core: never faster, and slower where several compute at once
        assert p.predicted_step_s >= before[key(p)] * (1 - 1e-12), p
        if p.config.dp * p.config.tp > 1:
            assert p.predicted_step_s > before[key(p)] * 1.5, p
