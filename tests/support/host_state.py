"""`hostcheck run ... --host-state` on a tree standing in for a host's root: the real
command-line parsing and rules, reading the tree through hostcheck's System."""

from __future__ import annotations

import json
import sysconfig
from pathlib import Path

from hostcheck.cli import build_parser
from hostcheck.commands.run import host_state_of
from hostcheck.compiled.digest import SCHEMA
from hostcheck.system import System

# A converged host's files, as a tree standing in for its root reads them.
MOUNTINFO = (
    "22 1 8:1 / / rw,relatime shared:1 - ext4 /dev/sda1 rw,errors=remount-ro\n"
    "30 22 0:26 / /dev/shm rw,nosuid,nodev shared:4 - tmpfs tmpfs rw,size=65536k\n"
    "40 22 0:40 / /run/user/0 rw,nosuid,nodev shared:9 - tmpfs tmpfs rw,size=1000k,mode=700\n"
)
HOST = {
    "/proc/self/mountinfo": MOUNTINFO,
    "/proc/sys/kernel/random/boot_id": "0b1c\n",
    "/proc/sys/vm/swappiness": "10\n",
    "/proc/sys/net/ipv4/tcp_rmem": "4096\t131072\t16777216\n",
    "/proc/meminfo": "MemTotal:       16384000 kB\nMemFree:         1000 kB\n",
    "/proc/swaps": "Filename\tType\tSize\tUsed\tPriority\n/swap.img file 1048572 0 -2\n",
    "/etc/fstab": "tmpfs /dev/shm tmpfs size=64m 0 0\n",
    "/etc/security/limits.d/90-hostcheck-training.conf": "* soft nofile 65536\n",
    "/etc/sysctl.d/90-hostcheck-training.conf": "vm.swappiness = 10\n",
    "/etc/systemd/system.conf.d/90-hostcheck-training.conf": "[Manager]\n",
    "/etc/pam.d/sshd": "session required pam_limits.so\n",
    "/etc/passwd": "root:x:0:0::/root:/bin/bash\n",
    "/sys/devices/system/cpu/cpu0/cpufreq/scaling_governor": "performance\n",
}


def tree(root: Path, files: dict) -> None:
    """Write files (host path -> text) under root."""
    for path, text in files.items():
        target = root / path.lstrip("/")
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(text)


def host_state(argv: list[str], root: Path, env: dict | None = None) -> dict[str, str]:
    """The parts for `hostcheck ARGV` (argv without the program), read under root."""
    args = build_parser().parse_args(argv)
    return host_state_of(args, argv, System(root=root, env=env or {}), SCHEMA)


def site_packages(root: Path) -> Path:
    """Where the tree holds the distributions installed beside hostcheck."""
    return root / sysconfig.get_paths()["purelib"].lstrip("/")


def command_on(root: Path, env: dict | None = None):
    """A stand-in for the probe's run_command that answers `hostcheck ... --host-state` as
    hostcheck would on the tree (and fails, as hostcheck does, on a command it refuses)."""

    def run(argv: list[str]) -> tuple[int, str, str]:
        assert argv[-1] == "--host-state", argv
        try:
            parts = host_state(argv[1:], root, env)
        except SystemExit as exc:
            return int(exc.code or 2), "", "hostcheck: error: usage"
        except Exception as exc:  # what hostcheck prints as an error
            return 2, "", f"hostcheck: error: {exc}"
        return 0, json.dumps(parts), ""

    return run
