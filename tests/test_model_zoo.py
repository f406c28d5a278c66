"""mxtorch.gluon.model_zoo.vision: construction, forward shapes, parameter counts, get_model."""

from __future__ import annotations

import pytest
import torch

import mxtorch as mx
from mxtorch.base import MXNetError
from mxtorch.gluon import HybridBlock
from mxtorch.gluon.model_zoo import vision

torch.set_num_threads(2)


def _build(name: str, **kwargs: object) -> HybridBlock:
    net = vision.get_model(name, **kwargs)
    net.initialize(mx.init.Xavier())
    return net


def _counts(net: HybridBlock) -> tuple[int, int]:
    """(all parameter elements, as MXNet counts them incl. BN running stats; trainable torch elements)."""
    total = sum(p.data().numel() for p in net.collect_params().values())
    trainable = sum(p.numel() for p in net.parameters() if p.requires_grad)
    return total, trainable


# (name, constructor kwargs, input shape, classes)
SMALL_CASES = [
    ("mlp", {}, (2, 1, 28, 28), 10),
    ("lenet", {}, (2, 1, 28, 28), 10),
    ("lenet_bn", {}, (2, 1, 28, 28), 10),
    ("resnet18_v1", {"classes": 10, "thumbnail": True}, (2, 3, 32, 32), 10),
    ("resnet18_v2", {"classes": 10, "thumbnail": True}, (2, 3, 32, 32), 10),
    ("resnet18_v2", {"classes": 7}, (2, 3, 64, 64), 7),
    ("resnet50_v2", {"classes": 5, "thumbnail": True}, (2, 3, 32, 32), 5),
    ("cifar_resnet20_v1", {}, (2, 3, 32, 32), 10),
    ("cifar_resnet20_v2", {}, (2, 3, 32, 32), 10),
    ("cifar_resnet56_v1", {"classes": 100}, (2, 3, 32, 32), 100),
    ("cifar_resnet56_v2", {"classes": 100}, (2, 3, 32, 32), 100),
    ("vgg11", {"classes": 10}, (2, 3, 32, 32), 10),
    ("vgg16_bn", {"classes": 10}, (2, 3, 32, 32), 10),
    ("mobilenet0.25", {"classes": 10}, (2, 3, 32, 32), 10),
    ("mobilenetv2_0.25", {"classes": 10}, (2, 3, 32, 32), 10),
]


@pytest.mark.parametrize("name,kwargs,shape,classes", SMALL_CASES,
                         ids=[f"{c[0]}-{c[2][-1]}px" for c in SMALL_CASES])
def test_forward_shape(name: str, kwargs: dict, shape: tuple[int, ...], classes: int) -> None:
    net = _build(name, **kwargs)
    assert isinstance(net, HybridBlock) and isinstance(net, torch.nn.Module)
    assert hasattr(net, "features") and hasattr(net, "output")
    out = net(torch.randn(*shape))
    assert tuple(out.shape) == (shape[0], classes)
    assert torch.isfinite(out).all()


@pytest.mark.parametrize("name", ["resnet18_v1", "resnet18_v2", "mobilenet0.25", "vgg11_bn", "mlp"])
def test_one_channel_input(name: str) -> None:
    kwargs = {"thumbnail": True} if name.startswith("resnet") else {}
    net = _build(name, classes=10, **kwargs)
    out = net(torch.randn(2, 1, 32, 32))
    assert tuple(out.shape) == (2, 10)
    first = next(p for k, p in net.collect_params().items() if k.endswith("weight"))
    assert first.shape[1] == 1 or name == "mlp"


def test_training_step_updates_and_backprops() -> None:
    net = _build("cifar_resnet20_v2", classes=10)
    x, y = torch.randn(2, 3, 32, 32), torch.tensor([1, 3])
    with mx.autograd.record():
        loss = torch.nn.functional.cross_entropy(net(x), y)
    loss.backward()
    grads = [p.grad for p in net.parameters() if p.requires_grad]
    assert grads and all(g is not None for g in grads)


def test_resnet18_v1_parameter_count_imagenet() -> None:
    net = _build("resnet18_v1")
    out = net(torch.randn(1, 3, 224, 224))
    assert tuple(out.shape) == (1, 1000)
    total, trainable = _counts(net)
    # torchvision's resnet18 has the same layout: 11,689,512 trainable parameters.
    assert trainable == 11_689_512
    # MXNet's model-zoo figure also counts the BatchNorm running mean/variance (2 x 4,800).
    assert total == 11_699_112


# MXNet model-zoo figures (BatchNorm running statistics included); a global average pool makes
# them independent of the input size, so a 64x64 input is enough.
def _ids(cases: list) -> list[str]:
    return [c.values[0] if hasattr(c, "marks") else c[0] for c in cases]  # pytest.param: in .values


COUNT_CASES = [
    ("resnet34_v1", 21_814_696),
    ("resnet50_v1", 25_629_032),
    ("resnet18_v2", 11_695_796),
    pytest.param("resnet50_v2", 25_595_060, marks=pytest.mark.slow),  # 25M parameters initialised: slow tier
    ("resnet34_v2", 21_811_380),
    pytest.param("resnet101_v1", 44_695_144, marks=pytest.mark.slow),  # 45M parameters: slow tier
    ("mobilenet1.0", 4_253_864),
    ("mobilenet0.75", 2_601_976),
    ("mobilenet0.5", 1_342_536),
    ("mobilenet0.25", 475_544),
    ("mobilenetv2_1.0", 3_539_136),
    ("mobilenetv2_0.5", 1_983_104),
]


@pytest.mark.parametrize("name,expected", COUNT_CASES, ids=_ids(COUNT_CASES))
def test_parameter_counts(name: str, expected: int) -> None:
    net = _build(name)
    assert tuple(net(torch.randn(1, 3, 64, 64)).shape) == (1, 1000)
    assert _counts(net)[0] == expected


@pytest.mark.parametrize("name,expected", [("vgg11", 132_863_336), ("vgg11_bn", 132_874_344),
                                           ("vgg16", 138_357_544), ("vgg16_bn", 138_374_440)])
def test_vgg_parameter_counts(name: str, expected: int) -> None:
    # On 32x32 the first Dense sees 512 inputs; on 224x224 it sees 512*7*7 (weights only differ).
    net = _build(name)
    assert tuple(net(torch.randn(1, 3, 32, 32)).shape) == (1, 1000)
    assert _counts(net)[0] + (512 * 7 * 7 - 512) * 4096 == expected


def test_cifar_resnet_counts() -> None:
    net = _build("cifar_resnet20_v1")
    net(torch.randn(1, 3, 32, 32))
    _, trainable = _counts(net)
    assert trainable == 272_474  # the usual ResNet-20 (CIFAR-10) size
    assert len(net.features) == 3 + 3 + 1  # stem conv/BN/ReLU, 3 stages, global pool
    assert [len(s) for s in list(net.features)[3:6]] == [3, 3, 3]


def test_get_model_case_insensitive_and_aliases() -> None:
    assert isinstance(vision.get_model("ResNet18_V1", classes=3), vision.ResNetV1)
    assert isinstance(vision.get_model("MobileNet1.0"), vision.MobileNet)
    assert isinstance(vision.get_model("mobilenet1_0"), vision.MobileNet)
    assert isinstance(vision.get_model("mobilenet_v2_1_0"), vision.MobileNetV2)
    assert isinstance(vision.get_model("VGG16_bn"), vision.VGG)
    assert isinstance(vision.get_model("LeNet"), vision.LeNet)
    assert isinstance(mx.gluon.model_zoo.get_model("mlp"), vision.MLP)


@pytest.mark.parametrize("name", vision.list_models())
def test_every_name_constructs(name: str) -> None:
    net = vision.get_model(name, ctx=mx.cpu(), root="/nonexistent")
    assert hasattr(net, "features") and hasattr(net, "output")


def test_get_model_unknown_name() -> None:
    with pytest.raises(ValueError, match="resnet18_v1") as err:
        vision.get_model("resnet19_v7")
    assert "resnet19_v7" in str(err.value) and "mobilenet0.25" in str(err.value)


@pytest.mark.parametrize("name", ["resnet18_v1", "cifar_resnet20_v2", "vgg11_bn", "mobilenet0.5", "lenet",
                                  "mlp", "mobilenetv2_1.0"])
def test_pretrained_raises(name: str) -> None:
    with pytest.raises(MXNetError, match="load_parameters") as err:
        vision.get_model(name, pretrained=True)
    assert "download" in str(err.value) and "save_parameters" in str(err.value)


def test_pretrained_raises_from_constructor() -> None:
    with pytest.raises(MXNetError, match="pretrained"):
        vision.resnet50_v2(pretrained=True, ctx=mx.cpu(), root="~/.mxnet/models")


def test_bad_arguments() -> None:
    with pytest.raises(ValueError, match="depth"):
        vision.get_resnet(1, 19)
    with pytest.raises(ValueError, match="version"):
        vision.get_resnet(3, 18)
    with pytest.raises(ValueError, match="6n"):
        vision.get_cifar_resnet(1, 21)
    with pytest.raises(ValueError, match="depth"):
        vision.get_vgg(12)
    with pytest.raises(ValueError, match="multiplier"):
        vision.MobileNet(0.1)
    with pytest.raises(ValueError, match="channels"):
        vision.ResNetV1(vision.BasicBlockV1, [2, 2], [64, 64])


def test_constructor_functions_and_classes() -> None:
    net = vision.resnet18_v1(classes=4, thumbnail=True)
    assert isinstance(net, vision.ResNetV1)
    assert isinstance(net.features[1][0], vision.BasicBlockV1)
    assert isinstance(vision.resnet50_v1().features[4][0], vision.BottleneckV1)
    assert isinstance(vision.resnet50_v2().features[5][0], vision.BottleneckV2)
    assert isinstance(vision.resnet18_v2().features[5][0], vision.BasicBlockV2)
    assert isinstance(vision.vgg11(), vision.VGG)
    assert isinstance(vision.mobilenet0_25(), vision.MobileNet)
    assert isinstance(vision.cifar_resnet56_v1(), vision.CIFARResNetV1)


def test_save_and_load_parameters_into_fresh_model(tmp_path) -> None:
    net = _build("lenet_bn")
    x = torch.randn(4, 1, 28, 28)
    with mx.autograd.record():  # one training-mode pass moves the BatchNorm running statistics
        net(x)
    expected = net(x)
    path = str(tmp_path / "lenet_bn.params")
    net.save_parameters(path)
    fresh = vision.get_model("lenet_bn")
    fresh.load_parameters(path)
    torch.testing.assert_close(fresh(x), expected)


def test_lenet_layouts() -> None:
    net = _build("lenet")
    net(torch.randn(1, 1, 28, 28))
    assert _counts(net) == (431_080, 431_080)  # 520 + 25,050 + 400,500 + 5,010
    bn = _build("lenet_bn", classes=3)
    bn(torch.randn(1, 1, 28, 28))
    assert _counts(bn)[0] == 288 + 128 + 18_432 + 256 + 64 * 7 * 7 * 256 + 1024 + 256 * 3 + 3
    custom = vision.get_model("lenet_bn", channels=(8, 16), hidden=32)
    custom.initialize()
    assert tuple(custom(torch.randn(2, 1, 28, 28)).shape) == (2, 10)
    with pytest.raises(ValueError, match="channels"):
        vision.LeNet(channels=(8,))


def test_hybridize_keeps_outputs() -> None:
    net = _build("cifar_resnet20_v1")
    x = torch.randn(2, 3, 32, 32)
    expected = net(x)
    net.hybridize()
    torch.testing.assert_close(net(x), expected)
    torch.testing.assert_close(net(x), expected)


# ---- MXNet 1.9's other vision networks -----------------------------------------------------------
# (name, input size, trainable parameters with 1000 classes: the counts of the published networks)
MXNET_NETS = [
    ("alexnet", 224, 61_100_840),
    ("squeezenet1.0", 224, 1_248_424),
    ("squeezenet1.1", 224, 1_235_496),
    # the two largest forwards (3-6 GFLOP on CPU) are in the slow selection with densenet161-201
    pytest.param("densenet121", 224, 7_978_856, marks=pytest.mark.slow),
    pytest.param("inceptionv3", 299, 23_834_568, marks=pytest.mark.slow),
]


@pytest.mark.parametrize("name,size,params", MXNET_NETS, ids=_ids(MXNET_NETS))
def test_mxnet_vision_networks(name: str, size: int, params: int) -> None:
    net = _build(name)
    with torch.no_grad():
        out = net(torch.rand(1, 3, size, size))
    assert out.shape == (1, 1000)
    assert _counts(net)[1] == params
    assert hasattr(net, "features") and hasattr(net, "output")  # fine-tuning replaces net.output
    small = _build(name, classes=5)
    with torch.no_grad():
        assert small(torch.rand(2, 3, size, size)).shape == (2, 5)


# these three (and densenet121 above) forward a 224x224 image through 3-8 GFLOP nets on CPU: the
# slow selection has them
@pytest.mark.slow
@pytest.mark.parametrize("depth,params", [(161, 28_681_000), (169, 14_149_480), (201, 20_013_928)])
def test_densenet_depths(depth: int, params: int) -> None:
    net = vision.get_model(f"densenet{depth}")
    net.initialize()
    with torch.no_grad():
        net(torch.rand(1, 3, 224, 224))
    assert _counts(net)[1] == params


def test_pretrained_loads_a_local_file(tmp_path) -> None:  # type: ignore[no-untyped-def]
    src = _build("lenet")
    with torch.no_grad():
        src(torch.rand(1, 1, 28, 28))
    src.save_parameters(str(tmp_path / "lenet.params"))
    net = vision.get_model("lenet", pretrained=True, root=str(tmp_path), ctx=mx.cpu())
    x = torch.rand(2, 1, 28, 28)
    with torch.no_grad():
        torch.testing.assert_close(net(x), src(x))
    # MXNet's file names carry a hash: <name>-<hash>.params
    src_mlp = _build("mlp")
    with torch.no_grad():
        src_mlp(torch.rand(1, 1, 28, 28))
    src_mlp.save_parameters(str(tmp_path / "mlp-0123abcd.params"))
    net = vision.mlp(pretrained=True, root=str(tmp_path))
    with torch.no_grad():
        torch.testing.assert_close(net(x), src_mlp(x))
    with pytest.raises(MXNetError, match="no local weights") as err:
        vision.get_model("alexnet", pretrained=True, root=str(tmp_path))
    assert str(tmp_path) in str(err.value) and "alexnet.params" in str(err.value)
