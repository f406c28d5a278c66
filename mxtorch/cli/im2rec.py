"""``mxtorch im2rec PREFIX ROOT``: MXNet's ``tools/im2rec.py`` (image lists and ``.rec`` files).

With ``--list``: write ``PREFIX.lst`` (or ``PREFIX_train.lst`` / ``_val`` / ``_test`` by
``--train-ratio`` / ``--test-ratio``) listing the images under ROOT as ``index<TAB>label<TAB>path``;
``--recursive`` gives each folder its own label (folders in sorted order), and the list is
shuffled with MXNet's seed unless ``--no-shuffle``.  Without ``--list``: pack every image of
each ``PREFIX*.lst`` into ``.rec`` + ``.idx`` files beside it (optionally ``--center-crop`` to a
square, ``--resize`` the short side, re-encode with ``--encoding``/``--quality``; or
``--pass-through`` the file's bytes), on ``--num-thread`` threads, in list order.
"""

from __future__ import annotations

import argparse
import logging
import os
import random
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from typing import Any

log = logging.getLogger(__name__)

ListItem = tuple[int, str, list[float]]  # index, path relative to ROOT, labels


def add_parser(sub: Any) -> argparse.ArgumentParser:
    p = sub.add_parser("im2rec", help="make image lists and RecordIO files (MXNet's im2rec.py)",
                       description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("prefix", help="prefix of the .lst files to write or read")
    p.add_argument("root", help="folder holding the images")
    p.add_argument("--list", action="store_true", help="make the image list(s) instead of .rec files")
    p.add_argument("--exts", nargs="+", default=[".jpeg", ".jpg", ".png"], help="image file extensions")
    p.add_argument("--chunks", type=int, default=1, help="number of list chunks")
    p.add_argument("--train-ratio", type=float, default=1.0, help="share of images in the training list")
    p.add_argument("--test-ratio", type=float, default=0.0, help="share of images in the test list")
    p.add_argument("--recursive", action="store_true", help="label images by their folder")
    p.add_argument("--no-shuffle", dest="shuffle", action="store_false", help="keep the listing order")
    p.add_argument("--shuffle", dest="shuffle", action="store_true", default=True, help=argparse.SUPPRESS)
    p.add_argument("--pass-through", action="store_true", help="store the files' bytes as they are")
    p.add_argument("--resize", type=int, default=0, help="resize the shorter side to this many pixels")
    p.add_argument("--center-crop", action="store_true", help="crop the centre square first")
    p.add_argument("--quality", type=int, default=95, help="JPEG quality (or PNG compression 0-9)")
    p.add_argument("--num-thread", type=int, default=1, help="encoding threads")
    p.add_argument("--color", type=int, default=1, choices=[-1, 0, 1], help="OpenCV's imread flag")
    p.add_argument("--encoding", default=".jpg", choices=[".jpg", ".jpeg", ".png"], help="encoding")
    p.add_argument("--pack-label", action="store_true", help="store every label of multi-label lists")
    return p


def _list_images(root: str, recursive: bool, exts: list[str]) -> Iterator[ListItem]:
    exts = [e.lower() for e in exts]
    i = 0
    if recursive:
        labels: dict[str, int] = {}
        for path, dirs, files in os.walk(root, followlinks=True):
            dirs.sort()
            for fname in sorted(files):
                if os.path.splitext(fname)[1].lower() in exts:
                    label = labels.setdefault(path, len(labels))
                    yield i, os.path.relpath(os.path.join(path, fname), root), [float(label)]
                    i += 1
        for path, label in sorted(labels.items(), key=lambda kv: kv[1]):
            log.info("im2rec: label %d is %s", label, os.path.relpath(path, root))
        return
    for fname in sorted(os.listdir(root)):
        if os.path.isfile(os.path.join(root, fname)) and os.path.splitext(fname)[1].lower() in exts:
            yield i, fname, [0.0]
            i += 1


def _write_list(path: str, items: list[ListItem]) -> None:
    with open(path, "w") as f:
        for idx, rel, labels in items:
            f.write(f"{idx}\t" + "\t".join(f"{x:f}" for x in labels) + f"\t{rel}\n")
    print(f"wrote {path}: {len(items)} images")


def make_lists(args: argparse.Namespace) -> None:
    items = list(_list_images(args.root, args.recursive, args.exts))
    if args.shuffle:
        random.seed(100)  # MXNet's im2rec.py seed: the same folder gives the same list
        random.shuffle(items)
    chunk_size = (len(items) + args.chunks - 1) // args.chunks
    for c in range(args.chunks):
        chunk = items[c * chunk_size:(c + 1) * chunk_size]
        tag = f"_{c}" if args.chunks > 1 else ""
        sep, sep_test = int(chunk_size * args.train_ratio), int(chunk_size * args.test_ratio)
        if args.train_ratio == 1.0:
            _write_list(args.prefix + tag + ".lst", chunk)
            continue
        if args.test_ratio:
            _write_list(args.prefix + tag + "_test.lst", chunk[:sep_test])
        if args.train_ratio + args.test_ratio < 1.0:
            _write_list(args.prefix + tag + "_val.lst", chunk[sep_test + sep:])
        _write_list(args.prefix + tag + "_train.lst", chunk[sep_test:sep_test + sep])


def read_list(path: str) -> Iterator[ListItem]:
    """The items of a ``.lst`` file; a malformed line stops with its file and line number."""
    with open(path, encoding="utf-8") as f:
        for lineno, line in enumerate(f, 1):
            parts = [p.strip() for p in line.strip().split("\t")]
            if parts == [""]:
                continue
            try:
                if len(parts) < 3:
                    raise ValueError(f"{len(parts)} tab-separated fields, expected index, label(s), path")
                yield int(parts[0]), parts[-1], [float(x) for x in parts[1:-1]]
            except ValueError as e:
                raise SystemExit(f"{path}: line {lineno} is not 'index<TAB>label<TAB>path' ({e})") from None


def _encode(args: argparse.Namespace, item: ListItem) -> bytes | None:
    from mxtorch import recordio
    from mxtorch.image.codec import cv2_module

    idx, rel, labels = item
    label: Any = labels if (len(labels) > 1 and args.pack_label) else labels[0]
    header = recordio.IRHeader(0, label, idx, 0)
    full = os.path.join(args.root, rel)
    if args.pass_through:
        with open(full, "rb") as f:
            return recordio.pack(header, f.read())
    cv2 = cv2_module()
    img = cv2.imread(full, args.color)
    if img is None:
        log.warning("im2rec: cannot read an image from %s; skipped", full)
        return None
    if args.center_crop:
        h, w = img.shape[:2]
        m = abs(h - w) // 2
        img = img[m:m + w, :] if h > w else img[:, m:m + h]
    if args.resize:
        h, w = img.shape[:2]
        size = (args.resize, h * args.resize // w) if h > w else (w * args.resize // h, args.resize)
        img = cv2.resize(img, size)
    return recordio.pack_img(header, img, quality=args.quality, img_fmt=args.encoding)


def make_records(args: argparse.Namespace, lst: str) -> None:
    from mxtorch import recordio

    items = list(read_list(lst))
    base = os.path.splitext(lst)[0]
    writer = recordio.MXIndexedRecordIO(base + ".idx", base + ".rec", "w")
    written = 0
    with ThreadPoolExecutor(args.num_thread) as pool:
        for item, packed in zip(items, pool.map(lambda it: _encode(args, it), items), strict=True):
            if packed is not None:
                writer.write_idx(item[0], packed)
                written += 1
    writer.close()
    print(f"wrote {base}.rec and {base}.idx: {written} of {len(items)} images")


def _list_files(prefix: str) -> list[str]:
    if os.path.isfile(prefix) and prefix.endswith(".lst"):
        return [prefix]
    folder, name = os.path.split(prefix)
    folder = folder or "."
    return sorted(os.path.join(folder, f) for f in os.listdir(folder)
                  if f.startswith(name) and f.endswith(".lst"))


def run(args: argparse.Namespace) -> int:
    if not os.path.isdir(args.root):
        raise SystemExit(f"ROOT {args.root!r} is not a folder of images")
    if args.num_thread < 1 or args.chunks < 1:
        raise SystemExit("--num-thread and --chunks must be at least 1")
    ratios = (args.train_ratio, args.test_ratio)
    if not (all(0 <= r <= 1 for r in ratios) and sum(ratios) <= 1):
        raise SystemExit("--train-ratio and --test-ratio must be in [0, 1] and sum to at most 1")
    if args.list:
        make_lists(args)
        return 0
    lists = _list_files(args.prefix)
    if not lists:
        raise SystemExit(f"no {args.prefix}*.lst file: make one first with "
                         "`mxtorch im2rec --list PREFIX ROOT`")
    for lst in lists:
        make_records(args, lst)
    return 0
