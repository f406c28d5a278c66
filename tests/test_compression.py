import io
import math

import pytest
import torch

from mxtorch import compression
from mxtorch.base import MXNetError
from mxtorch.compression import (
    BF16Compressor,
    CompressionError,
    Compressor,
    FP16Compressor,
    OneBitCompressor,
    PowerSGDCompressor,
    TopKCompressor,
    TwoBitCompressor,
    pack_codes,
    unpack_codes,
)

LENGTHS = [1, 15, 16, 17, 31, 33, 1000]
SHAPES = [(3, 5), (2, 3, 7), (4, 1, 16), (0,), ()]


def two_bit_rule(v, t):
    """MXNet's 2bit rule written out element by element."""
    out = []
    for x in v:
        out.append(t if x >= t else (-t if x <= -t else 0.0))
    return out


def one_bit_rule(v, t):
    """MXNet's 1bit rule: above the threshold -> +1, otherwise -> -1."""
    return [1.0 if x > t else -1.0 for x in v]


# -- 2bit ---------------------------------------------------------------------------------------

def test_two_bit_quantizes_boundaries_by_the_rule():
    t = 0.5
    values = [0.5, -0.5, 0.4999, -0.4999, 0.0, -0.0, 0.5001, -0.5001, 3.0, -3.0, 1e-8, 0.25]
    c = TwoBitCompressor(threshold=t)
    payload, ctx = c.compress(torch.tensor(values, dtype=torch.float64), key="w")
    out = c.decompress(payload, ctx)
    assert out.dtype == torch.float64 and out.shape == (len(values),)
    assert out.tolist() == two_bit_rule(values, t)
    expected_residual = [v - q for v, q in zip(values, two_bit_rule(values, t))]
    torch.testing.assert_close(c.residual("w"), torch.tensor(expected_residual, dtype=torch.float64))


def test_two_bit_residual_pushes_values_across_the_threshold():
    t = 0.5
    c = TwoBitCompressor(threshold=t)
    # First step: nothing crosses, everything becomes residual.
    first = torch.tensor([0.3, -0.3, 0.2, -0.2, 0.1], dtype=torch.float64)
    p, ctx = c.compress(first, key=1)
    assert c.decompress(p, ctx).tolist() == [0.0] * 5
    # Second step: residual + gradient lands exactly at +-t, just inside, or flips sign.
    second = torch.tensor([0.2, -0.2, 0.2, -0.2, -0.7], dtype=torch.float64)
    v = (first + second).tolist()  # [0.5, -0.5, 0.4, -0.4, -0.6]
    p, ctx = c.compress(second, key=1)
    assert c.decompress(p, ctx).tolist() == two_bit_rule(v, t) == [t, -t, 0.0, 0.0, -t]
    expected_residual = torch.tensor(v, dtype=torch.float64) - torch.tensor(two_bit_rule(v, t),
                                                                            dtype=torch.float64)
    torch.testing.assert_close(c.residual(1), expected_residual)


@pytest.mark.parametrize("n", LENGTHS)
def test_two_bit_round_trip_and_wire_size(n):
    t = 0.25
    g = torch.randn(n, generator=torch.Generator().manual_seed(n))
    c = TwoBitCompressor(threshold=t)
    payload, ctx = c.compress(g)
    assert isinstance(payload, torch.Tensor) and payload.dtype == torch.int32
    assert c.wire_bytes(payload) == 4 * math.ceil(n / 16)
    assert c.wire_bytes(payload) <= g.numel() * 4 / 16 + 4  # 1/16 of fp32 plus at most one padded word
    out = c.decompress(payload, ctx)
    assert out.tolist() == two_bit_rule(g.tolist(), t)


@pytest.mark.parametrize("shape", SHAPES)
def test_two_bit_multi_dim_shapes(shape):
    g = torch.randn(shape, generator=torch.Generator().manual_seed(1))
    c = TwoBitCompressor(threshold=0.5)
    payload, ctx = c.compress(g)
    out = c.decompress(payload, ctx)
    assert out.shape == g.shape and out.dtype == g.dtype
    assert out.reshape(-1).tolist() == two_bit_rule(g.reshape(-1).tolist(), 0.5)


def test_two_bit_rejects_bad_threshold_and_corrupt_payload():
    for bad in (0, -0.5, float("nan"), "0.5", True):
        with pytest.raises(CompressionError, match="threshold"):
            TwoBitCompressor(threshold=bad)
    c = TwoBitCompressor()
    payload, ctx = c.compress(torch.zeros(16))
    with pytest.raises(CompressionError, match="code 3"):
        c.decompress(torch.full_like(payload, -1), ctx)
    with pytest.raises(CompressionError, match="int32"):
        c.decompress(payload.to(torch.int64), ctx)


# -- 1bit ---------------------------------------------------------------------------------------

@pytest.mark.parametrize("t", [0.0, 0.5, -0.25])
def test_one_bit_quantizes_by_the_rule(t):
    values = [t, t + 1e-6, t - 1e-6, 0.0, -0.0, 2.0, -2.0, 0.5, -0.5]
    c = OneBitCompressor(threshold=t)
    payload, ctx = c.compress(torch.tensor(values, dtype=torch.float64), key="b")
    assert c.decompress(payload, ctx).tolist() == one_bit_rule(values, t)
    expected_residual = [v - q for v, q in zip(values, one_bit_rule(values, t))]
    torch.testing.assert_close(c.residual("b"), torch.tensor(expected_residual, dtype=torch.float64))


@pytest.mark.parametrize("n", LENGTHS)
def test_one_bit_round_trip_and_wire_size(n):
    g = torch.randn(n, generator=torch.Generator().manual_seed(n))
    c = OneBitCompressor()
    payload, ctx = c.compress(g)
    assert payload.dtype == torch.int32
    assert c.wire_bytes(payload) == 4 * math.ceil(n / 32)
    assert c.wire_bytes(payload) <= g.numel() * 4 / 32 + 4
    assert c.decompress(payload, ctx).tolist() == one_bit_rule(g.tolist(), 0.0)


@pytest.mark.parametrize("shape", SHAPES)
def test_one_bit_multi_dim_shapes(shape):
    g = torch.randn(shape, generator=torch.Generator().manual_seed(2))
    c = OneBitCompressor()
    payload, ctx = c.compress(g)
    out = c.decompress(payload, ctx)
    assert out.shape == g.shape
    assert out.reshape(-1).tolist() == one_bit_rule(g.reshape(-1).tolist(), 0.0)


# -- packing ------------------------------------------------------------------------------------

@pytest.mark.parametrize("bits", [1, 2, 4, 8])
@pytest.mark.parametrize("n", LENGTHS)
def test_pack_unpack_round_trip(bits, n):
    codes = torch.randint(0, 1 << bits, (n,), generator=torch.Generator().manual_seed(n + bits))
    words = pack_codes(codes, bits)
    assert words.dtype == torch.int32 and words.numel() == math.ceil(n * bits / 32)
    assert torch.equal(unpack_codes(words, bits, n), codes)


def test_pack_uses_every_bit_of_the_word():
    # All codes at their maximum fill the word: the bit pattern 0xFFFFFFFF is int32 -1.
    assert pack_codes(torch.full((16,), 3), 2).tolist() == [-1]
    assert pack_codes(torch.ones(32, dtype=torch.bool), 1).tolist() == [-1]
    # Code i sits at bit 2*i: a single 1 in the last slot is the sign bit's neighbour (1 << 30).
    codes = torch.zeros(16, dtype=torch.int64)
    codes[15] = 1
    assert pack_codes(codes, 2).tolist() == [1 << 30]
    codes[15] = 2
    assert pack_codes(codes, 2).tolist() == [-(1 << 31)]


def test_unpack_refuses_short_payload():
    with pytest.raises(CompressionError, match="codes"):
        unpack_codes(torch.zeros(1, dtype=torch.int32), 2, 17)


# -- error feedback -----------------------------------------------------------------------------

@pytest.mark.parametrize("make", [lambda: TwoBitCompressor(0.5), lambda: OneBitCompressor(0.0),
                                  lambda: TopKCompressor(0.1), lambda: PowerSGDCompressor(rank=2)],
                         ids=["2bit", "1bit", "topk", "powersgd"])
def test_error_feedback_sum_tracks_true_sum(make):
    c = make()
    gen = torch.Generator().manual_seed(0)
    shape = (8, 12)
    true_sum = torch.zeros(shape, dtype=torch.float64)
    sent_sum = torch.zeros(shape, dtype=torch.float64)
    for _ in range(50):
        g = 0.3 * torch.randn(shape, generator=gen, dtype=torch.float64)
        payload, ctx = c.compress(g, key="layer")
        sent_sum += c.decompress(payload, ctx)
        true_sum += g
        # Nothing is lost: what was not sent yet is exactly the residual.
        torch.testing.assert_close(true_sum - sent_sum, c.residual("layer").reshape(shape),
                                   rtol=0, atol=1e-10)


def test_residuals_are_per_key_and_check_sizes():
    c = TwoBitCompressor(0.5)
    c.compress(torch.full((4,), 0.3), key="a")
    c.compress(torch.full((6,), -0.1), key=7)
    torch.testing.assert_close(c.residual("a"), torch.full((4,), 0.3))
    torch.testing.assert_close(c.residual(7), torch.full((6,), -0.1))
    assert c.residual("missing") is None
    with pytest.raises(CompressionError, match="one key per parameter"):
        c.compress(torch.zeros(5), key="a")
    c.reset()
    assert c.residual("a") is None


@pytest.mark.parametrize("make", [lambda: TwoBitCompressor(0.5), lambda: OneBitCompressor(),
                                  lambda: TopKCompressor(0.2), lambda: PowerSGDCompressor(rank=1)],
                         ids=["2bit", "1bit", "topk", "powersgd"])
def test_state_dict_round_trip_through_torch_save(make):
    a = make()
    gen = torch.Generator().manual_seed(3)
    for _ in range(3):
        a.compress(torch.randn(6, 10, generator=gen), key="w")
        a.compress(torch.randn(6, 10, generator=gen), key=0)
    buf = io.BytesIO()
    torch.save(a.state_dict(), buf)
    buf.seek(0)
    b = make()
    b.load_state_dict(torch.load(buf, weights_only=True))
    for key in ("w", 0):
        torch.testing.assert_close(b.residual(key), a.residual(key))
    # Both continue identically.
    g = torch.randn(6, 10, generator=gen)
    pa, ca = a.compress(g, key="w")
    pb, cb = b.compress(g, key="w")
    torch.testing.assert_close(a.decompress(pa, ca), b.decompress(pb, cb))


def test_load_state_dict_errors():
    c = TwoBitCompressor()
    with pytest.raises(CompressionError, match="residuals"):
        c.load_state_dict({})
    with pytest.raises(CompressionError, match="'1bit'"):
        c.load_state_dict(OneBitCompressor().state_dict())
    with pytest.raises(CompressionError, match="tensors"):
        c.load_state_dict({"type": "2bit", "residuals": {"w": [1.0]}})


# -- top-k --------------------------------------------------------------------------------------

def test_topk_keeps_largest_magnitudes_and_feeds_back_the_rest():
    g = torch.tensor([0.1, -5.0, 0.3, 4.0, -0.2, 0.05, -3.0, 0.0, 1.0, 2.0])
    c = TopKCompressor(ratio=0.3)
    payload, ctx = c.compress(g, key="k")
    values, indices = payload
    assert indices.dtype == torch.int32 and values.numel() == 3
    assert sorted(indices.tolist()) == [1, 3, 6]
    out = c.decompress(payload, ctx)
    expected = torch.zeros(10)
    expected[[1, 3, 6]] = g[[1, 3, 6]]
    torch.testing.assert_close(out, expected)
    torch.testing.assert_close(c.residual("k"), g - expected)
    assert c.wire_bytes(payload) == 3 * 4 + 3 * 4
    # Next step the residual competes: v = g2 + residual = [3.6, 0, 0.3, 0, -0.2, 0.05, 0, 0, 1.0, 4.0].
    g2 = torch.zeros(10)
    g2[9], g2[0] = 2.0, 3.5
    payload, ctx = c.compress(g2, key="k")
    assert sorted(payload[1].tolist()) == [0, 8, 9]
    out = c.decompress(payload, ctx)
    assert out[[0, 8, 9]].tolist() == pytest.approx([3.6, 1.0, 4.0])


def test_topk_shapes_and_errors():
    c = TopKCompressor(ratio=0.01)
    g = torch.randn(3, 4, 5)
    payload, ctx = c.compress(g)
    assert payload[0].numel() == 1  # at least one entry
    assert c.decompress(payload, ctx).shape == g.shape
    for bad in (0, 1.5, -0.1, "0.1"):
        with pytest.raises(CompressionError, match="ratio"):
            TopKCompressor(ratio=bad)


# -- casts --------------------------------------------------------------------------------------

@pytest.mark.parametrize("cls,wire", [(FP16Compressor, torch.float16), (BF16Compressor, torch.bfloat16)])
def test_cast_round_trip(cls, wire):
    g = torch.randn(4, 33, generator=torch.Generator().manual_seed(4))
    c = cls()
    payload, ctx = c.compress(g)
    assert payload.dtype == wire
    assert c.wire_bytes(payload) == g.numel() * 2
    out = c.decompress(payload, ctx)
    assert out.dtype == torch.float32 and out.shape == g.shape
    torch.testing.assert_close(out, g.to(wire).float())
    tol = 1e-3 if wire == torch.float16 else 1e-2
    torch.testing.assert_close(out, g, rtol=tol, atol=tol)
    # Exactly representable values survive unchanged; no residual is kept.
    exact = torch.tensor([0.0, 1.0, -2.5, 0.125])
    assert torch.equal(c.decompress(*c.compress(exact)), exact)
    assert c.residual(0) is None and c.state_dict()["residuals"] == {}


def test_compress_rejects_non_float_and_bad_keys():
    c = FP16Compressor()
    with pytest.raises(CompressionError, match="floating-point"):
        c.compress(torch.arange(4))
    with pytest.raises(TypeError, match="key"):
        c.compress(torch.zeros(2), key=1.5)  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="torch.Tensor"):
        c.compress([1.0, 2.0])  # type: ignore[arg-type]


# -- PowerSGD -----------------------------------------------------------------------------------

def test_powersgd_low_rank_payload_and_warm_start():
    gen = torch.Generator().manual_seed(5)
    # An exactly rank-2 matrix is recovered once Q is warm (after a couple of power iterations).
    m = torch.randn(20, 2, generator=gen, dtype=torch.float64) @ torch.randn(2, 30, generator=gen,
                                                                              dtype=torch.float64)
    c = PowerSGDCompressor(rank=2)
    payload, ctx = c.compress(m, key="fc")
    p, q = payload
    assert p.shape == (20, 2) and q.shape == (30, 2)
    assert c.wire_bytes(payload) == (20 + 30) * 2 * 8
    torch.testing.assert_close(c.decompress(payload, ctx), m)
    # Vectors go uncompressed, with no residual.
    payload, ctx = c.compress(torch.ones(7), key="bias")
    assert c.decompress(payload, ctx).tolist() == [1.0] * 7
    assert torch.count_nonzero(c.residual("bias")) == 0
    with pytest.raises(CompressionError, match="rank"):
        PowerSGDCompressor(rank=0)


# -- create / registry --------------------------------------------------------------------------

def test_create_from_mxnet_params():
    c = compression.create({"type": "2bit", "threshold": 0.25})
    assert isinstance(c, TwoBitCompressor) and c.threshold == 0.25
    assert isinstance(compression.create({"type": "1bit"}), OneBitCompressor)
    assert isinstance(compression.create({"type": "FP16"}), FP16Compressor)
    assert isinstance(compression.create({"type": "topk", "ratio": 0.5}), TopKCompressor)
    assert isinstance(compression.create({"type": "powersgd", "rank": 4}), PowerSGDCompressor)
    assert compression.create(c) is c
    assert repr(c) == "TwoBitCompressor(threshold=0.25)"
    assert set(compression.registered_names()) >= {"2bit", "1bit", "fp16", "bf16", "topk", "powersgd"}


def test_create_errors():
    with pytest.raises(CompressionError, match=r"unknown compression type '3bit'.*'2bit'"):
        compression.create({"type": "3bit"})
    with pytest.raises(CompressionError, match="need a 'type'"):
        compression.create({"threshold": 0.5})
    with pytest.raises(CompressionError, match="bad parameters"):
        compression.create({"type": "2bit", "thresh": 0.5})
    with pytest.raises(TypeError, match="dict"):
        compression.create("2bit")  # type: ignore[arg-type]
    assert issubclass(CompressionError, MXNetError)


def test_registry_follows_the_common_rules():
    try:
        with pytest.warns(UserWarning, match=r"compression type '2bit': .*OneBitCompressor replaces"):
            compression.register("2BIT", OneBitCompressor)
        assert type(compression.create({"type": "2bit"})) is OneBitCompressor
    finally:
        compression._REGISTRY.remove("2bit")
        compression.register("2bit", TwoBitCompressor)
    with pytest.raises(CompressionError, match=r"unknown compression type '3bit': known compression types"):
        compression.create({"type": "3bit"})

    class NoOp(Compressor):
        name = "test-noop"

        def _encode(self, flat, ctx, key):
            return flat, ctx

        def decompress(self, payload, ctx):
            return payload.reshape(ctx.shape)

    compression.register("test-noop", NoOp)
    assert isinstance(compression.create({"type": "test-noop"}), NoOp)
    compression._REGISTRY.remove("test-noop")


# -- 2bit residual bound (mxtorch extension) ----------------------------------------------------

def test_two_bit_residual_limit_bounds_the_backlog():
    t = 0.5
    bounded = TwoBitCompressor(threshold=t, residual_limit=2.0)
    unbounded = TwoBitCompressor(threshold=t)
    g = torch.tensor([3.0, -3.0, 0.3, 1.2], dtype=torch.float64)
    pb, cb = bounded.compress(g, key="w")
    pu, cu = unbounded.compress(g, key="w")
    assert torch.equal(bounded.decompress(pb, cb), unbounded.decompress(pu, cu))  # the same codes
    # MXNet's residual keeps everything not sent; the bounded one keeps at most 2 sends' worth
    assert unbounded.residual("w").tolist() == [2.5, -2.5, 0.3, 0.7]
    assert bounded.residual("w").tolist() == [1.0, -1.0, 0.3, 0.7]
    assert bounded.params() == {"threshold": 0.5, "residual_limit": 2.0}
    assert unbounded.params() == {"threshold": 0.5}
    assert compression.create({"type": "2bit", "threshold": 0.5, "residual_limit": 2.0}).residual_limit == 2.0
    for bad in (0, -1.0, float("inf"), "4", True):
        with pytest.raises(CompressionError, match="residual_limit"):
            TwoBitCompressor(residual_limit=bad)
