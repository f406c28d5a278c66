"""mxtorch.gluon.data.vision: datasets read from their standard files, and transforms."""

from __future__ import annotations

import gzip
import hashlib
import struct
from pathlib import Path

import numpy as np
import pytest
import torch

from mxtorch.base import MXNetError
from mxtorch.gluon.data import DataLoader, default_batchify_fn
from mxtorch.gluon.data.vision import (
    CIFAR10,
    CIFAR100,
    EMBEDDED_FASHION_MNIST_ROOT,
    MNIST,
    FashionMNIST,
    ImageFolderDataset,
    datasets,
    embedded_fashion_mnist_root,
    transforms,
)

SYSTEM_FMNIST = Path("/usr/share/datasets/fashion-mnist")
needs_system_fmnist = pytest.mark.skipif(
    not (SYSTEM_FMNIST / "train-images-idx3-ubyte.gz").is_file(),
    reason="Debian's dataset-fashion-mnist is not installed",
)


@pytest.fixture(autouse=True)
def _no_user_caches(tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch) -> None:
    """Keep ~/.mxnet and ~/.mxtorch of whoever runs the tests out of the search."""
    home = tmp_path_factory.mktemp("home")
    monkeypatch.setenv("MXNET_HOME", str(home / "mxnet"))
    monkeypatch.setenv("MXTORCH_HOME", str(home / "mxtorch"))


# ---------------------------------------------------------------------------- Fashion-MNIST


@pytest.fixture(scope="module")
def full_train() -> FashionMNIST:
    if not (SYSTEM_FMNIST / "train-images-idx3-ubyte.gz").is_file():
        pytest.skip("Debian's dataset-fashion-mnist is not installed")
    return FashionMNIST(root=str(SYSTEM_FMNIST), train=True)


@needs_system_fmnist
def test_fashion_mnist_from_system_folder(full_train: FashionMNIST) -> None:
    test = FashionMNIST(train=False)  # root=None finds /usr/share/datasets/fashion-mnist
    assert test.root == str(SYSTEM_FMNIST)
    assert len(full_train) == 60000 and len(test) == 10000
    img, label = full_train[0]
    assert isinstance(img, torch.Tensor) and img.shape == (28, 28, 1) and img.dtype == torch.uint8
    assert isinstance(label, np.int32) and label == 9  # the first training image is an ankle boot
    assert np.bincount(full_train._label_np).tolist() == [6000] * 10
    assert np.bincount(test._label_np).tolist() == [1000] * 10
    assert int(full_train._data.max()) == 255


@needs_system_fmnist
def test_full_epoch_uses_fast_path(full_train: FashionMNIST) -> None:
    dl = DataLoader(full_train.transform_first(transforms.ToTensor()), batch_size=128, shuffle=True)
    assert dl.fast_path and len(dl) == 469
    n = 0
    for data, _label in dl:
        n += data.shape[0]
    assert n == 60000 and data.shape == (96, 1, 28, 28) and data.dtype == torch.float32
    assert _label.dtype == torch.int32 and float(data.max()) <= 1.0


def test_embedded_fashion_mnist() -> None:
    assert embedded_fashion_mnist_root() == EMBEDDED_FASHION_MNIST_ROOT
    root = Path(EMBEDDED_FASHION_MNIST_ROOT)
    assert (root / "LICENSE").is_file() and "Zalando SE" in (root / "LICENSE").read_text()
    assert "1708.07747" in (root / "README.md").read_text()
    assert sum(p.stat().st_size for p in root.iterdir()) < 6_000_000
    train = FashionMNIST(root=EMBEDDED_FASHION_MNIST_ROOT)
    test = FashionMNIST(root=EMBEDDED_FASHION_MNIST_ROOT, train=False)
    assert len(train) == 10000 and len(test) == 2000
    assert np.bincount(train._label_np).tolist() == [1000] * 10
    assert np.bincount(test._label_np).tolist() == [200] * 10
    img, label = train[3]
    assert img.shape == (28, 28, 1) and img.dtype == torch.uint8 and label.dtype == np.int32


@needs_system_fmnist
def test_embedded_images_are_real_fashion_mnist(full_train: FashionMNIST) -> None:
    sub = FashionMNIST(root=EMBEDDED_FASHION_MNIST_ROOT)
    full = {hashlib.sha1(row.tobytes()).digest(): int(lab) for row, lab in
            zip(full_train._data.numpy(), full_train._label_np)}
    for row, lab in zip(sub._data.numpy(), sub._label_np):
        assert full[hashlib.sha1(row.tobytes()).digest()] == lab


def test_fast_path_equals_per_sample_path_on_fashion_mnist() -> None:
    ds = FashionMNIST(root=EMBEDDED_FASHION_MNIST_ROOT, train=False)
    tf = transforms.Compose([transforms.ToTensor(), transforms.Normalize(0.286, 0.353)])
    for d in (ds, ds.transform_first(tf), ds.transform_first(transforms.Cast("float32"))):
        fast = DataLoader(d, batch_size=128, shuffle=True, last_batch="rollover")
        slow = DataLoader(d, batch_size=128, shuffle=True, last_batch="rollover",
                          batchify_fn=lambda s: default_batchify_fn(s))
        assert fast.fast_path and not slow.fast_path
        for _ in range(2):
            torch.manual_seed(5)
            fb = list(fast)
            torch.manual_seed(5)
            sb = list(slow)
            assert len(fb) == len(sb)
            for (fx, fy), (sx, sy) in zip(fb, sb):
                assert fx.dtype == sx.dtype and fy.dtype == sy.dtype == torch.int32
                assert torch.equal(fx, sx) and torch.equal(fy, sy)


def test_dataset_transform_argument() -> None:
    ds = FashionMNIST(root=EMBEDDED_FASHION_MNIST_ROOT, train=False,
                      transform=lambda x, y: (x.float(), int(y) + 100))
    x, y = ds[0]
    assert x.dtype == torch.float32 and y >= 100
    assert not DataLoader(ds, batch_size=4).fast_path


def test_not_found_error_lists_folders_and_files(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("MXNET_HOME", str(tmp_path / "mx"))
    monkeypatch.setenv("MXTORCH_HOME", str(tmp_path / "mt"))
    monkeypatch.setitem(datasets._SYSTEM_DIRS, "fashion-mnist", (str(tmp_path / "system"),))
    with pytest.raises(MXNetError) as err:
        FashionMNIST()
    msg = str(err.value)
    searched = [tmp_path / "mx" / "datasets" / "fashion-mnist",
                tmp_path / "mt" / "datasets" / "fashion-mnist", tmp_path / "system"]
    for folder in searched:
        assert str(folder) in msg
    assert "train-images-idx3-ubyte.gz" in msg and "train-labels-idx1-ubyte.gz" in msg
    assert "apt-get install dataset-fashion-mnist" in msg and "never downloads" in msg
    with pytest.raises(MXNetError, match="t10k-images-idx3-ubyte.gz") as err:
        MNIST(train=False)
    assert str(tmp_path / "mx" / "datasets" / "mnist") in str(err.value)
    assert "apt-get" not in str(err.value)
    with pytest.raises(MXNetError, match=str(tmp_path / "nowhere")):
        MNIST(root=str(tmp_path / "nowhere"))


# ---------------------------------------------------------------------------- idx files


def _idx_bytes(array: np.ndarray) -> bytes:
    header = struct.pack(">HBB", 0, 8, array.ndim) + struct.pack(f">{array.ndim}I", *array.shape)
    return header + array.astype(np.uint8).tobytes()


def _write_mnist(folder: Path, images: np.ndarray, labels: np.ndarray, gz: bool,
                 prefix: str = "train") -> None:
    folder.mkdir(parents=True, exist_ok=True)
    for name, arr in ((f"{prefix}-images-idx3-ubyte", images), (f"{prefix}-labels-idx1-ubyte", labels)):
        raw = _idx_bytes(arr)
        if gz:
            (folder / f"{name}.gz").write_bytes(gzip.compress(raw))
        else:
            (folder / name).write_bytes(raw)


def test_mnist_reads_idx_files_from_mxnet_home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("MXNET_HOME", str(tmp_path / "mxhome"))
    images = np.arange(3 * 4 * 5, dtype=np.uint8).reshape(3, 4, 5)
    labels = np.array([7, 0, 3], np.uint8)
    _write_mnist(tmp_path / "mxhome" / "datasets" / "mnist", images, labels, gz=False, prefix="t10k")
    ds = MNIST(train=False)
    assert len(ds) == 3
    x, y = ds[2]
    assert x.shape == (4, 5, 1) and torch.equal(x[:, :, 0], torch.from_numpy(images[2]))
    assert y == 3 and y.dtype == np.int32
    # MXTORCH_HOME is searched too
    monkeypatch.setenv("MXNET_HOME", str(tmp_path / "empty"))
    monkeypatch.setenv("MXTORCH_HOME", str(tmp_path / "mthome"))
    _write_mnist(tmp_path / "mthome" / "datasets" / "fashion-mnist", images, labels, gz=True)
    assert len(FashionMNIST()) == 3


def test_corrupt_idx_files(tmp_path: Path) -> None:
    images = np.zeros((10, 4, 4), np.uint8)
    labels = np.zeros(10, np.uint8)
    _write_mnist(tmp_path, images, labels, gz=False)
    img_file = tmp_path / "train-images-idx3-ubyte"
    img_file.write_bytes(img_file.read_bytes()[:-7])  # truncated
    with pytest.raises(MXNetError) as err:
        MNIST(root=str(tmp_path))
    assert str(img_file) in str(err.value) and "160 bytes" in str(err.value) and "153 bytes" in str(err.value)
    raw = bytearray(_idx_bytes(images))
    raw[3] = 1  # claims one dimension
    img_file.write_bytes(bytes(raw))
    with pytest.raises(MXNetError, match=r"expected magic number 0x00000803.*found 0x00000801"):
        MNIST(root=str(tmp_path))
    img_file.unlink()
    gz = tmp_path / "train-images-idx3-ubyte.gz"
    gz.write_bytes(gzip.compress(_idx_bytes(images))[:-20])  # truncated gzip stream
    with pytest.raises(MXNetError, match="train-images-idx3-ubyte.gz.*truncated or corrupt"):
        MNIST(root=str(tmp_path))
    gz.write_bytes(gzip.compress(_idx_bytes(images)))
    (tmp_path / "train-labels-idx1-ubyte").write_bytes(_idx_bytes(np.zeros(9, np.uint8)))
    with pytest.raises(MXNetError, match="10 images but .* 9 labels"):
        MNIST(root=str(tmp_path))


# ---------------------------------------------------------------------------- CIFAR


def _cifar_records(n: int, label_bytes: int, seed: int) -> tuple[bytes, np.ndarray, np.ndarray]:
    rng = np.random.RandomState(seed)
    labels = rng.randint(0, 10, size=(n, label_bytes)).astype(np.uint8)
    planes = rng.randint(0, 256, size=(n, 3, 32, 32)).astype(np.uint8)  # R, G, B planes, row-major
    raw = b"".join(labels[i].tobytes() + planes[i].tobytes() for i in range(n))
    return raw, labels, planes


def test_cifar10_binary(tmp_path: Path) -> None:
    folder = tmp_path / "cifar-10-batches-bin"
    folder.mkdir()
    expected_labels, expected_planes = [], []
    for i in range(1, 6):
        raw, labels, planes = _cifar_records(2, 1, i)
        (folder / f"data_batch_{i}.bin").write_bytes(raw)
        expected_labels.append(labels[:, 0])
        expected_planes.append(planes)
    raw, test_labels, test_planes = _cifar_records(3, 1, 99)
    (folder / "test_batch.bin").write_bytes(raw)
    train = CIFAR10(root=str(tmp_path))
    assert len(train) == 10 and train.root == str(folder)
    x, y = train[3]  # second record of data_batch_2
    assert x.shape == (32, 32, 3) and x.dtype == torch.uint8 and y.dtype == np.int32
    assert y == expected_labels[1][1]
    assert x[5, 7].tolist() == expected_planes[1][1][:, 5, 7].tolist()  # pixel (row 5, col 7) is (R, G, B)
    test = CIFAR10(root=str(folder), train=False)
    assert len(test) == 3 and torch.equal(test[2][0], torch.from_numpy(test_planes[2].transpose(1, 2, 0)))
    (folder / "test_batch.bin").write_bytes(raw[:-1])
    with pytest.raises(MXNetError, match=r"test_batch.bin is truncated.*3073"):
        CIFAR10(root=str(folder), train=False)
    (folder / "data_batch_5.bin").unlink()
    with pytest.raises(MXNetError, match="data_batch_5.bin"):
        CIFAR10(root=str(tmp_path))


def test_cifar100_binary(tmp_path: Path) -> None:
    raw, labels, planes = _cifar_records(4, 2, 1)
    (tmp_path / "train.bin").write_bytes(raw)
    coarse = CIFAR100(root=str(tmp_path))
    fine = CIFAR100(root=str(tmp_path), fine_label=True)
    assert [int(coarse[i][1]) for i in range(4)] == labels[:, 0].tolist()
    assert [int(fine[i][1]) for i in range(4)] == labels[:, 1].tolist()
    assert torch.equal(fine[1][0], torch.from_numpy(planes[1].transpose(1, 2, 0)))
    with pytest.raises(MXNetError, match="test.bin"):
        CIFAR100(root=str(tmp_path), train=False)


# ---------------------------------------------------------------------------- image folders


def test_image_folder_dataset(tmp_path: Path) -> None:
    for cls in ("dog", "cat"):
        (tmp_path / cls).mkdir()
    (tmp_path / "cat" / "a.PNG").write_bytes(b"")
    (tmp_path / "dog" / "b.jpg").write_bytes(b"")
    (tmp_path / "dog" / "notes.txt").write_text("not an image")
    (tmp_path / "loose.jpg").write_bytes(b"")
    with pytest.warns(UserWarning, match="notes.txt"):
        ds = ImageFolderDataset(str(tmp_path) + "/")
    assert ds.synsets == ["cat", "dog"] and len(ds) == 2
    # MXNet's paths: os.path.join(root, folder, file) with root as given
    assert ds.items == [(f"{tmp_path}/cat/a.PNG", 0), (f"{tmp_path}/dog/b.jpg", 1)]
    with pytest.raises(MXNetError, match="b.jpg"):  # an empty file: the error names it
        ds[1]
    with pytest.raises(MXNetError, match="not a folder"):
        ImageFolderDataset(str(tmp_path / "missing"))


def test_image_folder_decodes_with_opencv(tmp_path: Path) -> None:
    cv2 = pytest.importorskip("cv2")
    (tmp_path / "c").mkdir()
    rgb = np.arange(2 * 3 * 3, dtype=np.uint8).reshape(2, 3, 3) * 7
    cv2.imwrite(str(tmp_path / "c" / "x.png"), rgb[:, :, ::-1])  # OpenCV writes BGR
    img, label = ImageFolderDataset(str(tmp_path))[0]
    assert label == 0 and img.dtype == torch.uint8 and torch.equal(img, torch.from_numpy(rgb))
    gray, _ = ImageFolderDataset(str(tmp_path), flag=0)[0]
    # MXNet 1.9.1's mx.image.imread(path, 0) of this file (libpng's gray, not cvtColor's: 6, 27, ...)
    expected = np.array([[5, 26, 47], [68, 89, 110]], dtype=np.uint8)
    assert gray.shape == (2, 3, 1) and torch.equal(gray[:, :, 0], torch.from_numpy(expected))
    scaled = ImageFolderDataset(str(tmp_path), transform=lambda x, y: (x.float() / 255, y + 1))
    x, y = scaled[0]
    assert y == 1 and torch.allclose(x, torch.from_numpy(rgb).float() / 255)


# ---------------------------------------------------------------------------- transforms


def test_to_tensor_and_normalize() -> None:
    img = torch.tensor([[[0, 51, 255], [102, 0, 0]]], dtype=torch.uint8)  # H=1, W=2, C=3
    t = transforms.ToTensor()(img)
    assert t.shape == (3, 1, 2) and t.dtype == torch.float32 and t.is_contiguous()
    assert torch.allclose(t, torch.tensor([[[0.0, 0.4]], [[0.2, 0.0]], [[1.0, 0.0]]]))
    batch = transforms.ToTensor()(torch.stack([img, img]))
    assert batch.shape == (2, 3, 1, 2) and torch.equal(batch[1], t)
    n = transforms.Normalize(mean=(0.0, 0.1, 0.5), std=(1.0, 0.5, 0.25))(t)
    assert torch.allclose(n, torch.tensor([[[0.0, 0.4]], [[0.2, -0.2]], [[2.0, -2.0]]]))
    assert torch.allclose(transforms.Normalize(0.5, 0.5)(batch)[0], (t - 0.5) / 0.5)
    with pytest.raises(TypeError, match="ToTensor first"):
        transforms.Normalize(0.5, 0.5)(img.permute(2, 0, 1))
    with pytest.raises(ValueError, match="2 values but the input has 3 channels"):
        transforms.Normalize((0.1, 0.2), 1.0)(t)
    with pytest.raises(ValueError, match=r"shape \(2, 3\)"):
        transforms.ToTensor()(torch.zeros(2, 3, dtype=torch.uint8))
    assert transforms.Cast("float16")(img).dtype == torch.float16
    assert transforms.Cast()(img).dtype == torch.float32


def test_resize() -> None:
    img = torch.tensor([[10, 20], [30, 40]], dtype=torch.uint8).reshape(2, 2, 1)
    up = transforms.Resize(4, interpolation=0)(img)
    assert up.shape == (4, 4, 1) and up.dtype == torch.uint8
    assert up[:, :, 0].tolist() == [[10, 10, 20, 20], [10, 10, 20, 20], [30, 30, 40, 40], [30, 30, 40, 40]]
    big = torch.arange(16, dtype=torch.float32).reshape(4, 4, 1)
    down = transforms.Resize((2, 2))(big)  # bilinear at scale 1/2 averages 2x2 blocks
    assert down[:, :, 0].tolist() == [[2.5, 4.5], [10.5, 12.5]]
    rect = torch.zeros(10, 20, 3, dtype=torch.uint8)
    assert transforms.Resize((8, 6))(rect).shape == (6, 8, 3)  # size is (width, height)
    assert transforms.Resize(5, keep_ratio=True)(rect).shape == (5, 10, 3)
    assert transforms.Resize(5, keep_ratio=True)(rect.transpose(0, 1)).shape == (10, 5, 3)
    batch = torch.randint(0, 256, (3, 7, 9, 3), dtype=torch.uint8)
    rb = transforms.Resize((4, 5), interpolation=2)(batch)
    assert rb.shape == (3, 5, 4, 3)
    assert torch.equal(rb[1], transforms.Resize((4, 5), interpolation=2)(batch[1]))
    with pytest.raises(ValueError, match="got 4"):
        transforms.Resize(3, interpolation=4)


def test_center_crop() -> None:
    img = torch.arange(5 * 6, dtype=torch.uint8).reshape(5, 6, 1)
    c = transforms.CenterCrop((2, 3))(img)  # width 2, height 3
    assert c[:, :, 0].tolist() == [[8, 9], [14, 15], [20, 21]]
    batch = torch.stack([img, img + 1])
    cb = transforms.CenterCrop((2, 3))(batch)
    assert cb.shape == (2, 3, 2, 1) and torch.equal(cb[1], c + 1)
    up = transforms.CenterCrop(8)(img)  # larger than the image: centre 5x5 region resized up
    assert up.shape == (8, 8, 1)


def test_random_crop() -> None:
    img = torch.arange(1, 17, dtype=torch.uint8).reshape(4, 4, 1)
    torch.manual_seed(0)
    for _ in range(10):
        c = transforms.RandomCrop(4, pad=1)(img)
        assert c.shape == (4, 4, 1)
        padded = torch.nn.functional.pad(img[:, :, 0], (1, 1, 1, 1))
        windows = [padded[y : y + 4, x : x + 4] for y in range(3) for x in range(3)]
        assert any(torch.equal(c[:, :, 0], w) for w in windows)
    batch = transforms.RandomCrop((2, 3))(torch.stack([img] * 6))
    assert batch.shape == (6, 3, 2, 1)
    with pytest.raises(ValueError, match="-1"):
        transforms.RandomCrop(2, pad=-1)


def test_random_resized_crop() -> None:
    torch.manual_seed(0)
    img = torch.randint(0, 256, (20, 30, 3), dtype=torch.uint8)
    out = transforms.RandomResizedCrop(8)(img)
    assert out.shape == (8, 8, 3) and out.dtype == torch.uint8
    assert transforms.RandomResizedCrop((6, 4))(torch.stack([img] * 5)).shape == (5, 4, 6, 3)
    full = transforms.RandomResizedCrop((30, 20), scale=(1.0, 1.0), ratio=(1.5, 1.5))(img)
    assert torch.equal(full, img)  # the whole image, unchanged size
    with pytest.raises(ValueError, match="scale"):
        transforms.RandomResizedCrop(8, scale=(0.5, 0.1))


def test_flips() -> None:
    img = torch.arange(6, dtype=torch.uint8).reshape(2, 3, 1)
    assert transforms.RandomFlipLeftRight(p=1.0)(img)[:, :, 0].tolist() == [[2, 1, 0], [5, 4, 3]]
    assert transforms.RandomFlipTopBottom(p=1.0)(img)[:, :, 0].tolist() == [[3, 4, 5], [0, 1, 2]]
    assert torch.equal(transforms.RandomFlipLeftRight(p=0.0)(img), img)
    torch.manual_seed(2)
    batch = torch.stack([img] * 64)
    out = transforms.RandomFlipLeftRight()(batch)
    flipped = [torch.equal(o, img.flip(1)) for o in out]
    assert all(f or torch.equal(o, img) for f, o in zip(flipped, out))
    assert 10 < sum(flipped) < 54  # drawn per image
    assert torch.equal(batch[0], img)  # input untouched


def test_brightness_and_contrast() -> None:
    img = torch.tensor([[[100, 150, 200]]], dtype=torch.uint8)
    assert torch.equal(transforms.RandomBrightness(0.0)(img), img)
    assert torch.equal(transforms.RandomContrast(0.0)(img), img)
    torch.manual_seed(0)
    alpha = 1.0 + (torch.rand(1).item() * 2 - 1) * 0.5
    torch.manual_seed(0)
    out = transforms.RandomBrightness(0.5)(img.float())
    assert torch.allclose(out, img.float() * alpha)
    torch.manual_seed(0)
    out8 = transforms.RandomContrast(0.5)(img)
    gray = 0.299 * 100 + 0.587 * 150 + 0.114 * 200
    want = (img.float() * alpha + gray * (1 - alpha)).round().clamp(0, 255)
    assert torch.equal(out8, want.to(torch.uint8))
    assert transforms.RandomBrightness(0.3)(torch.zeros(4, 2, 2, 3)).shape == (4, 2, 2, 3)


def test_compose_and_batch_equals_per_image() -> None:
    tf = transforms.Compose([
        transforms.Resize(6), transforms.CenterCrop(4), transforms.ToTensor(),
        transforms.Normalize((0.1, 0.2, 0.3), (0.5, 0.5, 0.5)),
    ])
    assert tf._mxtorch_batchable and "CenterCrop" in repr(tf) and len(tf) == 4
    batch = torch.randint(0, 256, (4, 9, 7, 3), dtype=torch.uint8)
    out = tf(batch)
    assert out.shape == (4, 3, 4, 4)
    for i in range(4):
        assert torch.allclose(out[i], tf(batch[i]))
    assert not transforms.Compose([transforms.ToTensor(), lambda x: x])._mxtorch_batchable
    with pytest.raises(TypeError, match="callables"):
        transforms.Compose([3])  # type: ignore[list-item]
