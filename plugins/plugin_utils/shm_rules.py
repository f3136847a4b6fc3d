"""The shm role's decisions: shm_size and shm_mount_options checked, /dev/shm read once
(shm_probe: the mount, its fstab lines, MemTotal) and compared with them, and what verify says.
The actions plugins/action/shm_validate.py and shm_verify.py are this Validation with nothing
of their own but verify's message; the base is plugins/plugin_utils/role_action.py."""

from __future__ import annotations

import re

from ansible_collections.hostcheck.gpu_hosts.plugins.module_utils.sizes import (
    tmpfs_size_bytes,
    tmpfs_size_option,
)
from ansible_collections.hostcheck.gpu_hosts.plugins.plugin_utils.role_action import (
    Invalid,
    RoleAction,
)

PROBE = "hostcheck.gpu_hosts.shm_probe"
PLAIN_OPTION = re.compile(r"^[a-z_]+(=[^,\s]+)?$")
# The fields of the /dev/shm fstab line around the options: src, fstype, dump, passno.
FSTAB_FIELDS = {"src": "tmpfs", "fstype": "tmpfs", "dump": "0", "passno": "0"}


def shm_values(size: object, mount_options: object) -> dict:
    """What the role's tasks use, or Invalid naming the variable."""
    try:
        option = tmpfs_size_option(size)
    except ValueError as exc:
        raise Invalid(f"shm_size: {exc}") from None
    if not isinstance(mount_options, list) or any(
        not isinstance(item, str) or item.startswith("size=") or not PLAIN_OPTION.match(item)
        for item in mount_options
    ):
        raise Invalid(
            "shm_mount_options: plain mount options without size= (that is shm_size), "
            f"got {mount_options}"
        )
    return {"option": option}


def wanted_bytes(option: str, probe: dict) -> int:
    if probe.get("memtotal_kib") is None:
        raise Invalid("shm_size: MemTotal of /proc/meminfo could not be read")
    return tmpfs_size_bytes(option, probe["memtotal_kib"] * 1024)


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


def fstab_line(options: list[str]) -> str:
    """The /dev/shm line the role writes to fstab."""
    return " ".join(
        [
            FSTAB_FIELDS["src"],
            "/dev/shm",
            FSTAB_FIELDS["fstype"],
            ",".join(options),
            FSTAB_FIELDS["dump"],
            FSTAB_FIELDS["passno"],
        ]
    )


def fstab_differences(fstab: list[dict], options: list[str]) -> list[str]:
    """How the /dev/shm lines differ from the line the role writes ([] when in line)."""
    if not fstab or fstab[-1]["fstype"] != "tmpfs":
        return ["fstab has no tmpfs line for /dev/shm"]
    if options[-1] not in fstab[-1]["options"].split(","):
        return [f"the fstab line lacks {options[-1]}"]
    wanted = {**FSTAB_FIELDS, "options": ",".join(options)}
    if all(line[key] == value for line in fstab for key, value in wanted.items()):
        return []
    return [
        "fstab has "
        + " and ".join(f"'{shown_line(line)}'" for line in fstab)
        + f" where the role writes '{shown_line(wanted)}'"
    ]


def live_differences(live: dict | None, wanted: int, mount_options: list[str]) -> list[str]:
    if live is None or live["fstype"] != "tmpfs":
        return ["no tmpfs is mounted at /dev/shm"]
    found = []
    if live["size"] != wanted:
        found.append(f"the mount is {live['size']} bytes")
    missing = [o for o in mount_options if o not in live["options"]]
    if missing:
        found.append(f"the mount lacks {','.join(missing)}")
    return found


def shown_line(line: dict) -> str:
    return " ".join(
        str(line[key]) for key in ("src", "fstype", "options", "dump", "passno") if line[key]
    )


def shm_differences(probe: dict, option: str, mount_options: list[str]) -> dict:
    """How fstab and the mount differ from shm_size and shm_mount_options, one line each:
    {"fstab": [...], "live": [...]}, empty where nothing must change."""
    options = fstab_options(probe["fstab"], mount_options, option)
    return {
        "fstab": fstab_differences(probe["fstab"], options),
        "live": live_differences(probe["live"], wanted_bytes(option, probe), mount_options),
    }


def shm_plan(probe: dict, size: object, option: str, mount_options: list, refuse: bool) -> dict:
    """From what shm_probe read: the wanted size, the fstab options and what must change."""
    wanted = wanted_bytes(option, probe)
    live = probe["live"]
    if refuse:
        refuse_shrinking(size, wanted, live)
    differences = shm_differences(probe, option, mount_options)
    return {
        "bytes": wanted,
        "fstab_line": fstab_line(fstab_options(probe["fstab"], mount_options, option)),
        "source": live["source"] if live and live["fstype"] == "tmpfs" else "tmpfs",
        "changes": [place for place, found in differences.items() if found],
    }


def shown_fstab(fstab: list[dict]) -> str:
    return f"{fstab[-1]['fstype']} {fstab[-1]['options']}" if fstab else "none -"


def shown_live(live: dict | None) -> str:
    if live is None:
        return "none 0 -"
    return f"{live['fstype']} {live['size']} {','.join(live['options'])}"


def shm_verified(probe: dict, size: object, option: str, mount_options: list[str]) -> str:
    """What holds, or Invalid naming every difference."""
    differences = shm_differences(probe, option, mount_options)
    if differences["fstab"] or differences["live"]:
        raise Invalid(
            f"/dev/shm does not match shm_size={size}: fstab has '{shown_fstab(probe['fstab'])}', "
            f"the mount has '{shown_live(probe['live'])}' "
            f"(wanted {wanted_bytes(option, probe)} bytes): "
            + "; ".join([*differences["fstab"], *differences["live"]])
        )
    return f"/dev/shm is {probe['live']['size']} bytes, as fstab says"


class Validation(RoleAction):
    """shm_size and shm_mount_options checked, then /dev/shm read once and planned: what the
    validate action returns and the verify action compares."""

    ROLE = "shm"
    SWITCHED_OFF = "/dev/shm left as it is"
    # what the probe read in this task (the verify action compares it when it validated now)
    probed: dict | None = None

    def validate(self) -> dict:
        size, mount_options = self.arg("shm_size"), self.arg("shm_mount_options")
        values = shm_values(size, mount_options)
        if not self.enabled():
            return values
        refuse = self.arg("shm_refuse_shrink_below_used") and not self.VERIFIES
        self.probed = self.on_host(PROBE, {})
        return {**values, **shm_plan(self.probed, size, values["option"], mount_options, refuse)}
