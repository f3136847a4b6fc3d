"""The experiment of the article this project grew from, as a plain script: a dataset whose
samples take 5 ms of CPU-side preparation each (a sleep), 1024 samples of 3 x 224 x 224,
batch 64, a linear model, and a step that waits 10 ms every fifth batch. Scenario A loads
in the training process (num_workers=0, no pinning), scenario B in min(8, CPUs) worker
processes with pin_memory=True and non_blocking copies. The article expects 2x to 5x."""

import os
import time

import torch
from torch.utils.data import DataLoader, Dataset

SAMPLES = 1024
BATCH_SIZE = 64
PREPARE_S = 0.005
SLOW_STEP_EVERY, SLOW_STEP_S = 5, 0.01


class SlowToPrepare(Dataset):
    def __init__(self, size, prepare_s):
        self.images = [torch.rand(3, 224, 224) for _ in range(size)]
        self.prepare_s = prepare_s

    def __len__(self):
        return len(self.images)

    def __getitem__(self, index):
        time.sleep(self.prepare_s)  # decoding and augmenting, as the article models it
        return self.images[index], torch.tensor(index % 10)


def train_one_epoch(loader, device, name):
    model = torch.nn.Linear(3 * 224 * 224, 10).to(device)
    loss_fn = torch.nn.CrossEntropyLoss()
    optimizer = torch.optim.Adam(model.parameters())
    print(f"--- {name} (batch size {BATCH_SIZE}) ---")
    began = time.time()
    for step, (images, labels) in enumerate(loader):
        images = images.flatten(1).to(device, non_blocking=True)
        labels = labels.to(device, non_blocking=True)
        if step % SLOW_STEP_EVERY == 0:
            time.sleep(SLOW_STEP_S)  # a longer step now and then
        optimizer.zero_grad()
        loss_fn(model(images), labels).backward()
        optimizer.step()
    seconds = time.time() - began
    print(f"Time taken for {name}: {seconds:.2f} seconds.")
    print(f"Batches per second: {len(loader) / seconds:.2f}")
    return seconds


def main():
    device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
    print(f"device: {device}")
    dataset = SlowToPrepare(SAMPLES, PREPARE_S)
    workers = min(8, os.cpu_count() or 4)
    synchronous = DataLoader(
        dataset, batch_size=BATCH_SIZE, shuffle=True, num_workers=0, pin_memory=False
    )
    slow = train_one_epoch(synchronous, device, "scenario A (num_workers=0)")
    parallel = DataLoader(
        dataset, batch_size=BATCH_SIZE, shuffle=True, num_workers=workers, pin_memory=True
    )
    fast = train_one_epoch(parallel, device, f"scenario B (num_workers={workers}, pin_memory)")
    print(f"speed-up: {slow / fast:.2f}x")


if __name__ == "__main__":
    main()
