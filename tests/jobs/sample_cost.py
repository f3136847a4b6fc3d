"""What one ImageFolder sample of imagefolder_train.py costs to make, measured without the job:
its decoding and transforms (the script's own train_transform()), collated into batches by a
DataLoader with the given num_workers and nothing else in the loop, so the training process
only waits. Prints JSON: `cost_s` = seconds per sample for one process (time per sample x
workers; with 0 workers the training process's own), over each epoch's batches after the
first (the start-up, as `hostcheck job` counts it).

    python -m tests.jobs.sample_cost --data ROOT [--batch-size 32] [--workers 0] [--epochs 2]

Runs like the job does (OMP_NUM_THREADS as given to it), next to the job in the test, in a
session of its own (tests/jobs/isolated.py).
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import sys
import time
from pathlib import Path

HERE = Path(__file__).parent


def cpu_torchvision() -> None:
    """torchvision's pure-Python parts next to CPU torch (cpu_torchvision/sitecustomize.py)."""
    spec = importlib.util.spec_from_file_location(
        "cpu_torchvision", HERE / "cpu_torchvision" / "sitecustomize.py"
    )
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)


def measure(data: str, batch_size: int, workers: int, epochs: int) -> dict:
    cpu_torchvision()
    from torch.utils.data import DataLoader
    from torchvision import datasets

    from tests.jobs.imagefolder_train import train_transform

    dataset = datasets.ImageFolder(data, train_transform())
    loader = DataLoader(
        dataset,
        batch_size=batch_size,
        shuffle=True,
        num_workers=workers,
        persistent_workers=workers > 0,
    )
    seconds, samples = 0.0, 0
    for _ in range(epochs):
        batches = iter(loader)
        next(batches)  # start-up
        began = time.perf_counter()
        for images, _labels in batches:
            samples += len(images)
        seconds += time.perf_counter() - began
    return {"cost_s": seconds * max(1, workers) / samples, "samples": samples}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", required=True)
    parser.add_argument("--batch-size", type=int, default=32)
    parser.add_argument("--workers", type=int, default=0)
    parser.add_argument("--epochs", type=int, default=2)
    args = parser.parse_args()
    json.dump(measure(args.data, args.batch_size, args.workers, args.epochs), sys.stdout)


if __name__ == "__main__":
    main()
