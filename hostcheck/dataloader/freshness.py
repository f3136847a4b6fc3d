"""When a DataLoader settings file no longer stands for the host: measured on another host,
with another number of online CPUs, or (when asked) too long ago. Training code
(hostcheck.dataloader.read), the dataloader check and the hostcheck role (its probe asks the
hostcheck in the training venv) judge it by this rule."""

from __future__ import annotations

import os
import time

from hostcheck.dataloader.schema import SettingsFile, SettingsFileError

ROLE_VARIABLE = "hostcheck_dataloader_enabled"


def remeasure(path: str) -> str:
    """What makes a stale or missing file right, for messages and remedies."""
    return (
        f"measure again with hostcheck loop --sweep --write {path} (role variable {ROLE_VARIABLE})"
    )


def host_cpus() -> int:
    """The host's online CPUs, as the file records them: not this process's affinity, which
    a launcher narrows per rank (srun --cpu-bind, numactl, a cpuset) without the host
    changing."""
    return os.cpu_count() or 1


def _duration(seconds: float) -> str:
    if seconds >= 2 * 86400:
        return f"{seconds / 86400:.1f} days"
    if seconds >= 2 * 3600:
        return f"{seconds / 3600:.1f} hours"
    return f"{seconds:.0f} s"


def stale_problem(
    found: SettingsFile,
    hostname: str,
    cpus: int,
    max_age_s: float | None = None,
    now: float | None = None,
) -> str:
    """Why `found` does not stand for the host `hostname` with `cpus` online CPUs at `now`
    (default: the time now): measured on another host, with another number of CPUs, or more
    than max_age_s seconds ago; '' when it stands."""
    if (found.host.hostname, found.host.cpus) != (hostname, cpus):
        return (
            f"stale: measured on {found.host.hostname} with {found.host.cpus} CPUs, this is "
            f"{hostname} with {cpus} CPUs: {remeasure(found.path)}"
        )
    age = found.age_s(now)
    if max_age_s is not None and age > max_age_s:
        return (
            f"stale: measured at {found.measured_at}, {_duration(age)} ago, more than the "
            f"{_duration(max_age_s)} allowed: {remeasure(found.path)}"
        )
    return ""


def check_fresh(found: SettingsFile, max_age_s: float | None = None) -> None:
    """SettingsFileError (state "stale") when `found` was measured on another host, with
    another number of CPUs, or more than max_age_s seconds ago."""
    problem = stale_problem(found, os.uname().nodename, host_cpus(), max_age_s, time.time())
    if problem:
        raise SettingsFileError(found.path, problem, "stale")
