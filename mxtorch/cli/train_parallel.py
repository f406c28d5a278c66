"""``mxtorch train --pp/--dp/--plan``: the default task with model parallelism (mxtorch.parallel).

Every rank of the job runs :func:`train_pipelined`; rank 0 prints and writes the files.  With
``--plan auto`` rank 0 chooses the layout with :func:`mxtorch.parallel.plan` and broadcasts it.
"""

from __future__ import annotations

import json
import os
import sys
import time
from dataclasses import asdict, replace
from typing import Any

from ..checkpoint_io import atomic_write_text
from .train_config import TrainConfig, compression_params
from .train_data import load_datasets, num_classes

__all__ = ["train_pipelined"]

_PLAN_SCHEDULES = ("none", "gpipe", "1f1b")


def _agreed_plan(cfg: TrainConfig, info: Any) -> dict[str, Any]:
    """Rank 0 runs mxtorch.parallel.plan for this job and broadcasts the winner (as integers)."""
    import torch
    import torch.distributed as dist

    import mxtorch as mx

    from .. import parallel
    from ..gluon import model_zoo
    from ..gluon.data.vision import transforms
    from ..parallel.planner import usable_cores
    from ..parallel.split import chain_units

    header = torch.zeros(6 + 16, dtype=torch.int64)
    mx.random.seed(cfg.seed)
    net = model_zoo.vision.get_model(cfg.model, classes=num_classes(cfg))
    net.initialize(mx.init.Xavier(magnitude=2.24))
    train_set, _, _ = load_datasets(cfg)
    to_tensor = transforms.ToTensor()
    sample = torch.stack([to_tensor(train_set[i][0]) for i in range(16)])
    with mx.autograd.predict_mode():
        net(sample)
    units = chain_units(net, sample)
    if info.rank == 0:
        # the job trains on CPUs: each host's processes share its usable cores (hosts alike, so the
        # job's processes share the hosts' cores together)
        hosts = max(info.world_size // max(info.local_size, 1), 1)
        plans = parallel.plan(net, sample, world_size=info.world_size, memory_per_device=cfg.plan_memory,
                              batch_size=cfg.batch_size, bandwidth="8Gbit", micro_batches=(1, 2, 4, 8),
                              cores=usable_cores() * hosts)
        best = plans[0]
        print(f"plan: {len(plans)} layouts fit {cfg.plan_memory}; the winner:\n{best.explain()}", flush=True)
        paths = [u.path for u in units]
        starts = [paths.index(p) for p in best.split_points]
        header[:6] = torch.tensor([best.config.dp, best.config.pp, best.config.tp, best.micro_batches,
                                   _PLAN_SCHEDULES.index(best.schedule), int(best.checkpointing)])
        header[6:6 + len(starts)] = torch.tensor(starts, dtype=torch.int64)
    dist.broadcast(header, src=0)
    dp, pp, tp, m, sched, ck = (int(v) for v in header[:6])
    starts = [int(v) for v in header[6:6 + pp - 1]]
    schedule = "gpipe" if sched == 0 else _PLAN_SCHEDULES[sched]  # one stage: any schedule runs it
    return {"dp": dp, "pp": pp, "tp": tp, "m": m, "schedule": schedule, "ckpt": bool(ck),
            "split_points": [units[i].path for i in starts] or None}


def train_pipelined(cfg: TrainConfig, log: Any = None) -> dict[str, Any]:
    """``train`` with the network cut into ``cfg.pp`` pipeline stages (mxtorch.parallel) and ``dp``
    data-parallel replicas of the pipeline; every rank runs this, rank 0 prints and writes files."""
    import torch

    import mxtorch as mx

    from .. import distributed, parallel
    from ..gluon import Trainer, loss, model_zoo
    from ..gluon.data import DataLoader, SplitSampler
    from ..gluon.data.vision import transforms
    from ..kvstore.ps import STORE_NAMES
    from ..progress import ProgressBar

    over_servers = cfg.kvstore.lower() in STORE_NAMES
    if over_servers:
        # join the parameter-server job first (a scheduler or server process running this same
        # command becomes its role there); each stage's dp ranks then share the servers as a group
        mx.kv.create(cfg.kvstore.lower())
    info = distributed.init()
    lead = info.rank == 0
    tp, ckpt, split_points = 1, False, None
    if cfg.plan:
        chosen = _agreed_plan(cfg, info)
        cfg = replace(cfg, pp=chosen["pp"], dp=chosen["dp"], micro_batches=chosen["m"],
                      schedule=chosen["schedule"])
        tp, ckpt, split_points = chosen["tp"], chosen["ckpt"], chosen["split_points"]
    dp = cfg.dp or info.world_size // cfg.pp

    def say(msg: str) -> None:
        if lead:
            print(msg, file=log or sys.stdout, flush=True)

    if cfg.threads > 0:
        torch.set_num_threads(cfg.threads)
    if cfg.batch_size % (dp * cfg.micro_batches):
        raise SystemExit(f"--batch-size {cfg.batch_size} must be divisible by dp x micro-batches = "
                         f"{dp} x {cfg.micro_batches}")
    mx.random.seed(cfg.seed)
    train_set, test_set, data_desc = load_datasets(cfg)
    say(f"data: {data_desc}")
    to_tensor = transforms.ToTensor()
    pcfg = parallel.ParallelConfig(dp=dp, pp=cfg.pp, tp=tp)
    dp_rank = pcfg.coords(info.rank)[0]
    sampler = SplitSampler(len(train_set), dp, dp_rank, even_size=True, seed=cfg.seed)
    local = cfg.batch_size // dp
    train_loader = DataLoader(train_set.transform_first(to_tensor), batch_size=local, sampler=sampler,
                              last_batch="discard", num_workers=cfg.num_workers)
    test_loader = DataLoader(test_set.transform_first(to_tensor), batch_size=max(cfg.batch_size, 256),
                             shuffle=False, last_batch="keep", num_workers=cfg.num_workers)
    net = model_zoo.vision.get_model(cfg.model, classes=num_classes(cfg))
    net.initialize(mx.init.Xavier(magnitude=2.24))
    sample = next(iter(train_loader))[0][: local // cfg.micro_batches]
    with mx.autograd.predict_mode():
        net(sample)  # finishes deferred shapes alike on every rank (same seed)
    dp_store = cfg.kvstore.lower() if over_servers else "horovod" if dp > 1 else None
    pnet = parallel.parallelize(net, pcfg, micro_batches=cfg.micro_batches, schedule=cfg.schedule,
                                stages_per_rank=2 if cfg.schedule in ("interleaved", "zero_bubble") else 1,
                                sample_input=sample, kvstore=dp_store,
                                split_points=split_points, checkpoint_activations=ckpt)
    opt_params: dict[str, Any] = {"learning_rate": cfg.lr, "wd": cfg.wd}
    if cfg.lr_schedule == "cosine":
        opt_params["lr_scheduler"] = mx.lr_scheduler.CosineScheduler(
            max_update=max(cfg.epochs * len(train_loader), 1), base_lr=cfg.lr)
    if cfg.optimizer.lower() in ("sgd", "nag", "signum", "lars"):
        opt_params["momentum"] = cfg.momentum
    trainer = Trainer(pnet.collect_params(), cfg.optimizer, opt_params, kvstore=pnet.kvstore,
                      compression_params=compression_params(cfg) if pnet.kvstore is not None else None)
    loss_fn = loss.SoftmaxCrossEntropyLoss()
    say(f"model: {cfg.model}  layout: dp={dp} x pp={cfg.pp} x tp={tp}, {cfg.schedule}, {cfg.micro_batches} "
        f"micro-batches  stages: {pnet.stage_paths[0][0]}..{pnet.stage_paths[-1][-1]} in {pnet.num_stages}  "
        f"dp store: {pnet.kvstore.type if pnet.kvstore is not None else 'none'}  "
        f"optimizer: {cfg.optimizer}  batch: {cfg.batch_size}  epochs: {cfg.epochs}")
    history = []
    t_start = time.perf_counter()
    for epoch in range(cfg.epochs):
        sampler.set_epoch(epoch)
        bar = ProgressBar(len(train_loader), desc=f"epoch {epoch + 1}/{cfg.epochs}",
                          enabled=cfg.progress and lead)
        loss_sum, n_seen = 0.0, 0
        for data, label in train_loader:
            loss_sum += pnet.train_step(data, label, loss_fn) * data.shape[0]
            trainer.step(cfg.batch_size)  # the global batch: the dp store sums (MXNet's rule)
            n_seen += data.shape[0]
            bar.update(1, samples=data.shape[0] * dp, loss=loss_sum / n_seen)
        bar.close()
        correct = count = 0
        for data, label in test_loader:  # every rank takes part: the pipeline runs on all of them
            out = pnet(data)
            correct += int((out.argmax(1) == label.to(out.device).long()).sum())
            count += int(label.shape[0])
        rec = {"epoch": epoch + 1, "train_loss": loss_sum / max(n_seen, 1),
               "test_acc": correct / max(count, 1), "seconds": bar.elapsed,
               "samples_per_sec": n_seen * dp / max(bar.elapsed, 1e-9)}
        history.append(rec)
        say(f"epoch {epoch + 1}: train loss {rec['train_loss']:.4f}  test acc {rec['test_acc']:.4f}  "
            f"{rec['samples_per_sec']:,.0f} samples/s  {rec['seconds']:.1f}s")
    result = {"config": asdict(cfg), "data": data_desc, "epochs": history,
              "final_test_acc": history[-1]["test_acc"] if history else None,
              "total_seconds": time.perf_counter() - t_start, "workers": info.world_size,
              "pipeline": {"dp": dp, "pp": cfg.pp, "tp": tp, "schedule": cfg.schedule,
                           "kvstore": pnet.kvstore.type if pnet.kvstore is not None else None,
                           "micro_batches": cfg.micro_batches, "stages": pnet.stage_paths,
                           "tp_plan": pnet.tp_plan, "planned": bool(cfg.plan)},
              "torch": torch.__version__, "mxtorch": mx.__version__}
    os.makedirs(cfg.output, exist_ok=True)
    params_path = os.path.join(cfg.output, "model.params")
    # every rank: the stages meet in one whole-model file (mxtorch's own output: safetensors)
    pnet.save_parameters(params_path, format="safetensors")
    if lead:
        result["params_file"] = params_path
        atomic_write_text(os.path.join(cfg.output, "metrics.json"), json.dumps(result, indent=2))
        say(f"final held-out accuracy: {result['final_test_acc']:.4f}; saved {params_path} (the whole model)")
    return result
