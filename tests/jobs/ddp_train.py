#!/usr/bin/env python3
"""Data-parallel training with DistributedDataParallel, one process per rank (torchrun).

    torchrun --standalone --nproc-per-node 2 ddp_train.py --epochs 2 --workers 0

Each sample takes --sample-ms to load (a wait, like the decoding and augmenting a real
dataset does); gloo on CPU, NCCL when every rank has a GPU.

--hostcheck-settings takes the DataLoader settings (num_workers, pin_memory, prefetch_factor,
persistent_workers) from hostcheck.dataloader.settings() for this node's ranks: the file
`hostcheck loop --sweep --write` made for this host (HOSTCHECK_DATALOADER), or hostcheck's
fallback from the cores.
"""

import argparse
import os
import time

import torch
import torch.distributed as dist
from torch import nn
from torch.nn.parallel import DistributedDataParallel
from torch.utils.data import DataLoader, Dataset
from torch.utils.data.distributed import DistributedSampler


class SlowDataset(Dataset):
    """Images of 3 x 32 x 32 whose loading takes `sleep_s` each."""

    def __init__(self, size, sleep_s):
        generator = torch.Generator().manual_seed(0)
        self.images = torch.randn(size, 3, 32, 32, generator=generator)
        self.labels = torch.randint(0, 10, (size,), generator=generator)
        self.sleep_s = sleep_s

    def __len__(self):
        return len(self.images)

    def __getitem__(self, index):
        time.sleep(self.sleep_s)
        return self.images[index], self.labels[index]


def small_cnn():
    return nn.Sequential(
        nn.Conv2d(3, 32, 3, padding=1),
        nn.ReLU(inplace=True),
        nn.Conv2d(32, 64, 3, padding=1),
        nn.ReLU(inplace=True),
        nn.MaxPool2d(2),
        nn.Conv2d(64, 64, 3, padding=1),
        nn.ReLU(inplace=True),
        nn.AdaptiveAvgPool2d(1),
        nn.Flatten(),
        nn.Linear(64, 10),
    )


def parse_args():
    parser = argparse.ArgumentParser(description="DDP training")
    parser.add_argument("--epochs", type=int, default=2)
    parser.add_argument("--batch-size", type=int, default=32, help="per rank")
    parser.add_argument("--samples", type=int, default=1024, help="dataset length")
    parser.add_argument("--sample-ms", type=float, default=5.0, help="load time of a sample")
    parser.add_argument("--lr", type=float, default=0.01)
    parser.add_argument("--workers", type=int, default=0, help="DataLoader num_workers per rank")
    parser.add_argument("--pin-memory", action="store_true")
    parser.add_argument(
        "--hostcheck-settings",
        action="store_true",
        help="DataLoader settings from hostcheck.dataloader.settings() instead of the flags",
    )
    return parser.parse_args()


def loader_settings(args):
    if args.hostcheck_settings:
        from hostcheck.dataloader import settings

        return settings(ranks_per_node=int(os.environ.get("LOCAL_WORLD_SIZE", "1")))
    return {"num_workers": args.workers, "pin_memory": args.pin_memory}


def main():
    args = parse_args()
    local_rank = int(os.environ.get("LOCAL_RANK", "0"))
    if torch.cuda.is_available():
        torch.cuda.set_device(local_rank)
        device = torch.device("cuda", local_rank)
        dist.init_process_group("nccl")
    else:
        device = torch.device("cpu")
        dist.init_process_group("gloo")
    rank, world = dist.get_rank(), dist.get_world_size()

    dataset = SlowDataset(args.samples, args.sample_ms / 1000)
    sampler = DistributedSampler(dataset, shuffle=True)
    settings = loader_settings(args)
    if rank == 0:
        print(f"{world} ranks, {len(dataset)} samples; DataLoader {settings}")
    loader = DataLoader(dataset, batch_size=args.batch_size, sampler=sampler, **settings)

    model = small_cnn().to(device)
    model = DistributedDataParallel(
        model, device_ids=[local_rank] if device.type == "cuda" else None
    )
    criterion = nn.CrossEntropyLoss()
    optimizer = torch.optim.SGD(model.parameters(), lr=args.lr, momentum=0.9)
    for epoch in range(args.epochs):
        sampler.set_epoch(epoch)
        began = time.perf_counter()
        seen = 0
        for images, labels in loader:
            images = images.to(device, non_blocking=True)
            labels = labels.to(device, non_blocking=True)
            loss = criterion(model(images), labels)
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
            seen += images.size(0)
        elapsed = time.perf_counter() - began
        if rank == 0:
            print(
                f"epoch {epoch}: {seen * world} samples in {elapsed:.2f} s, "
                f"{seen * world / elapsed:.1f} samples/s, loss {loss.item():.3f}"
            )
    # all ranks tear gloo down together: when one destroyed its process group while another
    # was still printing, the other often died of SIGABRT at exit ("terminate called without
    # an active exception", torch 2.13 on CPU)
    dist.barrier()
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
