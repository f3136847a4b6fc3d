"""Dataset storage: where the data sits (mount, options, disks) and how fast it reads.

Its helpers stand beside it: `blockdev` (from a mount down to its disks) and `readspeed` (the
timed read of a sample of the files), imported when the check runs.
"""

from __future__ import annotations

import os
from typing import TYPE_CHECKING

from hostcheck import config as c
from hostcheck import units
from hostcheck._shared.sizes import format_size, parse_size
from hostcheck.checks.base import CheckContext, CheckSpec
from hostcheck.model import CheckResult, Finding, Status
from hostcheck.mounts import Mount, mount_for, read_mounts

if TYPE_CHECKING:
    from hostcheck.checks.storage.blockdev import Resolution
    from hostcheck.checks.storage.readspeed import ReadResult

ID = "storage"
MOUNTINFO = "/proc/self/mountinfo"
RUN = "ansible-playbook site.yml --tags dataset_staging"
FIX_OPTIONS = (
    "add {options} to dataset_staging_mount_options (role dataset_staging) and run: " + RUN
)
FIX_MOUNT = "set dataset_staging_mount (role dataset_staging) and run: " + RUN
FIX_LOCAL = (
    "stage the dataset on local SSD/NVMe: set dataset_staging_devices and "
    "dataset_staging_mount (role dataset_staging) and run: " + RUN
)

# File system types whose data comes over the network.
NETWORK_FS = frozenset(
    {
        "nfs", "nfs4", "cifs", "smb3", "smbfs", "lustre", "beegfs", "gpfs", "ceph", "9p",
        "glusterfs", "afs", "wekafs", "orangefs", "pvfs2", "davfs", "cvmfs", "quobyte",
    }
)  # fmt: skip
# FUSE subtypes (fuse.<subtype> in mountinfo) that are network clients.
NETWORK_FUSE = frozenset(
    {
        "sshfs", "glusterfs", "ceph-fuse", "ceph", "s3fs", "gcsfuse", "rclone", "juicefs",
        "goofys", "mountpoint-s3", "blobfuse", "blobfuse2", "mfs", "moosefs", "lizardfs",
        "seaweedfs", "cvmfs2", "davfs", "alluxio-fuse", "geesefs", "lustre", "beegfs",
    }
)  # fmt: skip
MEMORY_FS = frozenset({"tmpfs", "ramfs"})
OVERLAY_FS = frozenset({"overlay", "aufs", "fuse-overlayfs", "fuse.fuse-overlayfs"})

SCHEMA = c.obj(
    {
        "dataset_path": c.nullable({"type": "string", "minLength": 1}),
        "required_mount_options": {
            "type": "array",
            "items": {"type": "string", "minLength": 1},
            "uniqueItems": True,
        },
        "allow_rotational": {"type": "boolean"},
        "allow_network": {"type": "boolean"},
        "min_free": c.nullable(c.SIZE),
        "read_test": c.obj(
            {
                "enabled": {"type": "boolean"},
                "max_files": c.POSITIVE_INT,
                "max_bytes": c.SIZE,
                "block_size": c.SIZE,
                "max_seconds": {"type": "number", "exclusiveMinimum": 0},
                "scan_limit": c.POSITIVE_INT,
                "min_bytes_per_second": c.nullable(c.SIZE),
            }
        ),
    }
)


def classify(fs_type: str, major: int, source: str) -> str:
    """network, memory, overlay, block (a device we can follow in sysfs) or other."""
    kind = fs_type.lower()
    base, _, subtype = kind.partition(".")
    if kind in NETWORK_FS or (base in ("fuse", "fuseblk") and subtype in NETWORK_FUSE):
        return "network"
    if kind in MEMORY_FS:
        return "memory"
    if kind in OVERLAY_FS:
        return "overlay"
    if major != 0 or source.startswith("/dev/"):  # btrfs shows an anonymous 0:N device
        return "block"
    return "other"


def atime_mode(options: tuple[str, ...] | list[str]) -> str:
    """How reads update access times: mountinfo shows noatime or relatime, and neither for
    strictatime (every read writes the inode)."""
    if "noatime" in options:
        return "noatime"
    if "relatime" in options:
        return "relatime"
    return "strictatime"


def resolve_mount(ctx: CheckContext, mount: Mount) -> Resolution:
    # here, not at the top: a run with the storage check off does not import them
    from hostcheck.checks.storage.blockdev import host_realpath, resolve_devnum, resolve_name

    if mount.major != 0:
        return resolve_devnum(ctx.system, mount.major, mount.minor)
    device = os.path.basename(host_realpath(ctx.system, mount.source))
    return resolve_name(ctx.system, device)


def options_finding(mount: Mount, required: list[str]) -> Finding:
    options = mount.all_options
    missing = [o for o in required if o not in options]
    atime = atime_mode(options)
    shown = atime if not missing else f"{atime}, missing {', '.join(missing)}"
    return Finding(
        "mount options",
        Status.WARN if missing else Status.PASS,
        list(options),
        ", ".join(required) if required else "no requirement",
        display=shown,
        source=f"{MOUNTINFO} ({mount.mount_point})",
        remedy=FIX_OPTIONS.format(options=", ".join(missing) or "the options"),
    )


def backing_finding(cfg: dict, kind: str, mount: Mount, res: Resolution | None) -> Finding:
    where = f"{MOUNTINFO} and /sys/dev/block/{mount.major}:{mount.minor}"
    network_status = Status.PASS if cfg["allow_network"] else Status.FAIL
    expected = "any storage" if cfg["allow_network"] else "local storage"
    if kind == "network":
        return Finding(
            "backing",
            network_status,
            "network",
            expected,
            display=f"network file system {mount.fs_type} from {mount.source}",
            source=MOUNTINFO,
            remedy=FIX_LOCAL,
        )
    if kind in ("memory", "overlay", "other"):
        text = {
            "memory": f"memory ({mount.fs_type}): the data lives in RAM",
            "overlay": f"{mount.fs_type} (container layer): the disks below are not followed",
            "other": f"{mount.fs_type} from {mount.source}: no block device to follow",
        }[kind]
        return Finding("backing", Status.PASS, kind, expected, text, MOUNTINFO)
    assert res is not None
    if not res.disks:
        return Finding(
            "backing",
            Status.WARN,
            "unresolved",
            "the disks under the mount",
            display=f"{mount.source}: {'; '.join(res.problems) or 'no disks found'}",
            source=where,
            remedy="check that /sys is mounted and the device exists (lsblk -s "
            f"{mount.source}), or {FIX_MOUNT}",
        )
    remote = [d for d in res.disks if d.remote]
    stack = res.tree.describe() if res.tree else res.device
    disks = ", ".join(d.describe() for d in res.disks)
    if remote:
        return Finding(
            "backing",
            network_status,
            "network block device",
            expected,
            display=f"block device over the network: {stack}; disks {disks}",
            source=where,
            remedy=FIX_LOCAL,
        )
    return Finding("backing", Status.PASS, "block", expected, f"{stack}; disks {disks}", where)


def rotational_finding(cfg: dict, res: Resolution) -> Finding:
    known = [d for d in res.disks if d.rotational is not None]
    spinning = [d.name for d in res.rotational]
    source = "/sys/block/<disk>/queue/rotational"
    if not known:
        return Finding("rotational", Status.SKIP, None, None, "not reported by sysfs", source)
    note = ""
    if any(d.kind == "virtio" and d.rotational for d in res.disks):
        note = " (virtio-blk says rotational unless the hypervisor marks the disk otherwise)"
    bad = spinning and not cfg["allow_rotational"]
    return Finding(
        "rotational",
        Status.FAIL if bad else Status.PASS,
        spinning,
        "any disks" if cfg["allow_rotational"] else "no rotational disks",
        display=(f"{', '.join(spinning)} rotational{note}" if spinning else "none rotational"),
        source=source,
        remedy=FIX_LOCAL,
    )


def free_finding(cfg: dict, stat, path: str, mount: Mount) -> Finding:
    free = stat.f_bavail * stat.f_frsize
    minimum = None if cfg["min_free"] is None else parse_size(cfg["min_free"])
    return Finding(
        "free",
        Status.WARN if minimum is not None and free < minimum else Status.PASS,
        free,
        "no threshold" if minimum is None else f">= {format_size(minimum)}",
        display=f"{format_size(free)} of {format_size(stat.f_blocks * stat.f_frsize)}",
        source=f"statvfs({path})",
        unit="bytes",
        remedy=f"free space on {mount.mount_point}, or give the dataset a bigger volume: "
        f"set dataset_staging_devices (role dataset_staging) and run: {RUN}",
    )


def _cache_note(result: ReadResult, mount: Mount, kind: str) -> str:
    if result.cache_bypassed:
        tail = (
            f", {result.tails_buffered} unaligned tails buffered" if result.tails_buffered else ""
        )
        return f"page cache bypassed (O_DIRECT{tail})"
    why = result.no_bypass_reason or "no O_DIRECT read succeeded"
    after = "" if kind == "memory" else "; the rate may come from RAM"
    return f"page cache not bypassed: {mount.fs_type}: {why}{after}"


def read_finding(
    cfg: dict, ctx: CheckContext, path: str, mount: Mount, kind: str
) -> tuple[Finding, dict]:
    from hostcheck.checks.storage.readspeed import read_files, sample_files

    test = cfg["read_test"]
    sample = sample_files(ctx.system.path(path), test["max_files"], test["scan_limit"])
    data: dict = {
        "scanned_files": sample.scanned,
        "scan_complete": sample.complete,
        "sampled_files": len(sample.files),
        "scan_errors": sample.errors[:10],
    }
    source = f"timed reads of {len(sample.files)} files under {path}"
    if not sample.files:
        if sample.errors:
            text = f"cannot list the dataset: {sample.errors[0]}"
            return Finding("read throughput", Status.ERROR, None, None, text, source), data
        text = f"no non-empty regular files under {path}"
        return Finding("read throughput", Status.SKIP, None, None, text, source), data
    result = read_files(
        sample.files,
        parse_size(test["max_bytes"]),
        parse_size(test["block_size"]),
        float(test["max_seconds"]),
    )
    if kind == "memory" and result.no_bypass_reason is None:
        result.no_bypass_reason = "the files live in RAM: there is no disk to read past the cache"
    data.update(result.to_dict())
    wanted = test["min_bytes_per_second"]
    minimum = None if wanted is None else parse_size(wanted)
    expected = "no threshold" if minimum is None else f">= {units.format_rate(minimum)}"
    rate = result.bytes_per_s
    if rate is None:
        errors = "; ".join(result.errors) or "nothing read"
        finding = Finding(
            "read throughput", Status.ERROR, None, expected, f"could not read: {errors}", source
        )
        return finding, data
    status = Status.FAIL if minimum is not None and rate < minimum else Status.PASS
    problems = ""
    if result.error_count:
        status = Status.WARN if status == Status.PASS else status
        problems = f"; {result.error_count} files unreadable ({result.errors[0]})"
    stopped = f", stopped by {result.stopped_by}" if result.stopped_by else ""
    display = (
        f"{units.format_rate(rate)} ({format_size(result.bytes)} from {result.files} "
        f"files in {result.seconds:.2f} s{stopped}; {_cache_note(result, mount, kind)}){problems}"
    )
    remedy = FIX_LOCAL
    if result.error_count and status == Status.WARN:
        remedy = f"make every dataset file readable by the training user (then: {RUN})"
    finding = Finding(
        "read throughput", status, round(rate), expected, display, source, remedy,
        unit="bytes_per_second",
    )  # fmt: skip
    return finding, data


def _dataset_path(ctx: CheckContext) -> str | None:
    given = ctx.options.dataset_path or ctx.config.get("dataset_path")
    if not given:
        return None
    return given if os.path.isabs(given) else os.path.abspath(given)


def run(ctx: CheckContext) -> CheckResult:
    cfg = ctx.config
    given = _dataset_path(ctx)
    if given is None:
        return CheckResult.skipped(
            ID, "no dataset path: pass --dataset-path or set storage.dataset_path in the profile"
        )
    from hostcheck.checks.storage.blockdev import host_realpath

    path = host_realpath(ctx.system, given)
    data: dict = {"dataset_path": given, "resolved_path": path}
    if not ctx.system.exists(path):
        missing = Finding(
            "path",
            Status.FAIL,
            "missing",
            "an existing directory or file",
            display=f"{path} does not exist",
            source="stat",
            remedy=FIX_MOUNT,
        )
        return CheckResult.from_findings(ID, [missing], data)
    mount = mount_for(read_mounts(ctx.system), path)
    if mount is None:
        lost = Finding("mount", Status.ERROR, None, None, f"no mount holds {path}", MOUNTINFO)
        return CheckResult.from_findings(ID, [lost], data)
    kind = classify(mount.fs_type, mount.major, mount.source)
    res = resolve_mount(ctx, mount) if kind == "block" else None
    data.update(
        {
            "mount_point": mount.mount_point,
            "fs_type": mount.fs_type,
            "source": mount.source,
            "device_number": f"{mount.major}:{mount.minor}",
            "options": list(mount.all_options),
            "atime": atime_mode(mount.all_options),
            "storage_kind": kind,
            "block": res.to_dict() if res else None,
        }
    )
    findings = [
        Finding(
            "file system",
            Status.PASS,
            mount.fs_type,
            None,
            display=f"{mount.fs_type} on {mount.mount_point} from {mount.source}",
            source=MOUNTINFO,
        ),
        options_finding(mount, cfg["required_mount_options"]),
        backing_finding(cfg, kind, mount, res),
    ]
    if res is not None and res.disks:
        findings.append(rotational_finding(cfg, res))
    stat = ctx.system.statvfs(path)
    data["free_bytes"] = stat.f_bavail * stat.f_frsize
    data["size_bytes"] = stat.f_blocks * stat.f_frsize
    findings.append(free_finding(cfg, stat, path, mount))
    if cfg["read_test"]["enabled"]:
        finding, data["read"] = read_finding(cfg, ctx, path, mount, kind)
        findings.append(finding)
    return CheckResult.from_findings(ID, findings, data)


SPEC = CheckSpec(
    id=ID,
    title="Dataset storage: mount, disks, free space, read throughput",
    explain=(
        "Follows the dataset path (--dataset-path or storage.dataset_path) to its mount "
        "(/proc/self/mountinfo): file system type and options (noatime expected, since "
        "otherwise reads write access times), then from the mount's device number through "
        "sysfs (partitions, device mapper, md RAID) down to the physical disks: NVMe or not, "
        "rotational, model, size; network file systems are reported as such. It compares "
        "with the profile (allow_rotational, allow_network, min_free) and times real reads "
        "of a sample of the dataset's files, past the page cache with O_DIRECT where the "
        "file system allows it, against read_test.min_bytes_per_second. DataLoader workers "
        "read every sample from here each epoch: spinning disks, a busy network file system "
        "or a slow volume leave the GPUs waiting for data however many workers there are."
    ),
    run=run,
    schema=SCHEMA,
    roles=("dataset_staging",),
)
