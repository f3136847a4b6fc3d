"""CPU lists and cores as the kernel shows them in sysfs: the cpulist format ("0-3,8-11" in
/sys/devices/system/cpu/online and node*/cpulist) and the physical cores (distinct package, die
and core ids of the online CPUs), read the same way by hostcheck's cpu and loop checks and by
the hostcheck role's probe (the host the DataLoader settings file is judged by); and the cpufreq
governors, read the same way by the cpu check and the sysctl_tuning role's probe. This file is
shared: the collection ships it as module_utils and the hostcheck package as hostcheck._shared
(pyproject.toml), so it uses the standard library only.

The readers take the host's files as functions: read(path) gives a file's text or None,
glob(pattern) the paths that match (hostcheck passes its System's, the probe its root's)."""

import re

CPU_DIR = "/sys/devices/system/cpu"
_RANGE = re.compile(r"^(\d+)(?:-(\d+))?$")


def parse_cpulist(text):
    """Kernel cpulist format: '0-3,8-11' -> [0, 1, 2, 3, 8, 9, 10, 11]; '' -> []; ValueError
    for anything else (an empty item, a descending range)."""
    cpus = set()
    text = text.strip()
    if not text:
        return []
    for part in text.split(","):
        match = _RANGE.match(part.strip())
        if not match:
            raise ValueError(f"not a cpulist: {text!r}")
        low = int(match.group(1))
        high = int(match.group(2)) if match.group(2) is not None else low
        if high < low:
            raise ValueError(f"descending range {part!r} in cpulist {text!r}")
        cpus.update(range(low, high + 1))
    return sorted(cpus)


def format_cpulist(cpus):
    """The inverse of parse_cpulist, in the kernel's compact form."""
    parts = []
    ordered = sorted(set(cpus))
    start = prev = None
    for cpu in [*ordered, None]:
        if cpu is not None and prev is not None and cpu == prev + 1:
            prev = cpu
            continue
        if start is not None:
            parts.append(str(start) if start == prev else f"{start}-{prev}")
        start = prev = cpu
    return ",".join(parts)


def _integer(text):
    try:
        return None if text is None else int(text.strip())
    except ValueError:
        return None


def online_cpus(read, glob):
    """The online CPUs; every cpuN directory where the online file is missing, empty or not a
    cpulist (older or unusual kernels)."""
    try:
        online = parse_cpulist(read(f"{CPU_DIR}/online") or "")
    except ValueError:
        online = []
    if online:
        return online
    names = [path.rsplit("/", 1)[-1] for path in glob(f"{CPU_DIR}/cpu[0-9]*")]
    return sorted(int(name[3:]) for name in names if name[3:].isdigit())


def cpufreq_governors(read, cpus):
    """cpu -> its cpufreq scaling_governor, for those of the cpus that have one (none in a VM
    or without a cpufreq driver), in the order given."""
    governors = {}
    for cpu in cpus:
        governor = (read(f"{CPU_DIR}/cpu{cpu}/cpufreq/scaling_governor") or "").strip()
        if governor:
            governors[cpu] = governor
    return governors


def core_keys(read, cpus):
    """cpu -> (package, die, core) from its topology; None for a CPU whose package or core id
    the kernel does not show. die_id is 0 where the kernel has none (core_id may repeat across
    dies)."""
    keys = {}
    for cpu in cpus:
        base = f"{CPU_DIR}/cpu{cpu}/topology"
        package = _integer(read(f"{base}/physical_package_id"))
        core = _integer(read(f"{base}/core_id"))
        die = _integer(read(f"{base}/die_id")) or 0
        keys[cpu] = None if package is None or core is None else (package, die, core)
    return keys


def physical_cores(keys):
    """Distinct cores among core_keys' CPUs; None when the topology of any is not known."""
    found = list(keys.values())
    if not found or any(key is None for key in found):
        return None
    return len(set(found))


def worker_cores(keys):
    """The cores that size DataLoader workers: the physical cores, the CPUs where the topology
    is not known, at least 1."""
    return physical_cores(keys) or len(keys) or 1
