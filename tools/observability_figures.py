"""Draw the figures of docs/observability.md from a real job's output (matplotlib: the ``bench`` extra).

    python tools/observability_figures.py timeline job.json -o docs/timeline.png [--steps 3] [--skip 1]
    python tools/observability_figures.py scalars runs/tb -o docs/tensorboard.png

``timeline``: a merged trace (``mxtorch trace merge``) as one lane per process and span name, each
``mxtorch/*`` span a bar on rank 0's clock, ``--steps`` training steps after the first ``--skip`` of
the trace (the first recorded step also holds the ranks' profiler start-up, which differs).
``scalars``: the event files of ``mxtorch train --tensorboard DIR`` (``DIR`` and ``DIR/rank<r>``)
read back with tensorboard's EventAccumulator, one panel per quantity, every rank's line in it.
"""

from __future__ import annotations

import argparse
import json
import os
from collections import defaultdict
from typing import Any

# the spans' lanes, top to bottom within a process, and their colours
LANES = ("data.wait", "forward", "backward", "allreduce", "allreduce.wait", "pushpull", "ps.push", "ps.pull",
         "trainer.step", "ps.handle", "ps.update")
COLOURS = {"data.wait": "#9e9e9e", "forward": "#1f77b4", "backward": "#ff7f0e", "allreduce": "#d62728",
           "allreduce.wait": "#e377c2", "pushpull": "#d62728", "ps.push": "#d62728", "ps.pull": "#9467bd",
           "trainer.step": "#2ca02c", "ps.handle": "#8c564b", "ps.update": "#17becf"}


def _processes(trace: dict[str, Any]) -> dict[int, str]:
    return {e["pid"]: e["args"]["name"] for e in trace["traceEvents"]
            if e.get("ph") == "M" and e.get("name") == "process_name"}


def draw_timeline(path: str, out: str, steps: int, skip: int) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    with open(path) as f:
        trace = json.load(f)
    names = _processes(trace)
    spans = [e for e in trace["traceEvents"]
             if e.get("ph") == "X" and str(e.get("name", "")).startswith("mxtorch/") and e["pid"] in names]
    if not spans:
        raise SystemExit(f"{path}: no mxtorch/* spans: give a trace of `mxtorch trace merge`")
    # the window: from the end of the --skip'th step to the end of --steps more, on the first row's steps
    first_pid = min({e["pid"] for e in spans}, key=lambda p: names[p])
    step_ends = sorted(e["ts"] + e["dur"] for e in spans
                       if e["pid"] == first_pid and e["name"] == "mxtorch/trainer.step")
    if len(step_ends) < skip + 1:
        raise SystemExit(f"{path}: {len(step_ends)} steps of {names[first_pid]}, not more than --skip {skip}")
    start = step_ends[skip - 1] if skip else min(e["ts"] for e in spans)
    shown = min(steps, len(step_ends) - skip)
    end = step_ends[skip + shown - 1]
    lanes: dict[tuple[str, str], list[tuple[float, float]]] = defaultdict(list)
    for e in spans:
        if e["ts"] <= end and e["ts"] + e["dur"] >= start:
            what = e["name"][len("mxtorch/"):]
            lanes[(names[e["pid"]], what)].append(((e["ts"] - start) / 1e3, e["dur"] / 1e3))
    order = sorted(lanes, key=lambda k: (k[0], LANES.index(k[1]) if k[1] in LANES else len(LANES), k[1]))
    fig, ax = plt.subplots(figsize=(11, 0.32 * len(order) + 1.2))
    for i, key in enumerate(order):
        ax.broken_barh(lanes[key], (i - 0.4, 0.8), color=COLOURS.get(key[1], "#7f7f7f"))
    ax.set_yticks(range(len(order)), [f"{proc}  {what}" for proc, what in order], fontsize=8)
    ax.invert_yaxis()
    ax.set_xlim(0, (end - start) / 1e3)
    ax.set_xlabel("ms on rank 0's clock")
    ax.set_title(f"{os.path.basename(path)}: the mxtorch/* spans of {len({k[0] for k in order})} processes, "
                 f"{shown} training steps", fontsize=10)
    ax.grid(axis="x", alpha=0.3)
    fig.tight_layout()
    fig.savefig(out, dpi=110)
    print(f"wrote {out}: {len(order)} lanes, {sum(len(v) for v in lanes.values())} spans")


def _read_scalars(folder: str) -> dict[str, list[tuple[int, float]]]:
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    acc = EventAccumulator(folder, size_guidance={"scalars": 0})
    acc.Reload()
    return {tag: [(e.step, e.value) for e in acc.Scalars(tag)] for tag in acc.Tags()["scalars"]}


def draw_scalars(folder: str, out: str) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    tags = _read_scalars(folder)
    for sub in sorted(os.listdir(folder)):
        if sub.startswith("rank") and os.path.isdir(os.path.join(folder, sub)):
            tags.update(_read_scalars(os.path.join(folder, sub)))
    if not tags:
        raise SystemExit(f"{folder}: no scalars: give the folder of `mxtorch train --tensorboard`")
    panels: dict[str, list[str]] = defaultdict(list)  # a panel per quantity: every rank's line in it
    for tag in sorted(tags):
        group, _, what = tag.partition("/")
        key = what if group.startswith(("rank", "server")) else tag
        if group in ("train", "val") and what == "accuracy":
            key = "accuracy"
        panels[key].append(tag)
    cols = 3
    rows = (len(panels) + cols - 1) // cols
    fig, axes = plt.subplots(rows, cols, figsize=(11, 2.6 * rows), squeeze=False)
    for ax, (title, members) in zip(axes.flat, sorted(panels.items())):
        for tag in members:
            steps, values = zip(*tags[tag])
            ax.plot(steps, values, marker="o" if len(steps) < 5 else None, ms=4, lw=1, label=tag)
        ax.set_title(title, fontsize=9)
        ax.tick_params(labelsize=7)
        if len(members) > 1:
            ax.legend(fontsize=7)
        values = sorted(v for tag in members for _, v in tags[tag])
        if len(values) > 20:  # a first step that compiles would flatten every later one
            ax.set_ylim(min(0.0, values[0]), 1.3 * values[int(0.99 * (len(values) - 1))])
    for ax in list(axes.flat)[len(panels):]:
        ax.axis("off")
    fig.supxlabel("training step", fontsize=9)
    fig.tight_layout()
    fig.savefig(out, dpi=100)
    print(f"wrote {out}: {len(tags)} tags in {len(panels)} panels")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = ap.add_subparsers(dest="figure", required=True)
    t = sub.add_parser("timeline", help="a merged trace's spans, one lane per process and span name")
    t.add_argument("trace")
    t.add_argument("-o", "--output", required=True)
    t.add_argument("--steps", type=int, default=3, help="training steps to show (rank 0's trainer.step)")
    t.add_argument("--skip", type=int, default=1, help="recorded steps to leave out first")
    s = sub.add_parser("scalars", help="mxtorch train --tensorboard's scalars, read with EventAccumulator")
    s.add_argument("folder")
    s.add_argument("-o", "--output", required=True)
    args = ap.parse_args()
    if args.figure == "timeline":
        draw_timeline(args.trace, args.output, args.steps, args.skip)
    else:
        draw_scalars(args.folder, args.output)


if __name__ == "__main__":
    main()
