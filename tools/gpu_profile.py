"""Where an mxtorch training step spends its time on a GPU, next to the plain torch step.

For each variant (mxtorch hybridized, mxtorch eager, torch eager; optional AMP float16) it prints
the CUDA-synchronised step time, the number of kernels launched per step, the host<->device
synchronisations one step makes (``torch.cuda.set_sync_debug_mode``; the first one's stack is
shown) and the top host-side operators of the profiler.

    python tools/gpu_profile.py [--model mlp] [--batch 256] [--amp float16] [--device cuda]
"""

from __future__ import annotations

import argparse
import os
import sys
import time
import traceback
import warnings

import torch

sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "bench"))
from _models import mx_train_step  # noqa: E402
from overhead import make_torch_step  # noqa: E402


def timed(step, n: int, dev: torch.device) -> float:  # type: ignore[no-untyped-def]
    if dev.type == "cuda":
        torch.cuda.synchronize()
    t0 = time.perf_counter()
    for _ in range(n):
        step()
    if dev.type == "cuda":
        torch.cuda.synchronize()
    return (time.perf_counter() - t0) / n * 1e3


def syncs(step) -> tuple[int, str]:  # type: ignore[no-untyped-def]
    """How many synchronising calls one step makes, and the stack of the first."""
    first = ""
    torch.cuda.set_sync_debug_mode("error")
    try:
        step()
    except RuntimeError:
        first = "".join(traceback.format_exc().splitlines(keepends=True)[-14:])
    finally:
        torch.cuda.set_sync_debug_mode(0)
    torch.cuda.synchronize()
    with warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter("always")
        torch.cuda.set_sync_debug_mode("warn")
        try:
            step()
        finally:
            torch.cuda.set_sync_debug_mode(0)
    n = sum("synchroniz" in str(w.message) for w in seen)
    return n, first


def profile(name: str, step, dev: torch.device, n: int = 20) -> None:  # type: ignore[no-untyped-def]
    acts = [torch.profiler.ProfilerActivity.CPU]
    if dev.type == "cuda":
        acts.append(torch.profiler.ProfilerActivity.CUDA)
    with torch.profiler.profile(activities=acts) as prof:
        for _ in range(n):
            step()
        if dev.type == "cuda":
            torch.cuda.synchronize()
    events = prof.key_averages()
    cuda = torch.autograd.DeviceType.CUDA
    kernels = sum(e.count for e in events if getattr(e, "device_type", None) == cuda)
    print(f"--- {name}: {kernels / n:.1f} GPU kernels per step; top host operators (self CPU):")
    print(events.table(sort_by="self_cpu_time_total", row_limit=18, max_name_column_width=60))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--model", default="mlp")
    ap.add_argument("--batch", type=int, default=256)
    ap.add_argument("--amp", default="")
    ap.add_argument("--device", default="cuda")
    ap.add_argument("--no-profile", action="store_true")
    args = ap.parse_args()
    dev = torch.device(args.device)
    torch.manual_seed(0)
    x = torch.rand(args.batch, 1, 28, 28, device=dev)
    y = torch.randint(0, 10, (args.batch,), device=dev).float()
    amp_dtype = args.amp or None
    variants = {
        "torch": make_torch_step(args.model, x, y, amp_dtype),
        "mxtorch eager": mx_train_step(args.model, x, y, hybridize=False, amp_dtype=amp_dtype),
        "mxtorch hybridized": mx_train_step(args.model, x, y, amp_dtype=amp_dtype),
    }
    for step in variants.values():
        timed(step, 10, dev)
    for rnd in range(3):
        print(f"round {rnd}: " + ", ".join(f"{k} {timed(s, 50, dev):.3f} ms" for k, s in variants.items()))
    if dev.type == "cuda":
        for k, s in variants.items():
            n, first = syncs(s)
            print(f"{k}: {n} synchronising calls per step")
            if first:
                print(f"  first one:\n{first}")
    if not args.no_profile:
        for k, s in variants.items():
            profile(k, s, dev)


if __name__ == "__main__":
    main()
