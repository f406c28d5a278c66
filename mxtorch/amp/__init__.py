"""mxtorch.amp: automatic mixed precision, MXNet's ``mx.amp`` API on ``torch.autocast``.

``amp.init('bfloat16')`` makes every top-level Gluon block call run under autocast;
``amp.init_trainer(trainer)`` adds dynamic loss scaling to a Trainer (through the Trainer's
update hook; ``Trainer.save_states`` keeps the scale);
``with amp.scale_loss(loss, trainer) as scaled: autograd.backward(scaled)`` scales the loss;
``amp.unscale(trainer)`` gives true gradients before clipping; ``amp.convert_hybrid_block``
casts a network's parameters (norm layers stay float32).  Across workers the overflow decision
is taken on the reduced gradients, which every worker holds alike.
"""

from __future__ import annotations

from .amp import (
    FP32_LAYERS,
    LOW_PRECISION_LAYERS,
    LossScalingHook,
    amp_hook_of,
    autocast,
    convert_hybrid_block,
    init,
    init_trainer,
    is_initialized,
    reset,
    scale_loss,
    target_dtype,
    unscale,
)
from .loss_scaler import LossScaler

__all__ = ["init", "is_initialized", "target_dtype", "reset", "autocast", "init_trainer", "scale_loss",
           "unscale", "convert_hybrid_block", "LossScaler", "LossScalingHook", "amp_hook_of",
           "LOW_PRECISION_LAYERS", "FP32_LAYERS"]
