"""The table of checks, in the order they run and are reported."""

from __future__ import annotations

from hostcheck.checks import (
    cpu,
    dataloader,
    dcgm,
    gpu,
    loop,
    pillow,
    shm,
    storage,
    sysctl,
    ulimits,
)
from hostcheck.checks.base import CheckContext, CheckSpec, RunOptions

CHECKS: dict[str, CheckSpec] = {
    spec.id: spec
    for spec in (
        shm.SPEC,
        ulimits.SPEC,
        storage.SPEC,
        pillow.SPEC,
        cpu.CPU_SPEC,
        cpu.MEMORY_SPEC,
        sysctl.SPEC,
        gpu.SPEC,
        dcgm.SPEC,
        loop.SPEC,
        dataloader.SPEC,
    )
}

__all__ = ["CHECKS", "CheckContext", "CheckSpec", "RunOptions"]
