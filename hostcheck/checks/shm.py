"""/dev/shm: DataLoader workers hand every batch to the main process through it."""

from __future__ import annotations

from hostcheck import config as c
from hostcheck import units
from hostcheck._shared.sizes import format_size, parse_size
from hostcheck.checks.base import CheckContext, CheckSpec
from hostcheck.model import CheckResult, Finding, Status
from hostcheck.mounts import mount_for, read_mounts

SHM = "/dev/shm"
FIX = "set shm_size (role shm) and run: ansible-playbook site.yml --tags shm"

SCHEMA = c.obj(
    {
        "min_size": c.SIZE_OR_PERCENT,
        "min_free": c.SIZE,
        "loader": c.obj(
            {
                "workers": c.nullable({"type": "integer", "minimum": 0}),
                "prefetch_factor": c.POSITIVE_INT,
                "batch_bytes": c.nullable(c.SIZE),
                "ranks": c.POSITIVE_INT,
            }
        ),
    }
)


def loader_need(loader: dict) -> int | None:
    """Bytes of batches in flight: workers x prefetch_factor x batch bytes, per rank."""
    if not loader.get("workers") or loader.get("batch_bytes") is None:
        return None
    batch = parse_size(loader["batch_bytes"])
    return loader["workers"] * loader["prefetch_factor"] * batch * loader["ranks"]


def run(ctx: CheckContext) -> CheckResult:
    cfg = ctx.config
    mount = mount_for(read_mounts(ctx.system), SHM)
    if mount is None or mount.mount_point != SHM:
        held_by = mount.mount_point if mount else "nothing"
        return CheckResult.from_findings(
            "shm",
            [
                Finding(
                    "mount",
                    Status.FAIL,
                    f"not a mount point (part of {held_by})",
                    "tmpfs mounted on /dev/shm",
                    remedy=FIX,
                )
            ],
        )
    stat = ctx.system.statvfs(SHM)
    size = stat.f_blocks * stat.f_frsize
    free = stat.f_bavail * stat.f_frsize
    ram = ctx.system.total_memory()
    wanted = units.parse_size_spec(cfg["min_size"])
    min_size = wanted.tmpfs_bytes(ram)
    min_free = parse_size(cfg["min_free"])
    need = loader_need(cfg["loader"])

    findings = [
        Finding(
            "type",
            Status.PASS if mount.fs_type == "tmpfs" else Status.FAIL,
            mount.fs_type,
            "tmpfs",
            source="/proc/self/mountinfo",
            remedy=FIX,
        ),
        Finding(
            "size",
            Status.PASS if size >= min_size else Status.FAIL,
            size,
            min_size,
            display=format_size(size),
            source="statvfs(/dev/shm)",
            unit="bytes",
            remedy=f"{FIX} (at least {format_size(min_size)})",
        ),
        Finding(
            "free",
            Status.PASS if free >= min_free else Status.WARN,
            free,
            min_free,
            display=format_size(free),
            source="statvfs(/dev/shm)",
            unit="bytes",
            remedy="find what fills /dev/shm (stale DataLoader segments: torch_*), or " + FIX,
        ),
    ]
    of_ram = f" ({wanted})" if wanted.percent is not None else ""
    findings[1].expected = f">= {format_size(min_size)}{of_ram}"
    findings[2].expected = f">= {format_size(min_free)}"
    if need is not None:
        enough_size = size >= need
        findings.append(
            Finding(
                "loader need",
                Status.PASS
                if enough_size and free >= need
                else (Status.WARN if enough_size else Status.FAIL),
                need,
                f"<= free {format_size(free)}",
                display=f"{format_size(need)} "
                f"({cfg['loader']['workers']} workers x {cfg['loader']['prefetch_factor']} "
                f"prefetch x {format_size(parse_size(cfg['loader']['batch_bytes']))}"
                f" x {cfg['loader']['ranks']} ranks)",
                source="profile shm.loader",
                remedy=f"{FIX} (at least {format_size(need)}), or lower num_workers",
            )
        )
    data = {
        "mount_point": mount.mount_point,
        "fs_type": mount.fs_type,
        "options": list(mount.all_options),
        "size_bytes": size,
        "free_bytes": free,
        "used_bytes": size - stat.f_bfree * stat.f_frsize,
        "ram_bytes": ram,
        "min_size_bytes": min_size,
        "loader_need_bytes": need,
    }
    return CheckResult.from_findings("shm", findings, data)


SPEC = CheckSpec(
    id="shm",
    title="/dev/shm size and free space",
    explain=(
        "Measures /dev/shm: that it is a tmpfs, its size (statvfs) against the profile's "
        "min_size (bytes or % of RAM), its free space, and, when the loader shape is given "
        "(shm.loader.workers, prefetch_factor, batch_bytes, ranks), whether the batches in "
        "flight fit. DataLoader workers pass every batch to the training process through "
        "shared memory in /dev/shm; when it is too small (Docker's default is 64 MB) workers "
        "die with SIGBUS or 'No space left on device' and training stops or crawls."
    ),
    run=run,
    schema=SCHEMA,
    roles=("shm",),
)
