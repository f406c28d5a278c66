"""The compressors' block kernels against plain references of the documented rules, bit for bit.

The references are written from the rules (MXNet's 2-bit and 1-bit gradient compression:
thresholds, dequantized values, residual = what was not sent; top-k by magnitude), one
whole-tensor torch expression each, and run on random gradients with the awkward values
mixed in (exactly +-threshold, signed zeros, NaN, infinities), odd lengths, lengths across
the kernels' block boundaries, several steps (the residual carries over), fp16/bf16/fp64
gradients.  The generic error-feedback path of :class:`Compressor` (what a compressor
without ``encodes_in_place`` runs) must agree as well.
"""

import math
import threading

import pytest
import torch

from mxtorch.compression import CompressionError, OneBitCompressor, TopKCompressor, TwoBitCompressor
from mxtorch.compression._blocks import blocks

BLOCK = next(iter(blocks(1 << 30, torch.device("cpu"))))[1]
STEPS = 3
# float32 at every length (across one and several blocks), the other dtypes at a few
CASES = [(n, torch.float32) for n in (1, 15, 17, 33, 1000, BLOCK - 1, BLOCK + 45)] + \
    [(n, d) for n in (17, BLOCK + 1) for d in (torch.float16, torch.bfloat16, torch.float64)]


def gradient(n, dtype, seed, t):
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(n, generator=g, dtype=torch.float64) * 0.6
    odd = torch.tensor([t, -t, 0.0, -0.0, float("nan"), float("inf"), -float("inf"), 1.0, -1.0],
                       dtype=torch.float64)
    at = torch.randperm(n, generator=g)[:max(1, n // 40)]
    x[at] = odd[torch.randint(0, len(odd), (len(at),), generator=g)]
    return x.to(dtype)


def assert_bits_equal(a, b):
    """Same dtype, shape and bits (signed zeros told apart; any NaN equals any NaN)."""
    assert a.dtype == b.dtype and a.shape == b.shape, (a.dtype, b.dtype, a.shape, b.shape)
    if not a.is_floating_point():
        assert torch.equal(a, b)
        return
    nan_a, nan_b = torch.isnan(a), torch.isnan(b)
    assert torch.equal(nan_a, nan_b)
    ints = {2: torch.int16, 4: torch.int32, 8: torch.int64}[a.element_size()]
    zero = torch.zeros((), dtype=a.dtype)
    diff = torch.where(nan_a, zero, a).view(ints) != torch.where(nan_b, zero, b).view(ints)
    if bool(diff.any()):
        first = int(diff.nonzero()[0])
        raise AssertionError(f"{int(diff.sum())} of {a.numel()} elements differ, first at {first}")


def pack_reference(codes, bits):
    """Codes into int32 words, code i of a word at bit i * bits, as MXNet's packed layout."""
    per_word = 32 // bits
    words = -(-codes.numel() // per_word) or 1
    padded = torch.zeros(words * per_word, dtype=torch.int64)
    padded[:codes.numel()] = codes
    packed = (padded.view(words, per_word) << torch.arange(0, 32, bits)).sum(1)
    return torch.where(packed >= 2**31, packed - 2**32, packed).to(torch.int32)


class Reference:
    """gradient + residual -> (payload, decompressed), whole tensors, by a quantizer's rule;
    the residual is what was not sent (clamped to ``[-bound, bound]`` when a bound is given)."""

    def __init__(self, rule, bound=None):
        self.rule, self.bound, self.residual = rule, bound, None

    def step(self, grad):
        work = torch.promote_types(grad.dtype, torch.float32)
        v = grad.reshape(-1).to(work)
        v = v + (torch.zeros_like(v) if self.residual is None else self.residual)
        payload, decoded = self.rule(v, grad.dtype)
        self.residual = v - decoded.to(work)
        if self.bound is not None:
            self.residual = self.residual.clamp(-self.bound, self.bound)
        return payload, decoded


def two_bit(t, limit=None):
    """MXNet's 2-bit rule: v >= t -> code 1 -> +t, v <= -t -> code 2 -> -t, else code 0 -> 0."""
    def rule(v, dtype):
        code = torch.where(v >= t, 1, torch.where(v <= -t, 2, 0))
        signs = torch.where(code == 1, 1.0, torch.where(code == 2, -1.0, 0.0))
        return pack_reference(code, 2), signs.to(dtype).mul_(t)
    return Reference(rule, None if limit is None else limit * t)


def one_bit(t):
    """MXNet's 1-bit rule: v > t -> bit 1 -> +1, else bit 0 -> -1."""
    return Reference(lambda v, dtype: (pack_reference((v > t).to(torch.int64), 1),
                                       torch.where(v > t, 1.0, -1.0).to(dtype)))


def check_steps(make, reference, n, dtype, seed, t=0.5):
    comp = make()
    for s in range(STEPS):
        grad = gradient(n, dtype, seed + s, t)
        payload, ctx = comp.compress(grad, key="k")
        want_payload, want = reference.step(grad)
        got = comp.decompress(payload, ctx)
        assert got.shape == grad.shape
        assert_bits_equal(got.reshape(-1), want)
        assert_bits_equal(payload, want_payload)
        assert_bits_equal(comp.residual("k"), reference.residual)


def check_top_k(ratio, n, dtype, seed):
    """The payload is k entries of largest magnitude (NaN above all, any choice among equal
    magnitudes at the k-th place), their values; decompressed and residual follow bit for bit."""
    comp, residual = TopKCompressor(ratio), None
    work = torch.promote_types(dtype, torch.float32)
    k = min(n, max(1, math.ceil(ratio * n)))
    for s in range(STEPS):
        grad = gradient(n, dtype, seed + s, 0.5)
        v = grad.reshape(-1).to(work)
        v = v + (torch.zeros_like(v) if residual is None else residual)
        (values, indices), ctx = comp.compress(grad, key="k")
        idx = indices.long()
        assert idx.numel() == k and torch.unique(idx).numel() == k
        kth = torch.sort(v.abs()).values[n - k]  # sort ranks NaN highest, as topk does
        chosen = torch.zeros(n, dtype=torch.bool)
        chosen[idx] = True
        assert not bool((v[chosen].abs() < kth).any())
        rest = v[~chosen].abs()
        assert not bool((rest > kth).any()) and (torch.isnan(kth) or not bool(torch.isnan(rest).any()))
        assert_bits_equal(values, v[idx])
        dense = torch.zeros_like(v)
        dense[idx] = v[idx]
        assert_bits_equal(comp.decompress([values, indices], ctx), dense.to(dtype).reshape(grad.shape))
        residual = v - dense.to(dtype).to(work)
        assert_bits_equal(comp.residual("k"), residual)


@pytest.mark.parametrize("n,dtype", CASES, ids=str)
@pytest.mark.parametrize("t,limit", [(0.5, None), (0.3, 1.0), (0.7, 2.0)])
def test_two_bit_matches_the_rule_bit_for_bit(n, dtype, t, limit):
    check_steps(lambda: TwoBitCompressor(t, residual_limit=limit), two_bit(t, limit), n, dtype, n, t)


@pytest.mark.parametrize("n,dtype", CASES, ids=str)
@pytest.mark.parametrize("t", [0.0, 0.25, -0.1])
def test_one_bit_matches_the_rule_bit_for_bit(n, dtype, t):
    check_steps(lambda: OneBitCompressor(t), one_bit(t), n, dtype, 7 * n, t)


@pytest.mark.parametrize("n,dtype", [(1, torch.float32), (17, torch.float32), (1000, torch.float32),
                                     (BLOCK + 45, torch.float32), (BLOCK + 1, torch.float16)], ids=str)
@pytest.mark.parametrize("ratio", [0.001, 0.01, 0.3, 1.0])
def test_top_k_sends_the_k_largest_magnitudes(n, dtype, ratio):
    check_top_k(ratio, n, dtype, 11 * n)


@pytest.mark.parametrize("ratio", [0.01, 0.6])
@pytest.mark.parametrize("bad_sample", [False, True])
def test_top_k_sampled_selection_keeps_nan_and_survives_a_bad_sample(ratio, bad_sample, monkeypatch):
    n = 4 * BLOCK
    v = torch.randn(n, generator=torch.Generator().manual_seed(3))
    v[: n // 2] = 0.0  # half zeros: with ratio 0.6 the sample's threshold sits on them
    v[[5, n - 1]] = float("nan")
    if bad_sample:  # a threshold above everything: too few candidates, the whole tensor is ranked
        kthvalue = torch.kthvalue
        monkeypatch.setattr(torch, "kthvalue", lambda x, k: kthvalue(torch.full_like(x, float("inf")), k))
    comp = TopKCompressor(ratio)
    (values, indices), ctx = comp.compress(v, key=0)
    assert torch.isnan(values).sum() == 2 and indices.numel() == comp.k_for(n)
    if ratio < 0.5:
        want = torch.topk(v.abs(), comp.k_for(n)).indices
        assert torch.equal(indices.long().sort().values, want.sort().values)
    else:  # every nonzero and some of the zeros
        assert torch.count_nonzero(torch.nan_to_num(values)) == n // 2 - 1  # NaN at n - 1 was one


def test_generic_error_feedback_path_agrees():
    """The base class's route for compressors that do not encode in place (encode, decompress,
    subtract) gives the same bits as the in-place kernels."""
    class Generic2(TwoBitCompressor):
        encodes_in_place = False

    class Generic1(OneBitCompressor):
        encodes_in_place = False

    class GenericK(TopKCompressor):
        encodes_in_place = False

    # (top-k on float32: fp16 magnitudes tie at the k-th place, where the two may choose differently)
    for fast, slow, dtype in ((TwoBitCompressor(0.4, residual_limit=1.0), Generic2(0.4, residual_limit=1.0),
                               torch.float16), (OneBitCompressor(0.1), Generic1(0.1), torch.bfloat16),
                              (TopKCompressor(0.05), GenericK(0.05), torch.float32)):
        for s in range(STEPS):
            grad = gradient(BLOCK + 3, dtype, 100 + s, 0.4)
            a, b = fast.compress(grad, key=1), slow.compress(grad, key=1)
            assert_bits_equal(fast.decompress(*a), slow.decompress(*b))
            assert_bits_equal(fast.decompress(*a), fast.decompress(*b))  # payloads interchangeable
            assert_bits_equal(fast.residual(1), slow.residual(1))


def test_two_bit_refuses_code_three_only_where_it_counts():
    comp = TwoBitCompressor(0.5)
    payload, ctx = comp.compress(torch.zeros(2 * BLOCK + 20), key=0)
    for word, bit, refused in ((0, 0, True), (BLOCK // 16 + 3, 30, True), (payload.numel() - 1, 6, True),
                               (payload.numel() - 1, 8, False)):  # codes 20..31 of the last word are padding
        bad = payload.clone()
        bad[word] |= 3 << bit
        if refused:
            with pytest.raises(CompressionError, match="code 3"):
                comp.decompress(bad, ctx)
        else:
            assert torch.count_nonzero(comp.decompress(bad, ctx)) == 0


def test_threads_compress_side_by_side():
    """Scratch buffers are per thread: concurrent compressions give the sequential results."""
    grads = [gradient(2 * BLOCK + 7, torch.float32, s, 0.5) for s in range(4)]
    want = []
    for i, g in enumerate(grads):
        c = TwoBitCompressor(0.5)
        want.append(c.decompress(*c.compress(g, key=i)))
    got: dict[int, torch.Tensor] = {}

    def work(i):
        c = TwoBitCompressor(0.5)
        for _ in range(5):
            c.reset()
            got[i] = c.decompress(*c.compress(grads[i], key=i))

    threads = [threading.Thread(target=work, args=(i,)) for i in range(4)]
    for th in threads:
        th.start()
    for th in threads:
        th.join(timeout=120)
    for i in range(4):
        assert_bits_equal(got[i], want[i])


def test_a_refused_compress_leaves_the_residual_alone():
    comp = TopKCompressor(0.5)
    comp.compress(torch.tensor([1.0, -2.0, 0.5, 0.25]), key="w")
    before = comp.residual("w").clone()
    with pytest.raises(CompressionError, match="elements before"):
        comp.compress(torch.ones(5), key="w")
    assert_bits_equal(comp.residual("w"), before)


def test_top_k_numpy_and_torch_passes_agree(monkeypatch):
    """float32 on the CPU selects and decompresses through NumPy; the torch route (other dtypes and
    devices) must give the same positions, values, residual and dense gradient, NaN and ties included."""
    import mxtorch.compression.topk as topk_module

    n = 2 * BLOCK + 45
    grad = torch.randn(n, generator=torch.Generator().manual_seed(5))
    grad[::97] = 1.5  # many equal magnitudes around the k-th place
    grad[[0, n // 3, n - 1]] = float("nan")
    results = []
    for numpy_route in (True, False):
        if not numpy_route:
            monkeypatch.setattr(topk_module, "numpy_shareable", lambda t: False)
            monkeypatch.setattr(topk_module, "numpy_pair", lambda buf, grad: False)
        comp = TopKCompressor(0.02)
        payload, ctx = comp.compress(grad, key=0)
        results.append((payload, comp.decompress(payload, ctx), comp.residual(0)))
    (p_np, d_np, r_np), (p_t, d_t, r_t) = results
    assert torch.equal(p_np[1], p_t[1])
    assert_bits_equal(p_np[0], p_t[0])
    assert_bits_equal(d_np, d_t)
    assert_bits_equal(r_np, r_t)


@pytest.mark.parametrize("shape,dtype", [((300, 200), torch.float32), ((64, 48, 3), torch.float16),
                                         ((500,), torch.float32)], ids=str)
def test_powersgd_in_place_matches_the_generic_route(shape, dtype):
    """PowerSGD works on the key's residual buffer; over steps it sends the same factors and keeps
    the same residual (up to the rounding of the fused ``M - P @ Q.T``) as encode-decode-subtract."""
    from mxtorch.compression import PowerSGDCompressor

    class Generic(PowerSGDCompressor):
        encodes_in_place = False

    fast, slow = PowerSGDCompressor(rank=2), Generic(rank=2)
    for s in range(STEPS):
        grad = torch.randn(shape, generator=torch.Generator().manual_seed(40 + s)).to(dtype)
        (pa, ca), (pb, cb) = fast.compress(grad, key=3), slow.compress(grad, key=3)
        assert len(pa) == len(pb) == (1 if len(shape) == 1 else 2)
        for a, b in zip(pa, pb):
            torch.testing.assert_close(a, b, rtol=1e-4, atol=1e-4)
        torch.testing.assert_close(fast.decompress(pa, ca), slow.decompress(pb, cb), rtol=1e-3, atol=1e-3)
        torch.testing.assert_close(fast.residual(3), slow.residual(3), rtol=1e-4, atol=1e-4)
