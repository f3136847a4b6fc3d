"""Samples whose cost is real (JPEG decoding and augmentation) or calibrated (busy work).

`jpeg`: each sample decodes a JPEG with PIL, takes a random-resized crop (the torchvision
algorithm: 8-100 % of the area, aspect 3/4 to 4/3), flips it half the time and becomes a
3 x N x N uint8 tensor. The JPEG is generated once, in memory. `busy`: each sample burns
exactly `cost_s` of CPU time of its process (CLOCK_THREAD_CPUTIME_ID), so a sample costs
the same CPU however the scheduler shares the cores: the arithmetic of `theory` applies.
`sleep`: each sample waits `cost_s` without using a core (the seed article's experiment).

With `files`, every sample first reads one file (up to `max_read` bytes) from the dataset
directory, so the storage is in the loop; a file that PIL can decode is the JPEG-mode image.
hostcheck reads those files and never writes there.

Imported only by the loop (it imports torch).
"""

from __future__ import annotations

import io
import math
import os
import random
import time
from collections.abc import Sequence

import torch
from torch.utils.data import Dataset

KINDS = ("jpeg", "busy", "sleep")
MAX_READ = 8 * 2**20


def busy(seconds: float) -> None:
    """Spend `seconds` of this thread's CPU time (not wall time) in a loop."""
    if seconds <= 0:
        return
    clock = time.thread_time  # a system call: read it every few microseconds, not always
    end = clock() + seconds
    spin = 0
    while clock() < end:
        for _ in range(64):
            spin += 1


def make_jpeg(width: int = 640, height: int = 480, quality: int = 90, seed: int = 0) -> bytes:
    """A photo-like JPEG: smooth gradients with texture (pure noise would decode slower than
    photographs do, flat colour much faster)."""
    from PIL import Image, ImageFilter

    rng = random.Random(seed)
    channels = []
    for angle in (0, 60, 140):
        gradient = (
            Image.linear_gradient("L").rotate(angle + rng.randint(0, 20)).resize((width, height))
        )
        noise = Image.effect_noise((width, height), 40).filter(ImageFilter.GaussianBlur(0.8))
        channels.append(Image.blend(gradient, noise, 0.45))
    image = Image.merge("RGB", channels)
    out = io.BytesIO()
    image.save(out, format="JPEG", quality=quality)
    return out.getvalue()


def crop_box(width: int, height: int, rng: random.Random) -> tuple[int, int, int, int]:
    """torchvision's RandomResizedCrop.get_params: scale (0.08, 1), ratio (3/4, 4/3)."""
    area = width * height
    log_ratio = (math.log(3 / 4), math.log(4 / 3))
    for _ in range(10):
        target = area * rng.uniform(0.08, 1.0)
        aspect = math.exp(rng.uniform(*log_ratio))
        w = round(math.sqrt(target * aspect))
        h = round(math.sqrt(target / aspect))
        if 0 < w <= width and 0 < h <= height:
            top = rng.randint(0, height - h)
            left = rng.randint(0, width - w)
            return left, top, left + w, top + h
    side = min(width, height)  # fallback: central square
    left, top = (width - side) // 2, (height - side) // 2
    return left, top, left + side, top + side


def list_files(directory: str, limit: int = 4096, seed: int = 0) -> list[str]:
    """Regular files under `directory`, a seeded random sample of at most `limit`."""
    found = []
    for root, dirs, names in os.walk(directory):
        dirs.sort()
        for name in sorted(names):
            path = os.path.join(root, name)
            if os.path.isfile(path) and not os.path.islink(path):
                found.append(path)
            if len(found) >= limit * 4:
                break
        if len(found) >= limit * 4:
            break
    if len(found) > limit:
        found = sorted(random.Random(seed).sample(found, limit))
    return found


class SyntheticSamples(Dataset):
    """(image tensor, label) pairs; see the module docstring for the kinds."""

    def __init__(
        self,
        kind: str,
        length: int,
        image_size: int = 224,
        cost_s: float = 0.0,
        jpeg: bytes | None = None,
        files: Sequence[str] = (),
        shape: Sequence[int] | None = None,
        dtype: torch.dtype = torch.uint8,
        seed: int = 0,
        max_read: int = MAX_READ,
    ) -> None:
        if kind not in KINDS:
            raise ValueError(f"sample kind must be one of {', '.join(KINDS)}: {kind!r}")
        if kind == "jpeg" and jpeg is None:
            jpeg = make_jpeg()
        self.kind = kind
        self.length = length
        self.image_size = image_size
        self.cost_s = cost_s
        self.jpeg = jpeg
        self.files = list(files)
        self.seed = seed
        self.max_read = max_read
        self.shape = tuple(shape) if shape is not None else (3, image_size, image_size)
        self.template = torch.zeros(self.shape, dtype=dtype) if kind != "jpeg" else None

    def __len__(self) -> int:
        return self.length

    def sample_bytes(self) -> int:
        """Bytes of one sample tensor (plus its int64 label)."""
        if self.template is not None:
            return self.template.numel() * self.template.element_size() + 8
        return 3 * self.image_size * self.image_size + 8

    def _read(self, index: int) -> bytes:
        path = self.files[index % len(self.files)]
        with open(path, "rb") as handle:
            return handle.read(self.max_read)

    def __getitem__(self, index: int) -> tuple[torch.Tensor, int]:
        raw = self._read(index) if self.files else None
        label = index % 1000
        if self.kind == "busy":
            busy(self.cost_s)
        elif self.kind == "sleep":
            time.sleep(self.cost_s)
        if self.template is not None:  # a new tensor per sample, as a real dataset makes
            return self.template.clone(), label
        return self._augment(raw, index), label

    def _augment(self, raw: bytes | None, index: int) -> torch.Tensor:
        from PIL import Image

        rng = random.Random(self.seed * 1_000_003 + index)
        image = None
        if raw is not None:
            try:
                image = Image.open(io.BytesIO(raw))
                image = image.convert("RGB")
            except Exception:  # not an image: decode the generated JPEG instead
                image = None
        if image is None:
            image = Image.open(io.BytesIO(self.jpeg)).convert("RGB")
        box = crop_box(image.width, image.height, rng)
        size = (self.image_size, self.image_size)
        image = image.resize(size, Image.BILINEAR, box=box)
        if rng.random() < 0.5:
            image = image.transpose(Image.FLIP_LEFT_RIGHT)
        pixels = torch.frombuffer(bytearray(image.tobytes()), dtype=torch.uint8)
        return pixels.view(self.image_size, self.image_size, 3).permute(2, 0, 1).contiguous()


def measure_cost(dataset: SyntheticSamples, samples: int = 8) -> float:
    """Median wall seconds of one sample in this process (after two unmeasured samples)."""
    dataset[0]
    dataset[samples + 1]
    times = []
    for index in range(1, samples + 1):
        start = time.perf_counter()
        dataset[index]
        times.append(time.perf_counter() - start)
    times.sort()
    return times[len(times) // 2]
