"""PID 1 of one sandbox host, run by `unshare --mount --uts --pid --fork` with this
machine's Python. It assembles the host's root (overlayfs over the cached Debian root),
its own /proc, /dev, /dev/shm and /run, the package sources of this machine read-only, and
pivots into it; then it becomes tini, which runs sshd. Standard library only.

Usage: python3 hostinit.py HOST.json
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys


def sh(*argv: str) -> None:
    subprocess.run(argv, check=True)


def mount(fstype: str, source: str, target: str, options: str = "") -> None:
    sh("mount", "-t", fstype, *(("-o", options) if options else ()), source, target)


def bind(source: str, target: str, read_only: bool = True) -> None:
    if os.path.isdir(source):
        os.makedirs(target, exist_ok=True)
    else:
        os.makedirs(os.path.dirname(target), exist_ok=True)
        if not os.path.exists(target):
            open(target, "a").close()
    sh("mount", "--bind", source, target)
    if read_only:
        sh("mount", "-o", "remount,bind,ro", target)


def make_dev(root: str, loops: list[dict], shm_size: str) -> None:
    dev = f"{root}/dev"
    mount("tmpfs", "dev", dev, "mode=755,size=4m,nosuid")
    for name, major, minor, mode in (
        ("null", 1, 3, 0o666),
        ("zero", 1, 5, 0o666),
        ("full", 1, 7, 0o666),
        ("random", 1, 8, 0o666),
        ("urandom", 1, 9, 0o666),
        ("tty", 5, 0, 0o666),
        ("kmsg", 1, 11, 0o644),
    ):
        os.mknod(f"{dev}/{name}", mode | 0o020000, os.makedev(major, minor))
        os.chmod(f"{dev}/{name}", mode)
    os.makedirs(f"{dev}/pts")
    mount("devpts", "devpts", f"{dev}/pts", "newinstance,ptmxmode=0666,mode=620,gid=5")
    os.symlink("pts/ptmx", f"{dev}/ptmx")
    os.makedirs(f"{dev}/shm")
    mount("tmpfs", "shm", f"{dev}/shm", f"size={shm_size},nosuid,nodev,mode=1777")
    for fd, name in enumerate(("stdin", "stdout", "stderr")):
        os.symlink(f"/proc/self/fd/{fd}", f"{dev}/{name}")
    os.symlink("/proc/self/fd", f"{dev}/fd")
    os.makedirs(f"{dev}/disk/by-id")
    for disk in loops:
        node = f"{dev}/{os.path.basename(disk['device'])}"
        os.mknod(node, 0o660 | 0o060000, os.makedev(disk["major"], disk["minor"]))
        os.symlink(f"../../{os.path.basename(node)}", f"{dev}/disk/by-id/{disk['by_id']}")


def main() -> int:
    with open(sys.argv[1]) as handle:
        host = json.load(handle)
    root = host["merged"]
    # Ansible lists only mounts whose source looks like a path, as a disk's would.
    mount(
        "overlay",
        f"/overlay/{host['name']}",
        root,
        f"lowerdir={host['lower']},upperdir={host['upper']},workdir={host['work']}",
    )
    mount("proc", "proc", f"{root}/proc")
    # The kernel is this machine's: its tunables and sysfs are visible but not writable.
    bind(f"{root}/proc/sys", f"{root}/proc/sys")
    mount("sysfs", "sysfs", f"{root}/sys", "ro,nosuid,nodev,noexec")
    make_dev(root, host["disks"], host["shm_size"])
    mount("tmpfs", "run", f"{root}/run", "mode=755,size=64m,nosuid,nodev")
    os.makedirs(f"{root}/run/sshd", mode=0o755)
    os.makedirs(f"{root}/run/lock", mode=0o1777)
    for path in host["shared_read_only"]:
        bind(path, f"{root}{path}")
    socket.sethostname(host["name"])

    os.chdir(root)
    os.makedirs(".oldroot", exist_ok=True)
    sh("pivot_root", ".", ".oldroot")
    os.chdir("/")
    sh("umount", "-l", "/.oldroot")
    os.rmdir("/.oldroot")

    for key in ("/etc/ssh/ssh_host_ed25519_key", "/etc/ssh/ssh_host_ed25519_key.pub"):
        if os.path.exists(key):
            os.unlink(key)
    sh("ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", "/etc/ssh/ssh_host_ed25519_key")
    with open("/etc/ssh/ssh_host_ed25519_key.pub") as handle:
        print(f"HOSTKEY {handle.read().strip()}", flush=True)
    env = {
        "PATH": "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
        "HOSTCHECK_SANDBOX": os.environ["HOSTCHECK_SANDBOX"],
        "LANG": "C.UTF-8",
    }
    os.execve("/usr/bin/tini", ["tini", "-s", "--", "/usr/sbin/sshd", "-D", "-e"], env)
    return 1


if __name__ == "__main__":
    sys.exit(main())
