"""A synthetic ImageFolder tree for imagefolder_train.py: class folders of photo-like JPEGs
(hostcheck.loop.dataset.make_jpeg, the loop's own synthetic image), built once in a cache
folder and reused while its parameters stay the same.

    python -m tests.jobs.imagefolder_tree [--classes 4 --per-class 128]   # prints the path
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
from pathlib import Path

from tests.paths import CHECKOUT as REPO

CACHE = REPO / ".cache" / "jobs"
# Larger than ImageNet's average (about 400 x 350): these smooth synthetic images decode
# faster than photographs. A sample (decode, crop, flip, tensor, normalise) costs about 3 ms
# here, and the tests want the loading clearly slower than the small model's step.
WIDTH, HEIGHT, QUALITY = 800, 600, 90
DISTINCT = 64  # different images; the files repeat them (decoding costs the same)


def build(
    classes: int = 4,
    per_class: int = 128,
    width: int = WIDTH,
    height: int = HEIGHT,
    cache: Path = CACHE,
) -> Path:
    """The tree's root: `classes` folders of `per_class` JPEGs each (DISTINCT different
    images, repeated)."""
    from hostcheck.loop.dataset import make_jpeg

    params = {
        "classes": classes,
        "per_class": per_class,
        "size": [width, height],
        "quality": QUALITY,
        "distinct": DISTINCT,
    }
    root = cache / f"imagefolder-{classes}x{per_class}-{width}x{height}"
    stamp = root / "params.json"
    if stamp.is_file() and json.loads(stamp.read_text()) == params:
        return root / "train"
    partial = root.with_name(f"{root.name}.partial-{os.getpid()}")
    images = [make_jpeg(width, height, QUALITY, seed) for seed in range(DISTINCT)]
    for label in range(classes):
        folder = partial / "train" / f"class{label:02d}"
        folder.mkdir(parents=True)
        for index in range(per_class):
            image = images[(label * per_class + index) % DISTINCT]
            (folder / f"{index:05d}.jpg").write_bytes(image)
    (partial / "params.json").write_text(json.dumps(params))
    shutil.rmtree(root, ignore_errors=True)
    try:
        partial.rename(root)
    except OSError:  # another process built it meanwhile
        shutil.rmtree(partial, ignore_errors=True)
    return root / "train"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--classes", type=int, default=4)
    parser.add_argument("--per-class", type=int, default=128)
    args = parser.parse_args()
    print(build(args.classes, args.per_class))


if __name__ == "__main__":
    main()
