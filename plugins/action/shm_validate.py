"""Validates the shm role's variables, then reads /dev/shm once (hostcheck.gpu_hosts.shm_probe:
the mount, its fstab lines, MemTotal) and works out what, if anything, must change.

    - hostcheck.gpu_hosts.shm_validate:
      register: __shm_validation

values:
    option         what tmpfs takes after size= (N% or bytes)
    (with shm_enabled, from the host:)
    bytes          the size the kernel gives /dev/shm with that option on this host's RAM
    fstab_options  the options of the fstab line: those other roles wrote (noexec ...),
                   shm_mount_options, size=
    source         the source to remount the live /dev/shm with
    changes        what is out of line: "fstab" (the line differs from what the mount module
                   writes) and "live" (the mount's type, size or options); main.yml includes
                   tasks/size.yml only when it is not empty
A size below what /dev/shm holds now is refused here, before any role changes anything
(shm_refuse_shrink_below_used). The rest is in plugins/plugin_utils/role_validation.py.
"""

from __future__ import annotations

import re

from ansible.module_utils.parsing.convert_bool import boolean
from ansible_collections.hostcheck.gpu_hosts.plugins.filter.sizes import (
    tmpfs_size_bytes,
    tmpfs_size_option,
)
from ansible_collections.hostcheck.gpu_hosts.plugins.plugin_utils.role_validation import (
    Invalid,
    RoleValidation,
)

PLAIN_OPTION = re.compile(r"^[a-z_]+(=[^,\s]+)?$")
PROBE = "hostcheck.gpu_hosts.shm_probe"
# What ansible.posix.mount writes for /dev/shm around the options: src, fstype, dump, passno.
FSTAB_FIELDS = {"src": "tmpfs", "fstype": "tmpfs", "dump": "0", "passno": "0"}


def shm_values(size: object, mount_options: object) -> dict:
    """What the role's tasks use, or Invalid naming the variable."""
    option = tmpfs_size_option(size, "shm_size")
    if not isinstance(mount_options, list) or any(
        not isinstance(item, str) or item.startswith("size=") or not PLAIN_OPTION.match(item)
        for item in mount_options
    ):
        raise Invalid(
            "shm_mount_options: plain mount options without size= (that is shm_size), "
            f"got {mount_options}"
        )
    return {"option": option}


def wanted_bytes(size: object, probe: dict) -> int:
    return tmpfs_size_bytes(size, "shm_size", probe.get("memtotal_kib"))


def refuse_shrinking(size: object, wanted: int, live: dict | None) -> None:
    if live and live["fstype"] == "tmpfs" and wanted < live["used"]:
        raise Invalid(
            f"shm_size: {size} ({wanted} bytes) is less than the {live['used']} bytes "
            "/dev/shm holds now; not shrinking it. Free /dev/shm (stale torch_* segments of "
            "dead jobs) or choose a larger shm_size."
        )


def fstab_options(fstab: list[dict], mount_options: list[str], option: str) -> list[str]:
    """Options of the last fstab line other than size= and defaults (another role's noexec),
    then shm_mount_options, then size=."""
    written = fstab[-1]["options"].split(",") if fstab else []
    kept = [o for o in written if o and o != "defaults" and not o.startswith("size=")]
    return list(dict.fromkeys([*kept, *mount_options, f"size={option}"]))


def fstab_in_line(fstab: list[dict], options: list[str]) -> bool:
    """Every /dev/shm line is what the mount module would write (so it would change nothing)."""
    wanted = {**FSTAB_FIELDS, "options": ",".join(options)}
    return bool(fstab) and all(
        all(line[key] == value for key, value in wanted.items()) for line in fstab
    )


def live_in_line(live: dict | None, wanted: int, mount_options: list[str]) -> bool:
    return (
        live is not None
        and live["fstype"] == "tmpfs"
        and live["size"] == wanted
        and set(mount_options) <= set(live["options"])
    )


def shm_plan(probe: dict, size: object, option: str, mount_options: list, refuse: bool) -> dict:
    """From what shm_probe read: the wanted size, the fstab options and what must change."""
    wanted = wanted_bytes(size, probe)
    live = probe.get("live")
    if refuse:
        refuse_shrinking(size, wanted, live)
    options = fstab_options(probe["fstab"], mount_options, option)
    changes = []
    if not fstab_in_line(probe["fstab"], options):
        changes.append("fstab")
    if not live_in_line(live, wanted, mount_options):
        changes.append("live")
    return {
        "bytes": wanted,
        "fstab_options": options,
        "source": live["source"] if live and live["fstype"] == "tmpfs" else "tmpfs",
        "changes": changes,
    }


class ActionModule(RoleValidation):
    SWITCHED_OFF = "/dev/shm left as it is"
    # what read_shm() read in this task (the verify action compares it when it validated now)
    probed: dict | None = None

    def validate(self) -> dict:
        size, mount_options = self.var("shm_size"), self.var("shm_mount_options")
        values = shm_values(size, mount_options)
        if not self.enabled():
            return values
        probe = self.read_shm()
        refuse = boolean(self.var("shm_refuse_shrink_below_used")) and not self.VERIFIES
        return {**values, **shm_plan(probe, size, values["option"], mount_options, refuse)}

    def read_shm(self) -> dict:
        self.probed = self.on_host(PROBE, {})
        return self.probed
