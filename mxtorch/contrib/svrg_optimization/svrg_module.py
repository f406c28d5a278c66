"""``SVRGModule``: a :class:`~mxtorch.module.Module` trained with SVRG.

The module keeps an auxiliary module (``_mod_aux``) bound like itself.  ``update_full_grads``
copies the current weights into it (the snapshot) and averages its gradients over the whole
data set into ``_param_dict`` (one dict per context; with a store, summed across devices and
workers through the ``<name>_full`` keys).  Each training step runs both modules on the batch
and replaces the gradient with ``g(w) - g(snapshot) + full gradient`` before the optimizer
sees it.  ``fit`` recomputes the full gradients at the start of every ``update_freq``-th epoch.
"""

from __future__ import annotations

from typing import Any

import torch

from ...module import Module
from .svrg_optimizer import _SVRGOptimizer

__all__ = ["SVRGModule"]


class SVRGModule(Module):
    """``Module`` with SVRG updates; ``update_freq`` (a positive int): recompute the full
    gradients every that many epochs.  The other arguments are :class:`Module`'s."""

    def __init__(self, symbol: Any, *args: Any, update_freq: Any = None, **kwargs: Any) -> None:
        super().__init__(symbol, *args, **kwargs)
        if not isinstance(update_freq, int) or isinstance(update_freq, bool):
            raise TypeError(
                "SVRGModule: update_freq must be an int, the number of epochs between two "
                f"computations of the full gradients; got {update_freq!r}"
            )
        if update_freq <= 0:
            raise ValueError(f"SVRGModule: update_freq must be positive, got {update_freq}")
        self.update_freq = update_freq
        self._mod_aux = Module(symbol, *args, **kwargs)
        self._param_dict: list[dict[str, torch.Tensor]] | None = None
        self._ctx_len = len(self._context)

    # ------------------------------------------------------------------ binding
    def bind(
        self, data_shapes: Any, label_shapes: Any = None, for_training: bool = True, *args: Any, **kwargs: Any
    ) -> None:
        """Bind this module and, for training, the snapshot module with the same shapes."""
        super().bind(data_shapes, label_shapes, for_training, *args, **kwargs)
        if for_training:
            self._mod_aux.bind(data_shapes, label_shapes, for_training, *args, **kwargs)

    def reshape(self, data_shapes: Any, label_shapes: Any = None) -> None:
        super().reshape(data_shapes, label_shapes=label_shapes)
        self._mod_aux.reshape(data_shapes, label_shapes=label_shapes)

    # ------------------------------------------------------------------ optimizer
    def init_optimizer(self, kvstore: Any = "local", optimizer: Any = "sgd",
                       optimizer_params: Any = (("learning_rate", 0.01),), force_init: bool = False) -> None:
        """Install an :class:`_SVRGOptimizer` wrapping ``optimizer``; with a store, also the
        ``<name>_full`` keys that sum the full gradients."""
        self._need("init_optimizer", params=True)
        assert self._exec_group is not None
        arg, _ = self.get_params()
        self._param_dict = [
            {k: torch.zeros(v.shape, dtype=v.dtype, device=ctx.torch_device) for k, v in arg.items()}
            for ctx in self._context
        ]
        _, _, rescale_grad, idx2name = self._optimizer_layout(kvstore)
        for name in self._param_dict[0]:  # the full-gradient keys after the parameters' indices
            idx2name[max(idx2name, default=-1) + 1] = name + "_full"
        params = dict(optimizer_params)
        params.setdefault("rescale_grad", rescale_grad)
        params["param_idx2name"] = idx2name
        svrg = _SVRGOptimizer(default_optimizer=optimizer, **params)
        super().init_optimizer(kvstore=kvstore, optimizer=svrg, force_init=force_init)
        # MXNet also pulls the (zero) full-gradient keys into the weights here, which zeroes
        # them until the first update; the keys are only initialized
        if self.kvstore is not None:
            for name in self._exec_group.param_names:
                self.kvstore.init(name + "_full", torch.zeros(arg[name].shape, dtype=arg[name].dtype))

    # ------------------------------------------------------------------ computation
    def forward(self, data_batch: Any, is_train: bool | None = None) -> None:
        """Run the batch through this module and, when training, through the snapshot too."""
        super().forward(data_batch, is_train)
        if is_train:
            self._mod_aux.forward(data_batch, is_train)

    def backward(self, out_grads: Any = None) -> None:
        super().backward(out_grads)
        if self._mod_aux.binded:
            self._mod_aux.backward(out_grads)

    def update(self) -> None:
        """Turn the gradients into SVRG's ``g(w) - g(snapshot) + full gradient``, then update."""
        self._update_svrg_gradients()
        super().update()

    def _need_full_grads(self) -> list[dict[str, torch.Tensor]]:
        if self._param_dict is None:
            raise RuntimeError("SVRGModule: call init_optimizer (or fit) before update_full_grads/update")
        return self._param_dict

    def _update_svrg_gradients(self) -> None:
        full = self._need_full_grads()
        assert self._exec_group is not None
        aux = self._mod_aux._exec_group
        if aux is None:
            raise RuntimeError("SVRGModule: update needs the module bound for training")
        with torch.no_grad():
            for index, name in enumerate(self._exec_group.param_names):
                for ctx in range(self._ctx_len):
                    grad = self._exec_group.grad_arrays[index][ctx]
                    if grad is None:
                        continue
                    grad.sub_(aux.grad_arrays[index][ctx]).add_(full[ctx][name])

    def update_full_grads(self, train_data: Any) -> None:
        """Snapshot the current weights into the auxiliary module and average its gradients over
        every batch of ``train_data`` (a padded last batch counts as its share of a batch)."""
        full = self._need_full_grads()
        assert self._exec_group is not None
        param_names = self._exec_group.param_names
        arg, aux_params = self.get_params()
        self._mod_aux.set_params(arg_params=arg, aux_params=aux_params)
        aux = self._mod_aux._exec_group
        assert aux is not None
        for per_ctx in full:
            for t in per_ctx.values():
                t.zero_()
        train_data.reset()
        nbatch, padding = 0, 0
        with torch.no_grad():
            for batch in train_data:
                self._mod_aux.forward(batch, is_train=True)
                self._mod_aux.backward()
                nbatch += 1
                for ctx in range(self._ctx_len):
                    for index, name in enumerate(param_names):
                        g = aux.grad_arrays[index][ctx]
                        if g is not None:
                            full[ctx][name] += g
                padding = batch.pad or 0
        if nbatch == 0:
            raise ValueError("SVRGModule.update_full_grads: train_data yielded no batch")
        true_num_batch = nbatch - padding / train_data.batch_size
        for name in param_names:
            grads = [full[ctx][name] for ctx in range(self._ctx_len)]
            for g in grads:
                g /= true_num_batch
            if self.kvstore is not None:
                self._accumulate_kvstore(name, grads)

    def _accumulate_kvstore(self, key: str, value: list[torch.Tensor]) -> None:
        """Sum the full gradients of every device and worker in the store (``<key>_full``) and
        give each device its share."""
        kv = self.kvstore
        assert kv is not None
        kv.push(key + "_full", value)
        kv.barrier()
        kv.pull(key + "_full", out=value)
        full = self._need_full_grads()
        for i in range(self._ctx_len):
            full[i][key] = value[i] / self._ctx_len

    # ------------------------------------------------------------------ training
    def _begin_epoch(self, epoch: int, train_data: Any) -> None:
        """``fit``'s start of an epoch: the full gradients every ``update_freq`` epochs."""
        if epoch % self.update_freq == 0:
            self.update_full_grads(train_data)
            train_data.reset()

    def prepare(self, data_batch: Any, sparse_row_id_fn: Any = None) -> None:
        super().prepare(data_batch, sparse_row_id_fn=sparse_row_id_fn)
        self._mod_aux.prepare(data_batch, sparse_row_id_fn=sparse_row_id_fn)
