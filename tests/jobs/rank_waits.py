#!/usr/bin/env python3
"""A synchronous two-rank job whose ranks load at different costs, and that can stall once.

    torchrun --standalone --nproc-per-node 2 rank_waits.py --sample-ms 1,40 --workers 1
    torchrun --standalone --nproc-per-node 2 rank_waits.py --stall 1:41:2.0 --stall-file S

Each rank iterates the whole dataset in order (no sampler), a sample costs the rank's
--sample-ms (a sleep: the load cannot shrink on a busy machine), each step sleeps --step-ms
then all-reduces over gloo, so a rank that waits for data holds the other back, as in
DistributedDataParallel. --stall RANK:INDEX:SECONDS sleeps SECONDS more loading sample INDEX
in RANK, once (the first epoch that reaches it), and writes to --stall-file when it began
(time.time()) and the epoch.
"""

import argparse
import json
import os
import time

import torch
import torch.distributed as dist
from torch.utils.data import DataLoader, Dataset


class Samples(Dataset):
    def __init__(self, size, cost_s, stall, stall_file):
        self.size, self.cost_s = size, cost_s
        self.stall, self.stall_file = stall, stall_file
        self.epoch = 0

    def __len__(self):
        return self.size

    def __getitem__(self, index):
        stalls = self.stall is not None and index == self.stall[0]
        if stalls and not os.path.exists(self.stall_file):
            with open(self.stall_file, "w") as stream:
                json.dump({"began": time.time(), "epoch": self.epoch}, stream)
            time.sleep(self.stall[1])
        time.sleep(self.cost_s)
        return torch.zeros(8), index


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sample-ms", default="2,2", help="per rank, comma-separated")
    parser.add_argument("--samples", type=int, default=64)
    parser.add_argument("--batch-size", type=int, default=4)
    parser.add_argument("--step-ms", type=float, default=20.0)
    parser.add_argument("--epochs", type=int, default=1)
    parser.add_argument("--workers", type=int, default=0)
    parser.add_argument("--stall", help="RANK:INDEX:SECONDS")
    parser.add_argument("--stall-file")
    args = parser.parse_args()
    dist.init_process_group("gloo")
    rank = dist.get_rank()
    cost_s = float(args.sample_ms.split(",")[rank]) / 1000
    stall = None
    if args.stall:
        stall_rank, index, seconds = args.stall.split(":")
        if int(stall_rank) == rank:
            stall = (int(index), float(seconds))
    dataset = Samples(args.samples, cost_s, stall, args.stall_file)
    loader = DataLoader(
        dataset,
        batch_size=args.batch_size,
        num_workers=args.workers,
        persistent_workers=args.workers > 0,
    )
    total = torch.zeros(1)
    for epoch in range(1, args.epochs + 1):
        dataset.epoch = epoch  # seen by the workers only with num_workers=0
        for batch, _ in loader:
            time.sleep(args.step_ms / 1000)
            total += batch.sum()
            dist.all_reduce(total)
    dist.barrier()
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
