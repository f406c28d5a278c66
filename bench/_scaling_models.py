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
* parameter servers: the bench's thread pushpulls, in one synchronous call, every layer whose
  gradients are ready when it comes round; each server's link carries ``n`` workers' share of a
  call's bytes (placed as mxtorch places the keys); a call ends with its last layer's reply plus a
  round trip (``alpha``: a one-element pushpull), and the next starts after it
  (:func:`predict_ps_calls`).
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
    rows: tuple[int, ...] = ()  # each gradient's matrix rows (its first dimension; 0: a vector)
    act: int = 0  # elements of the layer's forward output for the batch (what a pipeline cut sends)

    def matrix_rows(self, i: int) -> int:
        return self.rows[i] if i < len(self.rows) else 0


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
Entry = tuple[str, float, tuple[int, ...], tuple[int, ...], int]
"""(name, forward FLOPs, gradient sizes, gradient rows, output elements) of one layer."""


def _from_forward_flops(name: str, entries: Sequence[Entry], flops: float, batch: str) -> Replay:
    """``entries`` in forward order, FLOPs and outputs of the batch; backward = 2 x forward."""
    layers = tuple(Layer(n, 2.0 * f / flops, g, r, a) for n, f, g, r, a in reversed(entries))
    return Replay(name, sum(e[1] for e in entries) / flops, layers, batch)


def resnet50_entries() -> list[Entry]:
    """resnet50_v1 of the model zoo (no weights), one 224x224 image: each parameterised layer's
    forward FLOPs (2 per multiply-add), gradient sizes and rows and output size, in the order the
    forward runs them."""
    import torch

    import mxtorch as mx

    net = mx.gluon.model_zoo.vision.resnet50_v1()
    net.initialize()
    with torch.no_grad():
        net(torch.zeros(1, 3, 224, 224))  # deferred initialisation: the layers get their parameters
    entries: list[Entry] = []

    def hook(module: torch.nn.Module, _inputs: object, output: torch.Tensor) -> None:
        params = [p for p in module.parameters(recurse=False) if p.requires_grad]
        weight = max(params, key=lambda p: p.dim())
        if weight.dim() >= 2:  # conv / dense: one multiply-add per weight per output position
            flops = 2.0 * weight.numel() * output.numel() / weight.shape[0]
        else:  # batch norm: a handful of operations per element
            flops = 4.0 * output.numel()
        entries.append((type(module).__name__, flops, tuple(p.numel() for p in params),
                        tuple(p.shape[0] if p.dim() >= 2 else 0 for p in params), output.numel()))

    handles = [m.register_forward_hook(hook) for m in net.modules()
               if any(True for _ in m.parameters(recurse=False))]
    with torch.no_grad():
        net(torch.zeros(1, 3, 224, 224))
    for h in handles:
        h.remove()
    return entries


def resnet50(batch: int, flops: float, entries: Sequence[Entry] | None = None) -> Replay:
    per_image = resnet50_entries() if entries is None else entries
    batched = [(n, f * batch, g, r, a * batch) for n, f, g, r, a in per_image]
    return _from_forward_flops("resnet50_v1", batched, flops, f"{batch} images 224x224")


def transformer(batch: int, flops: float, layers: int = 24, d: int = 1024, seq: int = 1024,
                vocab: int = 50257) -> Replay:
    """A GPT-2-medium-like decoder (24 layers, d=1024, 4d MLP, tied embedding: ~355M parameters),
    ``batch`` sequences of ``seq`` tokens; matmul FLOPs 2 per multiply-add, attention scores included."""
    tokens = batch * seq
    attn_scores = 4.0 * tokens * seq * d  # QK^T and AV of a layer (causal masking not discounted)
    entries: list[Entry] = []
    for i in range(layers):  # weights (out, in) as torch's Linear keeps them
        entries += [
            (f"ln1.{i}", 5.0 * tokens * d, (d, d), (0, 0), tokens * d),
            (f"qkv.{i}", 2.0 * tokens * d * 3 * d + attn_scores, (3 * d * d, 3 * d), (3 * d, 0), tokens * d),
            (f"proj.{i}", 2.0 * tokens * d * d, (d * d, d), (d, 0), tokens * d),
            (f"ln2.{i}", 5.0 * tokens * d, (d, d), (0, 0), tokens * d),
            (f"fc1.{i}", 2.0 * tokens * d * 4 * d, (4 * d * d, 4 * d), (4 * d, 0), tokens * 4 * d),
            (f"fc2.{i}", 2.0 * tokens * 4 * d * d, (4 * d * d, d), (d, 0), tokens * d),
        ]
    entries.append(("ln_f", 5.0 * tokens * d, (d, d), (0, 0), tokens * d))
    # the tied output projection runs first in the backward, but the embedding's gradient (it and
    # the token lookup's) is complete only at the very end, with the position embedding
    entries.insert(0, ("embedding", 0.0, (vocab * d, seq * d), (vocab, seq), tokens * d))
    entries.append(("lm_head (tied)", 2.0 * tokens * d * vocab, (), (), tokens * vocab))
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


def ps_layer_messages(replay: Replay, servers: int, scale: int) -> list[list[tuple[int, int]]]:
    """Each layer's push messages in the order a worker sends them, as (server, real bytes): the
    bench's keys placed as mxtorch's workers place them (``kv.init`` in backward order, a key above
    the big-array bound sliced, one message per slice; the bound and the slice size ÷ ``scale``,
    as ``bench/scaling.py``'s ``ps_env`` sets them for the scaled-down gradients)."""
    from mxtorch.kvstore.ps.config import DEFAULT_BIGARRAY_BOUND, DEFAULT_PIECE_BYTES
    from mxtorch.kvstore.ps.placement import place

    bound = max(1, DEFAULT_BIGARRAY_BOUND // scale)
    piece = max(1, max(4096, DEFAULT_PIECE_BYTES // scale) // FP32)
    loads = [0] * servers
    return [[(server, size * FP32 * scale) for numel in gs
             for server, _, size in place(numel, FP32, loads, bound, 1, piece=piece)]
            for gs in scaled_sizes(replay, scale)]


def ps_layer_server_bytes(replay: Replay, servers: int, scale: int) -> list[list[int]]:
    """Real bytes of each layer's gradients on each server (:func:`ps_layer_messages` summed)."""
    out = []
    for msgs in ps_layer_messages(replay, servers, scale):
        per = [0] * servers
        for server, nbytes in msgs:
            per[server] += nbytes
        out.append(per)
    return out


def _ps_call_s(n: int, beta: float, msgs: Sequence[tuple[int, int]]) -> float:
    """One synchronous pushpull of ``msgs`` ((server, bytes) in sending order), from its start to its
    last reply (alpha not included).  Every worker sends the same messages in the same order: a
    push is in once the worker's link has carried it and every message before it, and the server's
    link the ``n`` workers' copies of it and of everything sent to that server before it.  Its
    reply (the sum) leaves the server then, after the server's earlier replies: ``n`` copies on
    the server's link, one on the worker's.  So what ends a call is the reply of the last message
    each server gets, not of the call's last layer (with several servers the last layer's keys may
    be small and another server's last slice large)."""
    mine, on = 0, [0] * (max(s for s, _ in msgs) + 1)
    server_free = [0.0] * len(on)
    worker_free = end = 0.0
    for server, nbytes in msgs:
        mine += nbytes
        on[server] += nbytes
        pushed = max(mine, n * on[server]) / beta
        start = max(pushed, server_free[server])
        server_free[server] = start + n * nbytes / beta
        worker_free = max(worker_free, start) + nbytes / beta
        end = max(end, server_free[server], worker_free)
    return end


def predict_ps_calls(replay: Replay, n: int, alpha: float, beta: float,
                     messages: Sequence[Sequence[tuple[int, int]]]) -> float:
    """Step time of the bench's parameter-server replay, call by call: one thread pushpulls, in
    one call, every layer whose gradients are ready when it comes round, and waits for the call to
    return before the next.  ``messages``: each layer's push messages (:func:`ps_layer_messages`);
    a call costs :func:`_ps_call_s` plus one round trip (``alpha``: a one-element pushpull).  The
    step ends with the backward or the last call."""
    ready = ready_times(replay)
    free, i, layers = 0.0, 0, len(replay.layers)
    while i < layers:
        start = max(free, ready[i])
        j = i
        while j < layers and ready[j] <= start + 1e-12:
            j += 1
        msgs = [m for li in range(i, j) for m in messages[li]]
        free = start + (_ps_call_s(n, beta, msgs) if msgs else 0.0) + alpha
        i = j
    return max(replay.compute_s, free)


# ---- more of gloo's collectives (its algorithms, read from gloo's source) ----------------------------
def broadcast_s(nbytes: float, n: int, alpha: float, beta: float) -> float:
    """gloo's broadcast: a binomial tree, the root sends the whole buffer ceil(log2 n) times."""
    if n < 2:
        return 0.0
    return math.ceil(math.log2(n)) * (nbytes / beta + alpha)


def reduce_s(nbytes: float, n: int, alpha: float, beta: float, scale: int = 1) -> float:
    """gloo's reduce: a ring pass of segments (two in flight; 2n segments of at most 1 MiB, the last
    two not sent), then the root receives every other rank's chunk.  ``scale``: the bytes gloo
    sees are ``nbytes / scale`` (the segment count follows them)."""
    if n < 2:
        return 0.0
    seen = max(FP32, nbytes / scale)
    segment = min(math.ceil(seen / (2 * n)), 1 << 20)
    segments = -(-max(math.ceil(seen / segment), 2 * n) // n) * n
    ring = min(seen, (segments - 2) * segment) * scale
    return (ring + (n - 1) / n * nbytes) / beta + 2 * (n - 1) * alpha


# ---- ZeRO (mxtorch.gluon.ZeroTrainer's messages) -------------------------------------------------------
def scaled_sizes(replay: Replay, scale: int) -> list[list[int]]:
    """Each layer's gradient sizes as the replay holds them: ``scale`` x smaller, at least 1."""
    return [[max(1, g // scale) for g in la.grads] for la in replay.layers]


def zero_owner_bytes(replay: Replay, n: int, scale: int) -> list[int]:
    """Bytes each rank owns (:func:`zero_owners`) of the scaled gradients, times ``scale`` (real bytes)."""
    sizes = scaled_sizes(replay, scale)
    load = [0] * n
    for (li, gi), r in zero_owners(replay, n, scale).items():
        load[r] += sizes[li][gi] * FP32 * scale
    return load


def zero_layer_bytes(replay: Replay, n: int, scale: int) -> list[int]:
    """zero=3: each layer's all-gathered bytes (its parameters padded to n slices), real bytes."""
    return [sum(-(-g // n) * n for g in gs) * FP32 * scale for gs in scaled_sizes(replay, scale)]


def zero_grad_order(replay: Replay) -> list[tuple[int, int]]:
    """(layer, gradient) in the order ZeroTrainer's gradient hooks see them: backward order."""
    return [(li, gi) for li, la in enumerate(replay.layers) for gi in range(len(la.grads))]


def zero_owners(replay: Replay, n: int, scale: int) -> dict[tuple[int, int], int]:
    """The owning rank of each (layer, gradient): ZeroTrainer's ``shard_owners`` (whole parameters,
    largest first to the least loaded rank) of the scaled sizes."""
    from mxtorch.gluon.zero_trainer import shard_owners

    order = zero_grad_order(replay)
    sizes = scaled_sizes(replay, scale)
    return dict(zip(order, shard_owners([sizes[li][gi] for li, gi in order], n)))


def zero_buckets(replay: Replay, scale: int, bucket_bytes: int) -> list[list[tuple[int, int]]]:
    """The gradient buckets of zero 1's store and zero 2's hooks (both lay them out with
    ``backward_order_groups``, the gradients in backward order, ``bucket_bytes`` real bytes: ÷
    ``scale`` of the scaled ones)."""
    import torch

    from mxtorch.distributed.buckets import backward_order_groups

    order = zero_grad_order(replay)
    sizes = scaled_sizes(replay, scale)
    metas = ((k, torch.empty(sizes[li][gi], device="meta")) for k, (li, gi) in enumerate(order))
    groups = backward_order_groups(metas, max(1, bucket_bytes // scale))
    return [[order[k] for k in group] for group in groups]


def zero_gather_width(replay: Replay, n: int, scale: int) -> int:
    """zero 1/2: the bytes each rank sends in the all-gather of the updated parameters (the largest
    rank's share: the others pad to it), real bytes."""
    return max(zero_owner_bytes(replay, n, scale))


def zero3_pass(costs: Sequence[float], compute: Sequence[float], start: float, skew: float
               ) -> tuple[float, float]:
    """One pass (forward or backward) of zero=3's blocks: block j waits for its gather (started
    as a prefetch when block j-1's gather was done, or now), starts block j+1's, then computes.
    The gathers share the link one at a time; each ends ``skew`` after its alpha-beta time (it
    needs every rank); the first block of a pass waits for its own (nothing prefetched it).
    Returns (end, link free at)."""
    t, link = start, start
    ends: dict[int, float] = {}

    def launch(j: int) -> None:
        nonlocal link
        if costs[j] > 0:  # a block without parameters gathers nothing
            ends[j] = link = max(t, link) + skew + costs[j]
        else:
            ends[j] = t

    for j, c in enumerate(compute):
        if j not in ends:
            launch(j)
        t = max(t, ends[j])
        if j + 1 < len(costs):
            launch(j + 1)
        t += c
    return t, link


def predict_zero(replay: Replay, n: int, stage: int, alpha: float, beta: float, scale: int = 1,
                 skew: float = 0.0, bucket_bytes: int = 25 << 20) -> float:
    """Step time of ZeroTrainer(zero=stage), as the trainer sends it.

    1: the 'allreduce' store's buckets (laid out as zero 2's), each all-reduced as soon as its
    last layer is done, one after another on the link, then one all-gather of each rank's
    updated parameters, padded to the largest rank's share; 2: each gradient bucket
    (:func:`zero_buckets`) is reduced onto the owners of its members as soon as it is filled
    (one reduce per owner, one after another on the link), and before a new bucket's buffers are
    made (at its first gradient) every bucket but the latest started must be done, which blocks
    the backward; after the backward the rest is waited for, then the all-gather; 3: every layer
    all-gathers its parameters before its forward and again before its backward, the next
    layer's gather prefetched (:func:`zero3_pass`), then a tiny all-reduce (who has gradients)
    and one reduce-scatter of them all, which torch's gloo backend runs as an all-reduce of the
    whole input (``ProcessGroupGloo::reduce_scatter_tensor_coalesced``: all-reduce, then keep a
    chunk): twice a ring reduce-scatter's bytes.  ``skew``: what a collective costs beyond its
    alpha-beta time for the ranks' different arrival moments: once per blocking collective
    (stages 1 and 2: the all-reduce or the last reduce, and the all-gather; 3: the tiny
    all-reduce, the reduce-scatter, and each gather, where a prefetch hides it under compute).
    """
    if stage in (1, 2):
        gather = allgather_s(zero_gather_width(replay, n, scale), n, alpha, beta) + skew
        if stage == 1:  # the store's buckets (the same layout), each all-reduced when its last layer is done
            ready = ready_times(replay)
            sizes = scaled_sizes(replay, scale)
            bs = zero_buckets(replay, scale, bucket_bytes)
            nbytes = [sum(sizes[li][gi] for li, gi in b) * FP32 * scale for b in bs]
            end = serial_channel([ready[max(li for li, _ in b)] for b in bs],
                                 [ring_allreduce_s(x, n, alpha, beta) for x in nbytes])
            return max(replay.compute_s, end) + skew + gather
        owner = zero_owners(replay, n, scale)
        sizes = scaled_sizes(replay, scale)
        bs = zero_buckets(replay, scale, bucket_bytes)
        where = {m: (b, k) for b, members in enumerate(bs) for k, m in enumerate(members)}
        t, link = replay.forward_s, 0.0
        ends: list[float] = []  # of each started bucket
        for li, la in enumerate(replay.layers):
            t += la.seconds
            for gi in range(len(la.grads)):
                b, k = where[(li, gi)]
                if k == 0:  # the bucket's buffers: what was started before the latest is waited for
                    t = max([t] + ends[:-1])
                if k == len(bs[b]) - 1:  # filled: one reduce per owner, on the link in turn
                    per: dict[int, int] = {}
                    for m in bs[b]:
                        per[owner[m]] = per.get(owner[m], 0) + sizes[m[0]][m[1]] * FP32 * scale
                    for r in sorted(per):
                        link = max(t, link) + reduce_s(per[r], n, alpha, beta, scale)
                    ends.append(link)
        return max([t] + ends) + skew + gather
    gathered = zero_layer_bytes(replay, n, scale)
    costs = [allgather_s(b / n, n, alpha, beta) if b else 0.0 for b in gathered]
    fwd_order = list(range(len(replay.layers)))[::-1]
    t, _ = zero3_pass([costs[li] for li in fwd_order], [replay.layers[li].seconds / 2 for li in fwd_order],
                      0.0, skew)
    t, _ = zero3_pass(costs, [la.seconds for la in replay.layers], t, skew)
    return t + 2 * (n - 1) * alpha + ring_allreduce_s(sum(gathered), n, alpha, beta) + 2 * skew


# ---- PowerSGD (mxtorch's compressor through the allreduce store) ------------------------------------
def powersgd_shape(layer: Layer, i: int, scale: int) -> tuple[int, ...]:
    """The shape the replay gives gradient ``i`` of ``layer``: a matrix keeps its aspect, each
    side divided by sqrt(scale) (a vector: its length / scale)."""
    numel = max(1, layer.grads[i] // scale)
    rows = layer.matrix_rows(i)
    if rows <= 1:
        return (numel,)
    r = max(1, min(numel, round(rows / math.sqrt(scale))))
    return (r, max(1, numel // r))


def powersgd_exchanges(replay: Replay, rank: int, scale: int) -> tuple[int, int]:
    """Bytes of PowerSGD's two all-reduces (the P factors with every gradient sent as it is, then
    the Q factors) of the replay's gradients (their shapes from :func:`powersgd_shape`)."""
    first = second = 0
    for la in replay.layers:
        for i in range(len(la.grads)):
            shape = powersgd_shape(la, i, scale)
            if len(shape) == 2 and (shape[0] + shape[1]) * rank < shape[0] * shape[1]:
                first += shape[0] * rank * FP32
                second += shape[1] * rank * FP32
            else:
                first += math.prod(shape) * FP32
    return first, second


def predict_powersgd(replay: Replay, n: int, rank: int, alpha: float, beta: float, scale: int,
                     bucket_bytes: int) -> float:
    """The store compresses after the backward; each exchange is all-reduced in buckets of
    ``bucket_bytes`` (of the bytes gloo sees); real bytes are the replay's times ``scale``."""
    comm = 0.0
    for nbytes in powersgd_exchanges(replay, rank, scale):
        full, rest = divmod(nbytes, bucket_bytes)
        sizes = [bucket_bytes] * full + ([rest] if rest else [])
        comm += sum(ring_allreduce_s(b * scale, n, alpha, beta) for b in sizes)
    return replay.compute_s + comm


# ---- pipeline (pp stages x dp replicas) ------------------------------------------------------------
ACT_BYTES = 2
"""Bytes per activation element a stage sends (bf16: what the accelerator trains in)."""


@dataclass(frozen=True)
class Stage:
    """A pipeline stage: its layers (indices into ``Replay.layers``), forward and backward seconds
    of one worker's batch, and the elements of the activation it sends on (0: the last stage)."""

    layers: tuple[int, ...]
    forward_s: float
    backward_s: float
    act: int


def pipeline_stages(replay: Replay, pp: int) -> list[Stage]:
    """``replay`` cut into ``pp`` stages of about equal compute, in forward order."""
    order = list(range(len(replay.layers)))[::-1]  # forward order
    if pp > len(order):
        raise ValueError(f"{replay.name} has {len(order)} layers, fewer than pp={pp} stages")
    cum = [0.0]
    for li in order:
        cum.append(cum[-1] + replay.layers[li].seconds)
    cuts = [0]
    for j in range(1, pp):
        lo, hi = cuts[-1] + 1, len(order) - (pp - j)
        cuts.append(min(range(lo, hi + 1), key=lambda p: abs(cum[p] - cum[-1] * j / pp)))
    cuts.append(len(order))
    out = []
    for j in range(pp):
        mine = tuple(order[cuts[j]:cuts[j + 1]])
        bwd = sum(replay.layers[li].seconds for li in mine)
        out.append(Stage(mine, bwd / 2, bwd, replay.layers[mine[-1]].act if j < pp - 1 else 0))
    return out


def pipeline_ops(schedule: str, stage: int, pp: int, micro: int) -> list[tuple[str, int]]:
    """The order a stage runs its microbatches' forwards ('F', j) and backwards ('B', j): GPipe
    (every forward, then every backward) or 1F1B (pp - stage - 1 forwards, then one forward and
    one backward in turn, then the backwards left)."""
    if schedule == "gpipe":
        return [("F", j) for j in range(micro)] + [("B", j) for j in range(micro)]
    warm = min(pp - stage - 1, micro)
    ops = [("F", j) for j in range(warm)]
    for j in range(micro - warm):
        ops += [("F", warm + j), ("B", j)]
    return ops + [("B", j) for j in range(micro - warm, micro)]


def predict_pipeline(replay: Replay, pp: int, dp: int, micro: int, schedule: str, alpha: float,
                     beta: float, bucket_bytes: int) -> float:
    """Step time of ``pp`` stages, each pipeline ``pp`` workers' batches in ``micro`` microbatches
    (weak scaling: every worker's share of the work is its batch), then each stage's gradients
    all-reduced over its ``dp`` replicas in buckets.  Simulated op by op: a stage runs its ops
    in order, an op starts when its input has arrived; an activation (or its gradient) crosses
    the sender's link out and the receiver's link in, one message at a time on each."""
    stages = pipeline_stages(replay, pp)
    per = pp / micro  # one microbatch's share of a worker's batch, times the pp workers' batches
    ops = [pipeline_ops(schedule, s, pp, micro) for s in range(pp)]
    nxt, free = [0] * pp, [0.0] * pp
    link_out, link_in = [0.0] * pp, [0.0] * pp
    arrived: dict[tuple[str, int, int], float] = {}  # (kind, stage, microbatch): input there at

    def send(kind: str, src: int, dst: int, j: int, at: float) -> None:
        nbytes = stages[min(src, dst)].act * per * ACT_BYTES
        start = max(at, link_out[src], link_in[dst])
        link_out[src] = link_in[dst] = start + nbytes / beta
        arrived[(kind, dst, j)] = start + nbytes / beta + alpha

    while any(nxt[s] < len(ops[s]) for s in range(pp)):
        best: tuple[float, int] | None = None
        for s in range(pp):
            if nxt[s] == len(ops[s]):
                continue
            kind, j = ops[s][nxt[s]]
            needs = (s > 0) if kind == "F" else (s < pp - 1)
            if needs and (kind, s, j) not in arrived:
                continue
            start = max(free[s], arrived.get((kind, s, j), 0.0))
            if best is None or start < best[0]:
                best = (start, s)
        assert best is not None, "a pipeline schedule waits for itself"
        start, s = best
        kind, j = ops[s][nxt[s]]
        nxt[s] += 1
        free[s] = start + (stages[s].forward_s if kind == "F" else stages[s].backward_s) * per
        if kind == "F" and s < pp - 1:
            send("F", s, s + 1, j, free[s])
        elif kind == "B" and s > 0:
            send("B", s, s - 1, j, free[s])
    ends = []
    for s, st in enumerate(stages):
        grads = Replay("stage", 0.0, tuple(replay.layers[li] for li in st.layers), "")
        reduce = sum(ring_allreduce_s(b.nbytes, dp, alpha, beta) for b in buckets(grads, bucket_bytes))
        ends.append(max(free[s], link_out[s]) + reduce)
    return max(ends)


def link_beta(bits_per_s: float) -> float:
    """Payload bytes/s of a link shaped to ``bits_per_s``."""
    return bits_per_s / 8.0 * TCP_GOODPUT


def efficiency(ideal_s: float, step_s: float) -> float:
    return ideal_s / step_s if step_s > 0 and math.isfinite(step_s) else 0.0
