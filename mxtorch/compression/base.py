"""The gradient-compressor interface, after Horovod's: ``compress(t) -> (payload, ctx)``.

A compressor turns one gradient into a *payload* (the tensors that travel on the wire) and a
*context* (what the receiver needs besides the payload: shape, dtype, parameters; in a real
deployment every worker derives it from the shared configuration, so it is not counted in
:meth:`Compressor.wire_bytes`).  ``decompress(payload, ctx)`` rebuilds a dense tensor.

Lossy compressors keep an *error-feedback residual* per key: what was not sent this step is
added to the next gradient of the same key, so nothing is lost, only delayed.  Residuals live
with the worker that compresses; :meth:`Compressor.state_dict` exports them as plain tensors
so that they survive a checkpoint.

The built-in quantizers and top-k update the residual in place (:attr:`Compressor.encodes_in_place`):
the key's residual buffer receives the gradient, is encoded, and becomes the next residual,
with no gradient-sized temporary; a compressor without that keeps the general rule
(``residual = (gradient + residual) - decompress(payload)``) on fresh tensors.
"""

from __future__ import annotations

import abc
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, ClassVar

import torch

from ..base import MXNetError
from ..profiler import span

__all__ = ["CompressionError", "Compressor", "CompressionContext", "Payload", "Key"]

Key = int | str
Payload = torch.Tensor | list[torch.Tensor]


class CompressionError(MXNetError):
    """Bad compression parameters, a payload that does not match its context, a bad state dict."""


@dataclass(frozen=True)
class CompressionContext:
    """What :meth:`Compressor.decompress` needs besides the payload.

    ``shape`` and ``dtype`` describe the original gradient; ``extra`` holds per-algorithm values
    (e.g. the threshold of 2-bit quantization).
    """

    shape: torch.Size
    dtype: torch.dtype
    device: torch.device
    extra: dict[str, Any] = field(default_factory=dict)

    @property
    def numel(self) -> int:
        n = 1
        for s in self.shape:
            n *= s
        return n


def payload_tensors(payload: Payload) -> list[torch.Tensor]:
    """The payload as a list of tensors (a single tensor becomes a one-element list)."""
    if isinstance(payload, torch.Tensor):
        return [payload]
    if isinstance(payload, (list, tuple)) and all(isinstance(t, torch.Tensor) for t in payload):
        return list(payload)
    raise TypeError(f"a payload is a tensor or a list of tensors, got {type(payload).__name__}")


class Compressor(abc.ABC):
    """Base of every gradient compressor.

    Subclasses implement :meth:`_encode` and :meth:`decompress`; the base handles type checks,
    error feedback (when :attr:`uses_error_feedback` is true) and the residual state.
    """

    name: ClassVar[str] = ""
    """The name :func:`mxtorch.compression.create` knows this compressor by ('2bit', 'fp16', ...)."""
    uses_error_feedback: ClassVar[bool] = False
    """Whether what is not sent is kept per key and added to the next gradient of that key."""
    collective: ClassVar[bool] = False
    """Whether the compressor runs its own exchange between workers (:meth:`collective_sum`):
    allreduce stores then call that instead of exchanging :meth:`compress` payloads (PowerSGD's
    two all-reduces of factors that every worker shares)."""
    summable: ClassVar[bool] = False
    """Whether workers' payloads add up where they are: the sum of the payloads, decompressed, is
    the sum of the decompressed payloads (up to rounding in the payload's dtype).  An allreduce
    store then all-reduces the payloads (2(n-1)/n of a payload on the wire per worker, one
    decompression) instead of all-gathering them ((n-1) payloads, n decompressions); packed
    bits, indices and low-rank factors do not add up, so those compressors leave it False."""
    encodes_in_place: ClassVar[bool] = False
    """Whether :meth:`_encode_in_place` is implemented: with error feedback, it adds the gradient
    to the key's residual buffer, encodes the sum and leaves the new residual there."""

    def __init__(self) -> None:
        self._residuals: dict[Key, torch.Tensor] = {}

    # -- the public interface -------------------------------------------------------------------

    def compress(self, tensor: torch.Tensor, key: Key = 0) -> tuple[Payload, CompressionContext]:
        """Compress the gradient ``tensor`` of ``key``; returns ``(payload, ctx)``."""
        if not isinstance(tensor, torch.Tensor):
            raise TypeError(f"compress() takes a torch.Tensor, got {type(tensor).__name__}")
        if not tensor.is_floating_point():
            raise CompressionError(
                f"{type(self).__name__} compresses floating-point gradients, got dtype {tensor.dtype}")
        if not isinstance(key, (int, str)):
            raise TypeError(f"a compression key is an int or a str, got {type(key).__name__}: {key!r}")
        ctx = CompressionContext(tensor.shape, tensor.dtype, tensor.device)
        work_dtype = torch.promote_types(tensor.dtype, torch.float32)
        if self.uses_error_feedback and self.encodes_in_place:
            return self._compress_in_place(tensor, ctx, key, work_dtype)
        flat = tensor.detach().reshape(-1).to(work_dtype)
        if self.uses_error_feedback:
            flat = flat + self._residual(key, flat, tensor.shape)
        nbytes = flat.numel() * flat.element_size()
        with span("compression.encode", key=key, compressor=self.name, bytes=nbytes):
            payload, ctx = self._encode(flat, ctx, key)
            if self.uses_error_feedback:
                sent = self.decompress(payload, ctx).reshape(-1).to(work_dtype)
                self._residuals[key] = self._bound_residual(flat - sent)
        return payload, ctx

    def _compress_in_place(self, tensor: torch.Tensor, ctx: CompressionContext, key: Key,
                           work_dtype: torch.dtype) -> tuple[Payload, CompressionContext]:
        self._check_numel(ctx.numel)
        flat = tensor.detach().reshape(-1)
        buf = self._residual_buffer(key, flat, tensor.shape, work_dtype)
        nbytes = buf.numel() * buf.element_size()
        with span("compression.encode", key=key, compressor=self.name, bytes=nbytes):
            try:
                return self._encode_in_place(buf, flat, ctx, key)
            except BaseException:
                self._residuals.pop(key, None)  # the buffer was left half way through the update
                raise

    def _residual_buffer(self, key: Key, flat: torch.Tensor, shape: torch.Size,
                         work_dtype: torch.dtype) -> torch.Tensor:
        """The residual of ``key`` as a contiguous flat buffer of ``work_dtype`` (zeros at first)."""
        buf = self._residuals.get(key)
        if buf is None:
            buf = torch.zeros(flat.numel(), dtype=work_dtype, device=flat.device)
        elif buf.numel() != flat.numel():
            raise CompressionError(
                f"key {key!r} was compressed with {buf.numel()} elements before, now with shape "
                f"{tuple(shape)} ({flat.numel()} elements): use one key per parameter, or reset()")
        elif buf.dtype != work_dtype or buf.device != flat.device or not buf.is_contiguous():
            # e.g. loaded on another device or in another dtype
            buf = buf.to(device=flat.device, dtype=work_dtype, copy=True).contiguous()
        self._residuals[key] = buf
        return buf

    @abc.abstractmethod
    def decompress(self, payload: Payload, ctx: CompressionContext) -> torch.Tensor:
        """Rebuild a dense tensor of ``ctx.shape`` and ``ctx.dtype`` from ``payload``."""

    def wire_bytes(self, payload: Payload) -> int:
        """Bytes the payload puts on the wire (the context travels as configuration, not data)."""
        return sum(t.numel() * t.element_size() for t in payload_tensors(payload))

    def residual(self, key: Key) -> torch.Tensor | None:
        """The error-feedback residual of ``key`` (flat), or ``None`` before its first compress.

        The compressor's own buffer: the next compress of ``key`` may change it in place
        (clone it to keep it)."""
        return self._residuals.get(key)

    def reset(self) -> None:
        """Forget every residual (e.g. after the parameters were reloaded without them)."""
        self._residuals.clear()

    def state_dict(self) -> dict[str, Any]:
        """The residuals (and any other per-key state) as plain tensors, for ``torch.save``."""
        return {"type": self.name, "residuals": {k: v.clone() for k, v in self._residuals.items()}}

    def load_state_dict(self, state: Mapping[str, Any]) -> None:
        """Restore what :meth:`state_dict` returned; replaces all current per-key state."""
        if not isinstance(state, Mapping) or "residuals" not in state:
            raise CompressionError(f"not a compressor state dict (no 'residuals' entry): {state!r:.200}")
        if state.get("type", self.name) != self.name:
            raise CompressionError(
                f"state dict was saved by the {state['type']!r} compressor, cannot load it into "
                f"{self.name!r}")
        residuals = state["residuals"]
        if not isinstance(residuals, Mapping):
            raise CompressionError(f"'residuals' must map keys to tensors, got {type(residuals).__name__}")
        loaded: dict[Key, torch.Tensor] = {}
        for k, v in residuals.items():
            if not isinstance(k, (int, str)) or not isinstance(v, torch.Tensor):
                raise CompressionError(
                    f"residual entries map int/str keys to tensors, got {k!r}: {type(v).__name__}")
            loaded[k] = v.detach().clone()
        self._residuals = loaded

    def collective_sum(self, items: Sequence[tuple[Key, torch.Tensor]],
                       all_reduce: Callable[[list[torch.Tensor]], list[torch.Tensor]]) -> list[torch.Tensor]:
        """The (compressed) sum over workers of each ``(key, gradient)``, exchanged through
        ``all_reduce`` (it sums a list of tensors over the workers, in one call on every worker,
        and may overwrite its arguments).  Every worker calls this with the same keys and shapes
        in the same order.  Only for :attr:`collective` compressors."""
        raise NotImplementedError(f"{type(self).__name__} exchanges compress() payloads, not collective_sum")

    def params(self) -> dict[str, Any]:
        """The constructor arguments, MXNet-style (``create({'type': name, **params()})`` rebuilds it)."""
        return {}

    def __repr__(self) -> str:
        args = ", ".join(f"{k}={v!r}" for k, v in self.params().items())
        return f"{type(self).__name__}({args})"

    # -- for subclasses -------------------------------------------------------------------------

    @abc.abstractmethod
    def _encode(self, flat: torch.Tensor, ctx: CompressionContext,
                key: Key) -> tuple[Payload, CompressionContext]:
        """Encode the flat gradient (residual already added); return the payload and final ctx."""

    def _encode_in_place(self, buf: torch.Tensor, grad: torch.Tensor, ctx: CompressionContext,
                         key: Key) -> tuple[Payload, CompressionContext]:
        """Add the flat gradient ``grad`` to the residual ``buf`` (flat, the work dtype), encode
        the sum ``v`` and leave in ``buf`` what :meth:`_bound_residual` would keep of
        ``v - decompress(payload)``, computed exactly so (``buf + grad`` is ``grad + buf`` bit for
        bit); return the payload (never a view of ``buf``) and the final ctx.  Only for
        compressors with :attr:`encodes_in_place`."""
        raise NotImplementedError(f"{type(self).__name__} does not encode in place")

    def _check_numel(self, numel: int) -> None:
        """Refuse a gradient this compressor cannot encode, before any state changes."""

    def _bound_residual(self, residual: torch.Tensor) -> torch.Tensor:
        """The residual to keep (a fresh tensor, may be changed in place); default: all of it."""
        return residual

    def _residual(self, key: Key, flat: torch.Tensor, shape: torch.Size) -> torch.Tensor:
        r = self._residuals.get(key)
        if r is None:
            return torch.zeros_like(flat)
        if r.numel() != flat.numel():
            raise CompressionError(
                f"key {key!r} was compressed with {r.numel()} elements before, now with shape "
                f"{tuple(shape)} ({flat.numel()} elements): use one key per parameter, or reset()")
        return r.to(device=flat.device, dtype=flat.dtype)

    @staticmethod
    def _check_payload(payload: Payload, count: int, who: str) -> list[torch.Tensor]:
        tensors = payload_tensors(payload)
        if len(tensors) != count:
            raise CompressionError(f"{who} payload has {count} tensor(s), got {len(tensors)}")
        return tensors
