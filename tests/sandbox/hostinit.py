"""Starts one sandbox host, run by `unshare --mount --propagation private` with this machine's
Python: it moves itself into the host's own cgroups (systemd-nspawn keeps the caller's, and
two hosts must not share one), mounts the host's root (overlayfs over the cached root of its
OS kind) in this private mount namespace, and becomes systemd-nspawn, which boots systemd as
the host's PID 1 with its own PID, UTS and mount namespaces, /proc/sys and /sys read-only,
this machine's network (sshd listens on the host's own loopback address), the host's loop
devices and the package sources of this machine bound read-only. Standard library only.

Usage: python3 hostinit.py HOST.json
"""

from __future__ import annotations

import json
import os
import subprocess
import sys


def join_cgroups(cgroups: list[str]) -> None:
    for folder in cgroups:
        os.makedirs(folder, exist_ok=True)
        with open(os.path.join(folder, "cgroup.procs"), "w") as handle:
            handle.write(str(os.getpid()))


def main() -> int:
    with open(sys.argv[1]) as handle:
        host = json.load(handle)
    join_cgroups(host["cgroups"])
    # Ansible lists only mounts whose source looks like a path, as a disk's would.
    subprocess.run(
        [
            "mount",
            "-t",
            "overlay",
            "-o",
            f"lowerdir={host['lower']},upperdir={host['upper']},workdir={host['work']}",
            f"/overlay/{host['name']}",
            host["merged"],
        ],
        check=True,
    )
    argv = [
        "systemd-nspawn",
        "--quiet",
        "--boot",
        "--register=no",
        "--keep-unit",
        "--link-journal=no",
        "--console=read-only",
        f"--machine={host['name']}",
        f"--directory={host['merged']}",
        f"--setenv={host['marker']}",
        *(f"--bind={disk['device']}" for disk in host["disks"]),
        *(f"--bind-ro={source}:{target}" for source, target in host["binds"]),
        *(f"--bind={source}:{target}" for source, target in host.get("binds_rw", [])),
    ]
    os.execvp(argv[0], argv)
    return 1


if __name__ == "__main__":
    sys.exit(main())
