"""Writes fixture.json: MXNet 1.9.1's Gluon names, for tests/test_model_zoo_names.py.

Needs real MXNet 1.x (not mxtorch)::

    /tmp/conformance-venv-mxnet/bin/python tests/data/model_zoo_names/make_fixture.py

Records (1) ``layer.prefix`` of one instance of each gluon.nn / gluon.rnn / contrib layer class,
made inside the name scope of a block with prefix 'p_'; (2) for every model zoo network, its
``collect_params()`` names and declared shapes (0 = inferred at the first forward), in order
(in full for the smaller networks, as count + sha256 for the deep ones);
(3) for a few networks, ``net(mx.sym.var('data')).get_internals().list_outputs()``; (4) for
every network, count + sha256 of the attribute-path names save_parameters writes.  Every
network is built in a fresh thread, so its automatic prefix counts from 0.

An optional argument, a path, also writes every list in full and every network's internals
there (for comparing while developing; not committed).
"""

from __future__ import annotations

import hashlib
import json
import os
import sys
import threading
from typing import Any

import mxnet as mx
from mxnet.gluon import contrib, nn, rnn
from mxnet.gluon.model_zoo import vision

HERE = os.path.dirname(os.path.abspath(__file__))

# entry name -> (module, class name, positional args); the entry name may carry ':variant'
LAYERS: dict[str, tuple[Any, str, tuple[Any, ...]]] = {
    "Activation": (nn, "Activation", ("relu",)),
    "Activation:tanh": (nn, "Activation", ("tanh",)),
    "Activation:softrelu": (nn, "Activation", ("softrelu",)),
    "Dense": (nn, "Dense", (2,)),
    "Dropout": (nn, "Dropout", (0.5,)),
    "Flatten": (nn, "Flatten", ()),
    "Embedding": (nn, "Embedding", (10, 2)),
    "BatchNorm": (nn, "BatchNorm", ()),
    "BatchNormReLU": (nn, "BatchNormReLU", ()),
    "InstanceNorm": (nn, "InstanceNorm", ()),
    "LayerNorm": (nn, "LayerNorm", ()),
    "GroupNorm": (nn, "GroupNorm", ()),
    "LeakyReLU": (nn, "LeakyReLU", (0.1,)),
    "PReLU": (nn, "PReLU", ()),
    "ELU": (nn, "ELU", ()),
    "SELU": (nn, "SELU", ()),
    "GELU": (nn, "GELU", ()),
    "Swish": (nn, "Swish", ()),
    "Lambda": (nn, "Lambda", ("relu",)),
    "HybridLambda": (nn, "HybridLambda", ("relu",)),
    "Sequential": (nn, "Sequential", ()),
    "HybridSequential": (nn, "HybridSequential", ()),
    "ReflectionPad2D": (nn, "ReflectionPad2D", ()),
    "Identity": (contrib.nn, "Identity", ()),
    "SyncBatchNorm": (contrib.nn, "SyncBatchNorm", ()),
    "PixelShuffle1D": (contrib.nn, "PixelShuffle1D", (2,)),
    "PixelShuffle2D": (contrib.nn, "PixelShuffle2D", (2,)),
    "PixelShuffle3D": (contrib.nn, "PixelShuffle3D", (2,)),
    "RNN": (rnn, "RNN", (2,)),
    "LSTM": (rnn, "LSTM", (2,)),
    "GRU": (rnn, "GRU", (2,)),
    "RNNCell": (rnn, "RNNCell", (2,)),
    "LSTMCell": (rnn, "LSTMCell", (2,)),
    "GRUCell": (rnn, "GRUCell", (2,)),
    "LSTMPCell": (contrib.rnn, "LSTMPCell", (2, 1)),
    "SequentialRNNCell": (rnn, "SequentialRNNCell", ()),
    "HybridSequentialRNNCell": (rnn, "HybridSequentialRNNCell", ()),
    "DropoutCell": (rnn, "DropoutCell", (0.5,)),
}
for _nd in (1, 2, 3):
    for _kind in ("Conv{}D", "Conv{}DTranspose"):
        LAYERS[_kind.format(_nd)] = (nn, _kind.format(_nd), (2, 3))
    for _kind in ("MaxPool{}D", "AvgPool{}D", "GlobalMaxPool{}D", "GlobalAvgPool{}D"):
        LAYERS[_kind.format(_nd)] = (nn, _kind.format(_nd), ())

# cells wrapping other cells: (wrapper, the cells it takes, made first in the same scope)
WRAPPERS: dict[str, tuple[str, int]] = {"ZoneoutCell": ("LSTMCell", 1), "ResidualCell": ("GRUCell", 1),
                                        "BidirectionalCell": ("LSTMCell", 2)}

MODELS = ["resnet18_v1", "resnet34_v1", "resnet50_v1", "resnet101_v1", "resnet152_v1",
          "resnet18_v2", "resnet34_v2", "resnet50_v2", "resnet101_v2", "resnet152_v2",
          "vgg11", "vgg13", "vgg16", "vgg19", "vgg11_bn", "vgg13_bn", "vgg16_bn", "vgg19_bn",
          "alexnet", "densenet121", "densenet161", "densenet169", "densenet201",
          "squeezenet1.0", "squeezenet1.1", "inceptionv3",
          "mobilenet1.0", "mobilenet0.75", "mobilenet0.5", "mobilenet0.25",
          "mobilenetv2_1.0", "mobilenetv2_0.75", "mobilenetv2_0.5", "mobilenetv2_0.25"]
FULL_LIMIT = 140  # networks with more parameters are stored as count + digest ...
FULL_ALSO = {"resnet50_v1", "resnet50_v2", "mobilenetv2_1.0"}  # ... except these (bottleneck units)
INTERNALS = ["resnet18_v1", "vgg11", "mobilenet1.0", "densenet121"]


def in_fresh_thread(fn: Any) -> Any:
    """``fn()`` run in a new thread: MXNet's automatic prefix counters are per thread."""
    box: list[Any] = []
    t = threading.Thread(target=lambda: box.append(fn()))
    t.start()
    t.join()
    return box[0]


def layer_prefixes() -> dict[str, str]:
    out: dict[str, str] = {}
    for entry, (mod, cls, args) in LAYERS.items():
        parent = nn.HybridSequential(prefix="p_")
        with parent.name_scope():
            out[entry] = getattr(mod, cls)(*args).prefix
    for entry, (inner, n) in WRAPPERS.items():
        parent = nn.HybridSequential(prefix="p_")
        with parent.name_scope():
            cells = [getattr(rnn, inner)(2) for _ in range(n)]
            out[entry] = getattr(rnn, entry)(*cells).prefix
    return out


def _net_prefix(names: list[str]) -> str:
    return names[0].split("_", 1)[0] + "_"


def model_params(name: str) -> list[list[Any]]:
    net = in_fresh_thread(lambda: vision.get_model(name))
    return [[k, list(p.shape)] for k, p in net.collect_params().items()]


def digest(entries: list[list[Any]]) -> str:
    """sha256 of the 'name d0xd1x...' lines (the same text test_model_zoo_names.py hashes)."""
    text = "\n".join(f"{k} {'x'.join(str(d) for d in shape)}" for k, shape in entries)
    return hashlib.sha256(text.encode()).hexdigest()


def params_entry(name: str) -> dict[str, Any]:
    """Names (network prefix cut off) and shapes in full for networks of at most FULL_LIMIT
    parameters and FULL_ALSO; deeper ones (the same units, repeated) keep only the count and
    the digest."""
    entries = model_params(name)
    prefix = _net_prefix([k for k, _ in entries])
    out: dict[str, Any] = {"prefix": prefix, "count": len(entries), "sha256": digest(entries)}
    if len(entries) <= FULL_LIMIT or name in FULL_ALSO:
        out["params"] = [f"{k[len(prefix):]} {'x'.join(str(d) for d in s)}" for k, s in entries]
    return out


def structure_entry(name: str) -> dict[str, Any]:
    """Count and sha256 of the attribute-path names ('features.0.weight', the keys of files
    written by save_parameters), joined by newlines."""
    keys = list(vision.get_model(name)._collect_params_with_prefix().keys())
    return {"count": len(keys), "sha256": hashlib.sha256("\n".join(keys).encode()).hexdigest()}


def model_internals(name: str) -> list[str]:
    def build() -> list[str]:
        net = vision.get_model(name)
        return list(net(mx.sym.var("data")).get_internals().list_outputs())

    return in_fresh_thread(build)


def internals_entry(name: str) -> dict[str, Any]:
    outs = model_internals(name)
    prefix = _net_prefix(outs[1:])
    return {"prefix": prefix, "outputs": [o[len(prefix):] if o.startswith(prefix) else "=" + o for o in outs]}


def main() -> None:
    fixture = {
        "mxnet_version": mx.__version__,
        "layer_prefixes": layer_prefixes(),
        "params": {n: params_entry(n) for n in MODELS},
        "internals": {n: internals_entry(n) for n in INTERNALS},
        "structure": {n: structure_entry(n) for n in MODELS},
    }
    with open(os.path.join(HERE, "fixture.json"), "w") as f:
        json.dump(fixture, f, indent=0, separators=(",", ":"))
        f.write("\n")
    if len(sys.argv) > 1:  # a full dump (every list, every network's internals), for development
        full = {"params": {n: model_params(n) for n in MODELS},
                "internals": {n: model_internals(n) for n in MODELS}}
        with open(sys.argv[1], "w") as f:
            json.dump(full, f)


if __name__ == "__main__":
    main()
