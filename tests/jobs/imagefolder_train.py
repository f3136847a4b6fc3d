#!/usr/bin/env python3
"""Train a small CNN on an ImageFolder tree (one folder of JPEGs per class).

    python imagefolder_train.py --data /data/train --batch-size 32 --epochs 2 --workers 0

--hostcheck-settings takes the DataLoader settings (num_workers, pin_memory, prefetch_factor,
persistent_workers) from hostcheck.dataloader.settings(): the file `hostcheck loop --sweep
--write` made for this host (HOSTCHECK_DATALOADER), or hostcheck's fallback from the cores.
"""

import argparse
import time

import torch
from torch import nn
from torch.utils.data import DataLoader
from torchvision import datasets, transforms


def parse_args():
    parser = argparse.ArgumentParser(description="ImageFolder training")
    parser.add_argument("--data", required=True, help="folder with one sub-folder per class")
    parser.add_argument("--batch-size", type=int, default=32)
    parser.add_argument("--epochs", type=int, default=2)
    parser.add_argument("--lr", type=float, default=0.01)
    parser.add_argument("--workers", type=int, default=0, help="DataLoader num_workers")
    parser.add_argument("--pin-memory", action="store_true")
    parser.add_argument(
        "--hostcheck-settings",
        action="store_true",
        help="DataLoader settings from hostcheck.dataloader.settings() instead of the flags",
    )
    return parser.parse_args()


def small_cnn(classes):
    return nn.Sequential(
        nn.Conv2d(3, 16, 5, stride=4, padding=2),
        nn.ReLU(inplace=True),
        nn.Conv2d(16, 32, 3, stride=2, padding=1),
        nn.ReLU(inplace=True),
        nn.AdaptiveAvgPool2d(1),
        nn.Flatten(),
        nn.Linear(32, classes),
    )


def train_transform():
    normalize = transforms.Normalize(mean=[0.485, 0.456, 0.406], std=[0.229, 0.224, 0.225])
    return transforms.Compose(
        [
            transforms.RandomResizedCrop(224),
            transforms.RandomHorizontalFlip(),
            transforms.ToTensor(),
            normalize,
        ]
    )


def loader_settings(args):
    if args.hostcheck_settings:
        from hostcheck.dataloader import settings

        return settings()
    return {"num_workers": args.workers, "pin_memory": args.pin_memory}


def main():
    args = parse_args()
    device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
    dataset = datasets.ImageFolder(args.data, train_transform())
    settings = loader_settings(args)
    print(f"{len(dataset)} images, {len(dataset.classes)} classes; DataLoader {settings}")
    loader = DataLoader(dataset, batch_size=args.batch_size, shuffle=True, **settings)

    model = small_cnn(len(dataset.classes)).to(device)
    criterion = nn.CrossEntropyLoss()
    optimizer = torch.optim.SGD(model.parameters(), lr=args.lr, momentum=0.9)
    model.train()
    for epoch in range(args.epochs):
        began = time.perf_counter()
        seen, total_loss = 0, 0.0
        for images, labels in loader:
            images = images.to(device, non_blocking=True)
            labels = labels.to(device, non_blocking=True)
            loss = criterion(model(images), labels)
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
            seen += images.size(0)
            total_loss += loss.item() * images.size(0)
        elapsed = time.perf_counter() - began
        print(
            f"epoch {epoch}: {seen} samples in {elapsed:.2f} s, {seen / elapsed:.1f} samples/s, "
            f"loss {total_loss / seen:.3f}"
        )


if __name__ == "__main__":
    main()
