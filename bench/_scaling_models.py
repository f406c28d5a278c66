"""What bench/scaling.py replays and predicts: a model's backward as layers of (seconds, gradients),
and an alpha-beta model of each communication schedule.

A :class:`Replay` is a model's forward time and its backward as :class:`Layer` s in the order
backward produces them (the last layer first), each with its accelerator time (FLOPs / FLOP/s)
and the element counts of the gradients it makes ready.  Everything here is arithmetic in
real (undilated) seconds and bytes; :mod:`_scaling_replay` dilates and scales it.

The models (``alpha`` seconds per message step, ``beta`` bytes/s of one link, each way):

* ring all-reduce of a bucket of ``b`` bytes on ``n`` workers: ``2(n-1)/n * b / beta + 2(n-1) alpha``;
  buckets go on the wire one after another, each when its last gradient is ready (overlap) or
  all after the backward (no overlap); the step ends with the backward or the last bucket;
* all-gather of a ``p``-byte payload per worker (2bit): ``(n-1) p / beta + (n-1) alpha``;
* parameter servers: every worker pushes and pulls each gradient; the busiest server's link
  carries ``n`` workers' share of it, so a worker's push of ``b`` bytes takes
  ``b * max(1, n * share) / beta`` (``share``: the busiest server's fraction of the bytes);
  pushes are pipelined (one after another on the link, no latency between them); the pull of
  the last layer follows the last push, plus a round trip (``alpha``) for each.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field

H100_BF16_FLOPS = 989e12
"""An H100 SXM's dense bf16 peak, FLOP/s."""
DEFAULT_MFU = 0.4
TCP_GOODPUT = 1448 / 1514
"""Payload bytes per byte tc counts: a 1500-byte-MTU frame (14 bytes of Ethernet header) carries
1448 bytes of TCP payload (20 IP + 32 TCP with timestamps): a shaped link moves this share."""
FP32 = 4


@dataclass(frozen=True)
class Layer:
    """One step of the backward: ``seconds`` of accelerator time, then ``grads`` (element counts) ready."""

    name: str
    seconds: float
    grads: tuple[int, ...]


@dataclass(frozen=True)
class Replay:
    """A model's training step as the bench replays it (real seconds at the configured FLOP/s)."""

    name: str
    forward_s: float
    layers: tuple[Layer, ...]  # backward order
    batch: str  # what one worker's batch is, for people

    @property
    def backward_s(self) -> float:
        return sum(la.seconds for la in self.layers)

    @property
    def compute_s(self) -> float:
        return self.forward_s + self.backward_s

    @property
    def params(self) -> int:
        return sum(sum(la.grads) for la in self.layers)


# ---- the models -----------------------------------------------------------------------------------
def _from_forward_flops(name: str, entries: Sequence[tuple[str, float, tuple[int, ...]]], flops: float,
                        batch: str) -> Replay:
    """``entries``: (name, forward FLOPs of the batch, gradients) in forward order; backward = 2 x forward."""
    layers = tuple(Layer(n, 2.0 * f / flops, g) for n, f, g in reversed(entries))
    return Replay(name, sum(f for _, f, _ in entries) / flops, layers, batch)


def resnet50_entries() -> list[tuple[str, float, tuple[int, ...]]]:
    """resnet50_v1 of the model zoo (no weights), one 224x224 image: each parameterised layer's
    forward FLOPs (2 per multiply-add) and gradient sizes, in the order the forward runs them."""
    import torch

    import mxtorch as mx

    net = mx.gluon.model_zoo.vision.resnet50_v1()
    net.initialize()
    with torch.no_grad():
        net(torch.zeros(1, 3, 224, 224))  # deferred initialisation: the layers get their parameters
    entries: list[tuple[str, float, tuple[int, ...]]] = []

    def hook(module: torch.nn.Module, _inputs: object, output: torch.Tensor) -> None:
        params = [p for p in module.parameters(recurse=False) if p.requires_grad]
        weight = max(params, key=lambda p: p.dim())
        if weight.dim() >= 2:  # conv / dense: one multiply-add per weight per output position
            flops = 2.0 * weight.numel() * output.numel() / weight.shape[0]
        else:  # batch norm: a handful of operations per element
            flops = 4.0 * output.numel()
        entries.append((type(module).__name__, flops, tuple(p.numel() for p in params)))

    handles = [m.register_forward_hook(hook) for m in net.modules()
               if any(True for _ in m.parameters(recurse=False))]
    with torch.no_grad():
        net(torch.zeros(1, 3, 224, 224))
    for h in handles:
        h.remove()
    return entries


def resnet50(batch: int, flops: float, entries: Sequence[tuple[str, float, tuple[int, ...]]] | None = None
             ) -> Replay:
    per_image = resnet50_entries() if entries is None else entries
    return _from_forward_flops("resnet50_v1", [(n, f * batch, g) for n, f, g in per_image], flops,
                               f"{batch} images 224x224")


def transformer(batch: int, flops: float, layers: int = 24, d: int = 1024, seq: int = 1024,
                vocab: int = 50257) -> Replay:
    """A GPT-2-medium-like decoder (24 layers, d=1024, 4d MLP, tied embedding: ~355M parameters),
    ``batch`` sequences of ``seq`` tokens; matmul FLOPs 2 per multiply-add, attention scores included."""
    tokens = batch * seq
    attn_scores = 4.0 * tokens * seq * d  # QK^T and AV of a layer (causal masking not discounted)
    entries: list[tuple[str, float, tuple[int, ...]]] = []
    for i in range(layers):
        entries += [
            (f"ln1.{i}", 5.0 * tokens * d, (d, d)),
            (f"qkv.{i}", 2.0 * tokens * d * 3 * d + attn_scores, (3 * d * d, 3 * d)),
            (f"proj.{i}", 2.0 * tokens * d * d, (d * d, d)),
            (f"ln2.{i}", 5.0 * tokens * d, (d, d)),
            (f"fc1.{i}", 2.0 * tokens * d * 4 * d, (4 * d * d, 4 * d)),
            (f"fc2.{i}", 2.0 * tokens * 4 * d * d, (4 * d * d, d)),
        ]
    entries.append(("ln_f", 5.0 * tokens * d, (d, d)))
    # the tied output projection runs first in the backward, but the embedding's gradient (it and
    # the token lookup's) is complete only at the very end, with the position embedding
    entries.insert(0, ("embedding", 0.0, (vocab * d, seq * d)))
    entries.append(("lm_head (tied)", 2.0 * tokens * d * vocab, ()))
    return _from_forward_flops(f"transformer {layers}x{d}", entries, flops, f"{batch} x {seq} tokens")


# ---- buckets -----------------------------------------------------------------------------------------
@dataclass
class Bucket:
    """Gradients all-reduced together: (layer index, gradient index) of its members, bytes, ready at."""

    members: list[tuple[int, int]] = field(default_factory=list)
    nbytes: int = 0
    last_layer: int = 0


def buckets(replay: Replay, bucket_bytes: int, itemsize: int = FP32) -> list[Bucket]:
    """Gradients in backward order, a bucket closed once it holds ``bucket_bytes`` (DDP's rule);
    ``bucket_bytes`` 0: one bucket per gradient."""
    out: list[Bucket] = []
    cur = Bucket()
    for li, layer in enumerate(replay.layers):
        for gi, n in enumerate(layer.grads):
            cur.members.append((li, gi))
            cur.nbytes += n * itemsize
            cur.last_layer = li
            if cur.nbytes >= bucket_bytes:
                out.append(cur)
                cur = Bucket()
    if cur.members:
        out.append(cur)
    return out


def ready_times(replay: Replay) -> list[float]:
    """When each layer's gradients are ready, from the start of the step (real seconds)."""
    t, out = replay.forward_s, []
    for layer in replay.layers:
        t += layer.seconds
        out.append(t)
    return out


# ---- alpha-beta predictions (real seconds per step) ---------------------------------------------------
def ring_allreduce_s(nbytes: float, n: int, alpha: float, beta: float) -> float:
    if n < 2:
        return 0.0
    return 2.0 * (n - 1) / n * nbytes / beta + 2.0 * (n - 1) * alpha


def allgather_s(payload_bytes: float, n: int, alpha: float, beta: float) -> float:
    if n < 2:
        return 0.0
    return (n - 1) * payload_bytes / beta + (n - 1) * alpha


def serial_channel(ready: Sequence[float], cost: Sequence[float]) -> float:
    """When the last of a series of transfers ends: each starts at its ready time or when the one
    before it ended (one link, used in order)."""
    end = 0.0
    for r, c in zip(ready, cost):
        end = max(end, r) + c
    return end


def predict_allreduce(replay: Replay, n: int, alpha: float, beta: float, bucket_bytes: int,
                      overlap: bool, wire_ratio: float = 1.0, gather: bool = False) -> float:
    """Step time of all-reduced buckets; ``wire_ratio``: payload bytes per fp32 byte (fp16: 0.5,
    2bit: 1/16); ``gather``: payloads all-gathered, not all-reduced (2bit)."""
    bs = buckets(replay, bucket_bytes)
    ready = ready_times(replay)
    end_backward = replay.compute_s
    starts = [ready[b.last_layer] if overlap else end_backward for b in bs]
    costs = [allgather_s(b.nbytes * wire_ratio, n, alpha, beta) if gather
             else ring_allreduce_s(b.nbytes * wire_ratio, n, alpha, beta) for b in bs]
    return max(end_backward, serial_channel(starts, costs))


def predict_ps(replay: Replay, n: int, servers: int, alpha: float, beta: float,
               busiest_share: float | None = None) -> float:
    """Step time with parameter servers, every layer pushed when ready and pulled after.

    ``busiest_share``: the fraction of the gradient bytes the busiest server holds (None: 1/servers).
    """
    share = 1.0 / servers if busiest_share is None else busiest_share
    slow = max(1.0, n * share)  # a worker's push shares the busiest server's link with n - 1 others
    costs = [sum(layer.grads) * FP32 * slow / beta for layer in replay.layers]
    pushed = serial_channel(ready_times(replay), costs)  # messages pipelined: no latency between them
    last = replay.layers[-1]  # its pull follows its push: one round trip (alpha) for each
    pulled = pushed + sum(last.grads) * FP32 * slow / beta + 2 * alpha
    return max(replay.compute_s, pulled)


def link_beta(bits_per_s: float) -> float:
    """Payload bytes/s of a link shaped to ``bits_per_s``."""
    return bits_per_s / 8.0 * TCP_GOODPUT


def efficiency(ideal_s: float, step_s: float) -> float:
    return ideal_s / step_s if step_s > 0 and math.isfinite(step_s) else 0.0
