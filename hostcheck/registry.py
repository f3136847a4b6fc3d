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

__all__ = ["CHECKS", "CheckContext", "CheckSpec", "RunOptions", "profile_schema"]


def profile_schema() -> dict:
    from hostcheck.config import build_schema
    from hostcheck.fleet import settings as fleet_settings
    from hostcheck.job import profile as job_profile

    return build_schema(
        {check_id: spec.schema for check_id, spec in CHECKS.items()},
        {"fleet": fleet_settings.SCHEMA, "job": job_profile.SCHEMA},
    )
