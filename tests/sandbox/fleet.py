"""Bring sandbox hosts up and down, and find what an earlier, crashed run left behind.

Each host is `unshare --mount --uts --pid --fork` running hostinit.py: its mounts live and
die with its mount namespace, its processes with its PID namespace. What outlives a host
is only what this module creates in the open: the host's folder under .cache/sandbox/fleet
and its loop devices. Every host's first processes carry HOSTCHECK_SANDBOX=<folder>/<host>
(the fleet's folder and the host's name) in its environment, and every loop device is
backed by a file in the fleet's folder, so
teardown finds both even when the state file was never written.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass, field
from pathlib import Path

from tests.sandbox import rootfs, sources

CHECKOUT = Path(__file__).resolve().parents[2]
MARKER = "HOSTCHECK_SANDBOX"
HOSTINIT = Path(__file__).with_name("hostinit.py")
GROUP_VARS = CHECKOUT / "inventory" / "sandbox_group_vars"


def fleet_id(checkout: Path, instance: str = "main") -> str:
    """Different for every checkout and instance: names, addresses and markers never meet."""
    return hashlib.sha256(f"{checkout.resolve()}:{instance}".encode()).hexdigest()[:8]


def address_prefix(fid: str) -> str:
    """127.A.B: each checkout gets its own /24 on loopback, so two never collide."""
    number = int(fid, 16)
    return f"127.{2 + number % 250}.{1 + (number // 250) % 250}"


@dataclass
class Host:
    name: str
    address: str
    port: int
    folder: str
    disks: list[dict] = field(default_factory=list)
    unshare_pid: int | None = None
    init_pid: int | None = None
    host_key: str = ""

    @property
    def disk_paths(self) -> list[str]:
        return [f"/dev/disk/by-id/{d['by_id']}" for d in self.disks]


class Fleet:
    def __init__(
        self,
        checkout: Path = CHECKOUT,
        shm_size: str = "64m",
        disks_per_host: int = 2,
        disk_size: int = 4 * 2**30,
        port: int = 22,
        instance: str = "main",
        log=print,
    ) -> None:
        self.checkout = checkout.resolve()
        self.instance = instance
        self.id = fleet_id(self.checkout, instance)
        self.cache = self.checkout / ".cache" / "sandbox"
        if instance == "main":
            self.folder = self.cache / "fleet"
            self.inventory = self.checkout / "inventory" / "sandbox" / "hosts.yml"
        else:
            self.folder = self.cache / f"fleet-{instance}"
            self.inventory = self.folder / "hosts.yml"
        self.state_file = self.folder / "state.json"
        self.shm_size = shm_size
        self.disks_per_host = disks_per_host
        self.disk_size = disk_size
        self.port = port
        self.log = log

    # --- state ---------------------------------------------------------------------------

    def hosts(self) -> list[Host]:
        if not self.state_file.exists():
            return []
        data = json.loads(self.state_file.read_text())
        return [Host(**h) for h in data["hosts"]]

    def _save(self, hosts: list[Host]) -> None:
        self.folder.mkdir(parents=True, exist_ok=True)
        tmp = self.state_file.with_suffix(".tmp")
        tmp.write_text(json.dumps({"fleet": self.id, "hosts": [asdict(h) for h in hosts]}))
        tmp.replace(self.state_file)

    @property
    def key_file(self) -> Path:
        return self.folder / "id_ed25519"

    @property
    def known_hosts(self) -> Path:
        return self.folder / "known_hosts"

    # --- bring up --------------------------------------------------------------------------

    def up(self, count: int) -> list[Host]:
        if not 1 <= count <= 250:
            raise ValueError(f"HOSTS must be between 1 and 250, got {count}")
        start = time.monotonic()
        self.down(quiet=True)
        lower = rootfs.ensure_rootfs(self.cache, log=self.log)
        self.folder.mkdir(parents=True, exist_ok=True)
        subprocess.run(
            [
                "ssh-keygen",
                "-q",
                "-t",
                "ed25519",
                "-N",
                "",
                "-C",
                f"sandbox-{self.id}",
                "-f",
                str(self.key_file),
            ],
            check=True,
        )
        shared = sources.shared_read_only()
        prefix = address_prefix(self.id)
        hosts = [
            Host(
                name=f"node{i}",
                address=f"{prefix}.{i}",
                port=self.port,
                folder=str(self.folder / f"node{i}"),
            )
            for i in range(1, count + 1)
        ]
        self._save(hosts)  # before anything exists, so a crash from here on is found
        for host in hosts:
            self._prepare(host, lower, shared)
            self._save(hosts)
        for host in hosts:
            self._start(host)
            self._save(hosts)
        with ThreadPoolExecutor(max_workers=min(16, count)) as pool:
            list(pool.map(self._wait_ready, hosts))
        self._save(hosts)
        self.known_hosts.write_text("".join(f"{h.address} {h.host_key}\n" for h in hosts))
        self._write_inventory(hosts)
        self.log(
            f"{count} sandbox hosts up in {time.monotonic() - start:.1f} s; "
            f"inventory: {self.inventory}"
        )
        return hosts

    def _prepare(self, host: Host, lower: Path, shared: list[str]) -> None:
        folder = Path(host.folder)
        upper = folder / "upper"
        for sub in ("upper", "work", "merged", "disks"):
            (folder / sub).mkdir(parents=True, exist_ok=True)
        files = {
            "etc/hostname": f"{host.name}\n",
            "etc/hosts": f"127.0.0.1 localhost\n{host.address} {host.name}\n",
            "etc/ssh/sshd_config.d/10-sandbox.conf": (
                f"ListenAddress {host.address}:{host.port}\n"
                "HostKey /etc/ssh/ssh_host_ed25519_key\n"
                "PasswordAuthentication no\nKbdInteractiveAuthentication no\n"
                "UsePAM yes\nUseDNS no\nMaxStartups 100:30:200\nMaxSessions 100\n"
            ),
            "etc/environment": "".join(
                f'{k}="{v}"\n' for k, v in sources.session_environment(dict(os.environ)).items()
            ),
            "root/.ssh/authorized_keys": self.key_file.with_suffix(".pub").read_text(),
        }
        for relative, text in files.items():
            path = upper / relative
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(text)
        os.chmod(upper / "root", 0o700)
        os.chmod(upper / "root/.ssh", 0o700)
        os.chmod(upper / "root/.ssh/authorized_keys", 0o600)
        for index in range(self.disks_per_host):
            image = folder / "disks" / f"disk{index}.img"
            with open(image, "wb") as handle:
                handle.truncate(self.disk_size)  # sparse: costs no space until written
            device = subprocess.run(
                ["losetup", "--find", "--show", str(image)],
                capture_output=True,
                text=True,
                check=True,
            ).stdout.strip()
            rdev = os.stat(device).st_rdev
            host.disks.append(
                {
                    "device": device,
                    "image": str(image),
                    "major": os.major(rdev),
                    "minor": os.minor(rdev),
                    "by_id": f"nvme-sandbox_{host.name}_disk{index}",
                }
            )
        spec = {
            "name": host.name,
            "lower": str(lower),
            "upper": str(upper),
            "work": str(folder / "work"),
            "merged": str(folder / "merged"),
            "disks": host.disks,
            "shm_size": self.shm_size,
            "shared_read_only": shared,
        }
        (folder / "host.json").write_text(json.dumps(spec, indent=2))

    def _start(self, host: Host) -> None:
        folder = Path(host.folder)
        env = {
            "PATH": "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
            MARKER: f"{self.folder}/{host.name}",
        }
        log = open(folder / "console.log", "wb")  # noqa: SIM115 - the host keeps writing it
        proc = subprocess.Popen(
            [
                "unshare",
                "--mount",
                "--uts",
                "--pid",
                "--fork",
                "--propagation",
                "private",
                sys.executable,
                str(HOSTINIT),
                str(folder / "host.json"),
            ],
            stdin=subprocess.DEVNULL,
            stdout=log,
            stderr=subprocess.STDOUT,
            env=env,
            start_new_session=True,
        )
        log.close()
        host.unshare_pid = proc.pid

    def _wait_ready(self, host: Host, timeout: float = 60.0) -> None:
        console = Path(host.folder) / "console.log"
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if host.init_pid is None and host.unshare_pid:
                host.init_pid = _first_child(host.unshare_pid)
            text = console.read_text(errors="replace") if console.exists() else ""
            for line in text.splitlines():
                if line.startswith("HOSTKEY "):
                    host.host_key = " ".join(line.split()[1:3])
            if host.host_key and _ssh_banner(host.address, host.port):
                return
            if host.unshare_pid and not _alive(host.unshare_pid):
                raise RuntimeError(f"{host.name} died while starting:\n{text[-2000:]}")
            time.sleep(0.05)
        raise RuntimeError(
            f"{host.name}: sshd not answering on {host.address}:{host.port} "
            f"after {timeout:.0f} s; see {console}"
        )

    def _write_inventory(self, hosts: list[Host]) -> None:
        lines = [
            "# Written by tests/sandbox (make sandbox-up); removed by make sandbox-down.",
            "all:",
            "  vars:",
            "    ansible_user: root",
            f"    ansible_ssh_private_key_file: {self.key_file}",
            "    ansible_ssh_common_args: >-",
            f"      -o UserKnownHostsFile={self.known_hosts}",
            "      -o StrictHostKeyChecking=yes -o IdentitiesOnly=yes",
            "    ansible_python_interpreter: /usr/bin/python3",
            "    sandbox: true",
            "  children:",
            "    gpu_nodes:",
            "      hosts:",
        ]
        for host in hosts:
            lines += [
                f"        {host.name}:",
                f"          ansible_host: {host.address}",
                f"          ansible_port: {host.port}",
                f"          sandbox_disks: {json.dumps(host.disk_paths)}",
            ]
        self.inventory.parent.mkdir(parents=True, exist_ok=True)
        self.inventory.write_text("\n".join(lines) + "\n")
        group_vars = self.inventory.parent / "group_vars"
        shutil.rmtree(group_vars, ignore_errors=True)
        shutil.copytree(GROUP_VARS, group_vars)

    def ssh(self, host: Host, command: str, timeout: float = 120.0) -> subprocess.CompletedProcess:
        """Run a command on a host over SSH, as Ansible would reach it."""
        return subprocess.run(
            [
                "ssh",
                "-i",
                str(self.key_file),
                "-o",
                f"UserKnownHostsFile={self.known_hosts}",
                "-o",
                "StrictHostKeyChecking=yes",
                "-o",
                "IdentitiesOnly=yes",
                "-o",
                "BatchMode=yes",
                "-p",
                str(host.port),
                f"root@{host.address}",
                command,
            ],
            capture_output=True,
            text=True,
            timeout=timeout,
            check=False,
        )

    # --- status ----------------------------------------------------------------------------

    def status(self) -> list[dict]:
        rows = []
        for host in self.hosts():
            alive = bool(host.init_pid) and _marker(host.init_pid) == f"{self.folder}/{host.name}"
            rows.append(
                {
                    "name": host.name,
                    "address": f"{host.address}:{host.port}",
                    "init_pid": host.init_pid,
                    "running": alive,
                    "ssh": alive and _ssh_banner(host.address, host.port),
                    "disks": [d["device"] for d in host.disks],
                }
            )
        return rows

    def stop(self, host: Host, timeout: float = 10.0) -> list[int]:
        """Power one host off: SIGKILL its first processes (the PID namespace, its sshd and
        every process in it go with them). Its folder and loop devices stay until down()."""
        mark = f"{self.folder}/{host.name}"
        mine = [pid for pid, found in _marked_processes() if found == mark]
        for pid in mine:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
        deadline = time.monotonic() + timeout
        while any(_alive(pid) for pid in mine) or _ssh_banner(host.address, host.port):
            if time.monotonic() > deadline:
                raise RuntimeError(f"{host.name} still running {timeout:.0f} s after SIGKILL")
            time.sleep(0.05)
        return mine

    # --- tear down -------------------------------------------------------------------------

    def down(self, quiet: bool = False) -> dict:
        """Remove every process, loop device and folder of this fleet; safe to repeat."""
        killed = self._kill_processes()
        detached = self._detach_loops()
        removed = []
        if self.folder.exists():
            for child in sorted(self.folder.iterdir()):
                if child.is_dir():
                    shutil.rmtree(child)
                else:
                    child.unlink()
                removed.append(child.name)
            self.folder.rmdir()
        with contextlib.suppress(FileNotFoundError):
            self.inventory.unlink()
        if self.instance == "main":
            shutil.rmtree(self.inventory.parent / "group_vars", ignore_errors=True)
            with contextlib.suppress(OSError):
                self.inventory.parent.rmdir()
        summary = {"processes": killed, "loop_devices": detached, "removed": removed}
        if not quiet:
            if killed or detached or removed:
                self.log(
                    f"sandbox down: killed {len(killed)} host processes, detached "
                    f"{len(detached)} loop devices, removed {len(removed)} entries"
                )
            else:
                self.log("sandbox down: nothing to do")
        return summary

    def _kill_processes(self) -> list[int]:
        mine = [pid for pid, mark in _marked_processes() if mark.startswith(f"{self.folder}/")]
        for pid in mine:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline and any(_alive(pid) for pid in mine):
            time.sleep(0.02)
        return mine

    def _detach_loops(self) -> list[str]:
        listing = subprocess.run(
            ["losetup", "--list", "--noheadings", "--output", "NAME,BACK-FILE"],
            capture_output=True,
            text=True,
            check=False,
        ).stdout
        prefix = str(self.folder) + "/"
        detached = []
        for line in listing.splitlines():
            parts = line.split(None, 1)
            if len(parts) == 2 and parts[1].strip().removesuffix(" (deleted)").startswith(prefix):
                subprocess.run(["losetup", "--detach", parts[0]], check=False)
                detached.append(parts[0])
        return detached


def _alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as handle:
            return handle.read().split(") ", 1)[1][0] != "Z"
    except (FileNotFoundError, IndexError):
        return False


def _first_child(pid: int) -> int | None:
    try:
        children = Path(f"/proc/{pid}/task/{pid}/children").read_text().split()
    except FileNotFoundError:
        return None
    return int(children[0]) if children else None


def _marker(pid: int) -> str | None:
    try:
        environ = Path(f"/proc/{pid}/environ").read_bytes()
    except (FileNotFoundError, PermissionError, ProcessLookupError):
        return None
    for entry in environ.split(b"\0"):
        if entry.startswith(MARKER.encode() + b"="):
            return entry.split(b"=", 1)[1].decode()
    return None


def _marked_processes() -> list[tuple[int, str]]:
    found = []
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            mark = _marker(int(entry))
            if mark:
                found.append((int(entry), mark))
    return found


def _ssh_banner(address: str, port: int) -> bool:
    try:
        with socket.create_connection((address, port), timeout=1) as conn:
            conn.settimeout(2)
            return conn.recv(64).startswith(b"SSH-2.0-")
    except OSError:
        return False
