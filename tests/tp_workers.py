"""Rank functions of tests/test_tensor_parallel.py (importable by the ranks that run_workers starts)."""

from __future__ import annotations

from typing import Any

import torch
from pipeline_workers import one_process as _one_process

VOCAB, EMB, SEQ, HID, BATCH = 16, 8, 3, 16, 8
OUT = 4


# ---- the parallel cross-entropy on its own ---------------------------------------------------------
def ce_cases() -> list[dict[str, Any]]:
    """Full logits, labels and options of each case (the same on every rank and in the test)."""
    g = torch.Generator().manual_seed(11)
    return [
        {"pred": torch.randn(6, 10, generator=g) * 3, "label": torch.randint(0, 10, (6,), generator=g),
         "axis": -1, "sw": None, "weight": None},
        {"pred": torch.randn(4, 3, 10, generator=g),
         "label": torch.randint(0, 10, (4, 3), generator=g).float(),
         "axis": -1, "sw": torch.rand(4, 3, 1, generator=g), "weight": 0.5},
        {"pred": torch.randn(4, 10, 3, generator=g), "label": torch.randint(0, 10, (4, 3), generator=g),
         "axis": 1, "sw": None, "weight": None},
    ]


def parallel_ce() -> dict[str, Any]:
    """Each case's loss and this rank's gradient of its logit shard; then an out-of-range label."""
    import torch.distributed as dist

    from mxtorch import parallel
    from mxtorch.base import MXNetError
    from mxtorch.distributed import group

    group.init()
    rank, tp = dist.get_rank(), dist.get_world_size()
    out: dict[str, Any] = {"cases": []}
    for c in ce_cases():
        axis = c["axis"] % c["pred"].dim()
        n = c["pred"].shape[axis] // tp
        shard = c["pred"].narrow(axis, rank * n, n).clone().requires_grad_()
        loss_fn = parallel.ParallelSoftmaxCrossEntropyLoss(axis=c["axis"], weight=c["weight"])
        loss = loss_fn(shard, c["label"], c["sw"])
        (loss * torch.arange(1, loss.numel() + 1, dtype=loss.dtype).reshape(loss.shape)).sum().backward()
        out["cases"].append({"loss": loss.detach(), "grad": shard.grad})
    try:
        parallel.ParallelSoftmaxCrossEntropyLoss()(torch.zeros(2, 5), torch.tensor([1, 10]))
    except MXNetError as e:
        out["error"] = str(e)
    return out


# ---- Embedding -> Dense pair -> vocab-split Dense, trained with the parallel loss ----------------
LM_PLAN = {"0": "vocab", "1": "colwise", "2": "rowwise", "3": "colwise"}


def build_lm(seed: int = 0) -> Any:
    import mxtorch as mx
    from mxtorch.gluon import nn

    torch.manual_seed(seed)
    net = nn.HybridSequential()
    net.add(nn.Embedding(VOCAB, EMB), nn.Dense(HID, activation="relu", in_units=SEQ * EMB),
            nn.Dense(HID, activation="tanh", in_units=HID), nn.Dense(VOCAB, in_units=HID))
    net.initialize(mx.init.Xavier())
    return net


def lm_data() -> tuple[torch.Tensor, torch.Tensor]:
    g = torch.Generator().manual_seed(5)
    return torch.randint(0, VOCAB, (BATCH, SEQ), generator=g), torch.randint(0, VOCAB, (BATCH,), generator=g)


def lm_reference(steps: int = 5) -> dict[str, Any]:
    return _one_process(build_lm(), *lm_data(), steps)


def train_lm(path: str, steps: int = 5) -> dict[str, Any]:
    """tp=2: vocab-parallel embedding, a Dense pair, the vocab-split output and the parallel loss; saved
    to ``path`` and loaded back into a differently initialized network."""
    from mxtorch import gluon, parallel

    cfg = parallel.ParallelConfig(tp=2)
    pnet = parallel.parallelize(build_lm(), cfg, micro_batches=2, schedule="gpipe", kvstore=None,
                                tp_plan=LM_PLAN)
    x, y = lm_data()
    tr = gluon.Trainer(pnet.collect_params(), "sgd", {"learning_rate": 0.1, "momentum": 0.9})
    loss_fn = parallel.ParallelSoftmaxCrossEntropyLoss(pnet)
    losses = []
    for _ in range(steps):
        losses.append(pnet.train_step(x, y, loss_fn))
        tr.step(BATCH)
    pnet.save_parameters(path)
    fresh = parallel.parallelize(build_lm(seed=1), cfg, micro_batches=2, schedule="gpipe", kvstore=None,
                                 tp_plan=LM_PLAN)
    fresh.load_parameters(path)
    auto = parallel.parallelize(build_lm(), cfg, micro_batches=2, schedule="gpipe", kvstore=None)
    return {"losses": losses, "out": pnet(x), "loaded_out": fresh(x), "bytes": pnet.param_bytes(),
            "tp_rank": pnet.mesh.tp_rank, "auto_plan": auto.tp_plan}


# ---- a convnet: a column -> row convolution pair and a convolution -> Dense pair -----------------
def build_convnet(seed: int = 0) -> Any:
    import mxtorch as mx
    from mxtorch.gluon import nn

    torch.manual_seed(seed)
    net = nn.HybridSequential()
    net.add(nn.Conv2D(8, 3, in_channels=2, activation="relu"),
            nn.Conv2D(8, 3, in_channels=8, activation="relu"),
            nn.MaxPool2D(2), nn.Conv2D(16, 1, in_channels=8, activation="relu"), nn.Flatten(),
            nn.Dense(OUT, in_units=144))
    net.initialize(mx.init.Xavier())
    return net


def image_data() -> tuple[torch.Tensor, torch.Tensor]:
    g = torch.Generator().manual_seed(3)
    return torch.randn(8, 2, 10, 10, generator=g), torch.randint(0, OUT, (8,), generator=g).float()


def convnet_reference(steps: int = 5) -> dict[str, torch.Tensor]:
    return _one_process(build_convnet(), *image_data(), steps)["params"]


def train_convnet(path: str, steps: int = 5) -> dict[str, Any]:
    from mxtorch import gluon, parallel

    pnet = parallel.parallelize(build_convnet(), parallel.ParallelConfig(tp=2), micro_batches=2,
                                schedule="1f1b", kvstore=None, tp_plan="auto")
    x, y = image_data()
    tr = gluon.Trainer(pnet.collect_params(), "sgd", {"learning_rate": 0.1, "momentum": 0.9})
    for _ in range(steps):
        pnet.train_step(x, y, gluon.loss.SoftmaxCrossEntropyLoss())
        tr.step(8)
    pnet.save_parameters(path)
    return {"plan": pnet.tp_plan, "bytes": pnet.param_bytes(), "out": pnet(x)}


# ---- the convnet on dp=2 x pp=2 x tp=2 (eight processes) ----------------------------------------
GLOBAL_IMAGES = 16


def build_convnet3d(seed: int = 0) -> Any:
    """Two column -> row convolution pairs, then a convolution -> pool -> Flatten -> Dense pair."""
    import mxtorch as mx
    from mxtorch.gluon import nn

    torch.manual_seed(seed)
    net = nn.HybridSequential()
    net.add(nn.Conv2D(8, 3, in_channels=2, activation="relu"),
            nn.Conv2D(8, 3, in_channels=8, activation="relu"),
            nn.Conv2D(8, 3, padding=1, in_channels=8, activation="tanh"),
            nn.Conv2D(8, 1, in_channels=8, activation="relu"),
            nn.Conv2D(16, 1, in_channels=8, activation="relu"), nn.MaxPool2D(2), nn.Flatten(),
            nn.Dense(OUT, in_units=144))
    net.initialize(mx.init.Xavier())
    return net


def image_data3d() -> tuple[torch.Tensor, torch.Tensor]:
    g = torch.Generator().manual_seed(13)
    x = torch.randn(GLOBAL_IMAGES, 2, 10, 10, generator=g)
    return x, torch.randint(0, OUT, (GLOBAL_IMAGES,), generator=g).float()


def convnet3d_reference(steps: int = 5) -> dict[str, Any]:
    """One process on the global batch: parameters, losses, and net(x) after ``steps``."""
    return _one_process(build_convnet3d(), *image_data3d(), steps)


def train_convnet3d(path: str, steps: int = 5) -> dict[str, Any]:
    """dp=2 x pp=2 x tp=2, 1F1B, the dp gradients summed by the default store; saved to ``path``,
    which a freshly initialized 3-D network then loads."""
    from mxtorch import gluon, parallel

    cfg = parallel.ParallelConfig(dp=2, pp=2, tp=2)
    pnet = parallel.parallelize(build_convnet3d(), cfg, micro_batches=2, schedule="1f1b")
    x, y = image_data3d()
    share = GLOBAL_IMAGES // cfg.dp
    mine = slice(pnet.dp_rank * share, (pnet.dp_rank + 1) * share)
    tr = gluon.Trainer(pnet.collect_params(), "sgd", {"learning_rate": 0.1, "momentum": 0.9},
                       kvstore=pnet.kvstore)
    loss_fn = gluon.loss.SoftmaxCrossEntropyLoss()
    losses = []
    for _ in range(steps):
        losses.append(pnet.train_step(x[mine], y[mine], loss_fn))
        tr.step(GLOBAL_IMAGES)
    pnet.save_parameters(path)
    out = pnet(x)
    fresh = parallel.parallelize(build_convnet3d(seed=1), cfg, micro_batches=2, schedule="1f1b")
    fresh.load_parameters(path)
    return {"losses": losses, "out": out, "loaded_out": fresh(x), "plan": pnet.tp_plan,
            "stage_paths": pnet.stage_paths, "ranks": (pnet.dp_rank, pnet.pp_rank, pnet.mesh.tp_rank),
            "bytes": pnet.param_bytes(), "store": type(pnet.kvstore).__name__}


# ---- recurrent layers split by hidden units ("gates") ----------------------------------------
STEPS_T, FEAT, RHID = 5, 6, 8
RNN_BATCH = 8
PROJ = 5  # the LSTMP's projection_size: not a multiple of tp, so the output's gradient shares are uneven


def build_rnn_net(kind: str, seed: int = 0) -> Any:
    """'lstm': a 2-layer bidirectional LSTM -> Dense; 'lstmp': the same with projection_size=PROJ;
    'gru': a 2-layer GRU -> a bidirectional tanh RNN -> Dense (layout NTC, so that micro-batches split
    the batch)."""
    import mxtorch as mx
    from mxtorch.gluon import nn, rnn

    torch.manual_seed(seed)
    net = nn.HybridSequential()
    if kind == "lstm":
        net.add(rnn.LSTM(RHID, num_layers=2, layout="NTC", bidirectional=True, input_size=FEAT),
                nn.Dense(OUT, in_units=STEPS_T * 2 * RHID))
    elif kind == "lstmp":
        net.add(rnn.LSTM(RHID, num_layers=2, layout="NTC", bidirectional=True, input_size=FEAT,
                         projection_size=PROJ),
                nn.Dense(OUT, in_units=STEPS_T * 2 * PROJ))
    else:
        net.add(rnn.GRU(RHID, num_layers=2, layout="NTC", input_size=FEAT),
                rnn.RNN(RHID, activation="tanh", layout="NTC", bidirectional=True, input_size=RHID),
                nn.Dense(OUT, in_units=STEPS_T * 2 * RHID))
    net.initialize(mx.init.Uniform(0.3))
    return net


def rnn_data() -> tuple[torch.Tensor, torch.Tensor]:
    g = torch.Generator().manual_seed(21)
    x = torch.randn(RNN_BATCH, STEPS_T, FEAT, generator=g)
    return x, torch.randint(0, OUT, (RNN_BATCH,), generator=g).float()


def rnn_reference(kind: str, steps: int = 5) -> dict[str, Any]:
    return _one_process(build_rnn_net(kind), *rnn_data(), steps)


def train_rnn(kind: str, path: str, steps: int = 5, dp: int = 1, pp: int = 1,
              ckpt: bool = False) -> dict[str, Any]:
    """tp=2 (x ``dp`` replicas, each on its share of the batch, x ``pp`` 1F1B stages), tp_plan='auto'
    (the recurrent layers 'gates'), 5 SGD-momentum steps, saved to ``path``; then a differently
    initialized network of the same layout loads the file."""
    from mxtorch import gluon, parallel

    cfg = parallel.ParallelConfig(dp=dp, pp=pp, tp=2)
    store = "horovod" if dp > 1 else None
    pnet = parallel.parallelize(build_rnn_net(kind), cfg, micro_batches=2, schedule="1f1b", kvstore=store,
                                checkpoint_activations=ckpt)
    x, y = rnn_data()
    share = RNN_BATCH // dp
    mine = slice(pnet.dp_rank * share, (pnet.dp_rank + 1) * share)
    tr = gluon.Trainer(pnet.collect_params(), "sgd", {"learning_rate": 0.1, "momentum": 0.9},
                       kvstore=pnet.kvstore)
    losses = []
    for _ in range(steps):
        losses.append(pnet.train_step(x[mine], y[mine], gluon.loss.SoftmaxCrossEntropyLoss()))
        tr.step(RNN_BATCH)
    pnet.save_parameters(path)
    fresh = parallel.parallelize(build_rnn_net(kind, seed=1), cfg, micro_batches=2, schedule="1f1b",
                                 kvstore=store)
    fresh.load_parameters(path)
    rec = [p for name, p in pnet.collect_params().items() if is_recurrent_param(name)]
    return {"plan": pnet.tp_plan, "stage_paths": pnet.stage_paths, "losses": losses, "out": pnet(x),
            "loaded_out": fresh(x), "rnn_bytes": sum(p.data().numel() * 4 for p in rec)}


def is_recurrent_param(name: str) -> bool:
    """i2h_*, h2h_* and the LSTMP's h2r_weight."""
    return "2h_" in name or name.endswith("h2r_weight")


RNN_MODES = ("lstm", "gru", "rnn", "lstmp")


def rnn_states_cases() -> list[dict[str, Any]]:
    """:func:`rnn_states_case` of each of RNN_MODES, on one tp=2 mesh."""
    from mxtorch import parallel

    mesh = parallel.Mesh(parallel.ParallelConfig(tp=2))
    return [rnn_states_case(mode, mesh) for mode in RNN_MODES]


def rnn_states_case(mode: str, mesh: Any) -> dict[str, Any]:
    """One recurrent layer split by 'gates' (tp=2), called with initial states: outputs, final states
    and the gradients of input, states and (this rank's rows of) the parameters, for a weighted sum."""
    from mxtorch.parallel.split import Unit
    from mxtorch.parallel.tensor import shard_units

    layer = rnn_states_layer(mode)
    infos = shard_units([Unit("0", layer)], {"0": "gates"}, mesh.tp_mesh("cpu"), 2, mesh.tp_rank)
    x, states, out, new = rnn_states_backward(layer, mode)
    grads = {n: layer._param(n).data().grad for n in layer._flat_names}
    return {"out": out.detach(), "states": [s.detach() for s in new], "x_grad": x.grad,
            "state_grads": [s.grad for s in states], "param_grads": grads, "tp_rank": mesh.tp_rank,
            "groups": {n: infos[id(layer._param(n))].groups for n in layer._flat_names}}


def rnn_states_backward(layer: Any, mode: str) -> tuple[Any, list[Any], Any, list[Any]]:
    """``layer`` on the mode's input and initial states (both needing gradients), then backward of
    a weighted sum of the output and the final states: ``(x, states, out, final states)``."""
    from mxtorch import autograd

    x, states, weights = rnn_states_inputs(mode)
    x.requires_grad_()
    for s in states:
        s.requires_grad_()
    with autograd.record():
        out, new = layer(x, states)
        total = (out * weights[0]).sum() + sum((s * w).sum() for s, w in zip(new, weights[1:]))
    total.backward()
    return x, states, out, new


def rnn_states_layer(mode: str) -> Any:
    import mxtorch as mx
    from mxtorch.gluon import rnn

    torch.manual_seed(4)
    if mode == "lstm":  # with the cell-state clip (the steps in Python on both sides)
        layer = rnn.LSTM(RHID, num_layers=2, bidirectional=True, input_size=FEAT, state_clip_min=-0.3,
                         state_clip_max=0.3)
    elif mode == "lstmp":  # projection and the clip (with NaN mapping)
        layer = rnn.LSTM(RHID, num_layers=2, bidirectional=True, input_size=FEAT, projection_size=PROJ,
                         state_clip_min=-0.3, state_clip_max=0.3, state_clip_nan=True)
    elif mode == "gru":
        layer = rnn.GRU(RHID, num_layers=2, bidirectional=True, input_size=FEAT)
    else:
        layer = rnn.RNN(RHID, num_layers=2, activation="relu", input_size=FEAT)
    layer.initialize(mx.init.Uniform(0.4))
    return layer


def rnn_states_inputs(mode: str) -> tuple[torch.Tensor, list[torch.Tensor], list[torch.Tensor]]:
    """x (T, N, C), initial states, and the weights of outputs and final states in the summed loss."""
    g = torch.Generator().manual_seed(8)
    layer = rnn_states_layer(mode)
    x = torch.randn(STEPS_T, 3, FEAT, generator=g)
    shapes = [tuple(i["shape"]) for i in layer.state_info(3)]
    states = [torch.randn(s, generator=g) * 0.5 for s in shapes]
    out_shape = (STEPS_T, 3, (layer._projection_size or RHID) * layer._dir)
    weights = [torch.randn(s, generator=g) for s in [out_shape, *shapes]]
    return x, states, weights
