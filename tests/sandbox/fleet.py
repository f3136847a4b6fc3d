"""Bring sandbox hosts up and down, and find what an earlier, crashed run left behind.

Each host is `unshare --mount` running hostinit.py, which mounts the host's root and becomes
systemd-nspawn booting systemd (tests/sandbox/hostinit.py): its mounts live and die with its
mount namespaces, its processes with its PID namespace. What outlives a host is only what
this module creates in the open: the host's folder under .cache/sandbox/fleet, its loop
devices and its cgroups (hostcheck-sandbox-<fleet id>/<host>). systemd-nspawn and the host's
systemd carry HOSTCHECK_SANDBOX=<folder>/<host> (the fleet's folder and the host's name) in
their environment, every loop device is backed by a file in the fleet's folder, and the
cgroups are named by the fleet's id, so teardown finds all three even when the state file was
never written.
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

from tests import costs
from tests.paths import MACHINE_CACHE
from tests.sandbox import budget, oskinds, rootfs, sources

CHECKOUT = Path(__file__).resolve().parents[2]
MARKER = "HOSTCHECK_SANDBOX"
HOSTINIT = Path(__file__).with_name("hostinit.py")
GROUP_VARS = CHECKOUT / "inventory" / "sandbox_group_vars"
ZIPIMPORT_CACHE = Path(__file__).with_name("zipimport_cache.py")
SYSTEM_PYTHON_PATH = "usr/lib/python3/dist-packages"  # every kind's system Python reads it
# ccache (in every root, tests/sandbox/rootfs.py): the compilers a host has are linked in
# /usr/lib/ccache, first in PATH, and all hosts share one cache, so the same compile runs once
# for every host and fleet.
CCACHE_FOLDER = "/var/cache/sandbox-ccache"
CCACHE_ENVIRONMENT = {
    "PATH": "/usr/lib/ccache:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
    "CCACHE_DIR": CCACHE_FOLDER,
    # pip builds in a new /tmp folder each time: paths relative to it, the folder not hashed
    "CCACHE_BASEDIR": "/tmp",
    "CCACHE_NOHASHDIR": "1",
}


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
    os: str = "debian12"
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
        os_kinds: list[oskinds.OsKind] | str | None = None,
        byte_compile: bool = False,
        root_space: str | None = None,
        layers: dict[str, Path] | None = None,
        log=print,
    ) -> None:
        self.checkout = checkout.resolve()
        self.instance = instance
        self.id = fleet_id(self.checkout, instance)
        self.cache = self.checkout / ".cache" / "sandbox"
        # root file systems, ccache and sources files: shared by every checkout on this machine
        self.shared_cache = MACHINE_CACHE / "sandbox"
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
        self.os_kinds = oskinds.parse(os_kinds) if isinstance(os_kinds, str) else os_kinds
        # pip byte-compiling what it installs costs a third of its CPU (torch: 14 s, 5 s
        # without); only tests that look at the files Python writes need it
        self.byte_compile = byte_compile
        # a size ("600M"): each host's root gets a file system of its own that small (its
        # overlayfs upper and work dirs on a tmpfs), so a test can fill it without filling
        # this machine's disk; None: the root writes to this machine's disk
        self.root_space = root_space
        # a converged layer per host name (tests/sandbox/layers.py), between the host's own
        # changes and its OS kind's root
        self.layers = layers or {}
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
        kinds = oskinds.for_hosts(count, self.os_kinds)
        distinct = list(dict.fromkeys(kinds))
        with ThreadPoolExecutor(max_workers=len(distinct)) as pool:
            built = pool.map(
                lambda k: rootfs.ensure_rootfs(self.shared_cache, k, log=self.log), distinct
            )
            roots = dict(zip([k.name for k in distinct], built))
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
        (self.shared_cache / "ccache").mkdir(parents=True, exist_ok=True)
        prefix = address_prefix(self.id)
        hosts = [
            Host(
                name=f"node{i}",
                address=f"{prefix}.{i}",
                port=self.port,
                folder=str(self.folder / f"node{i}"),
                os=kind.name,
            )
            for i, kind in enumerate(kinds, start=1)
        ]
        self._save(hosts)  # before anything exists, so a crash from here on is found
        for host in hosts:
            lower = str(roots[host.os])
            if host.name in self.layers:
                lower = f"{self.layers[host.name]}:{lower}"
            self._prepare(host, lower, shared)
            self._save(hosts)
        # a started host carries its marker at once, so the next fleet's booking counts it
        with budget.booking(running_hosts, count, log=self.log):
            for host in hosts:
                self._start(host)
                self._save(hosts)
        self.known_hosts.write_text("".join(f"{h.address} {h.host_key}\n" for h in hosts))
        with ThreadPoolExecutor(max_workers=min(16, count)) as pool:
            # a host on a converged layer boots as a converged host reboots: its fstab decides
            list(
                pool.map(lambda h: self._wait_ready(h, first_boot=h.name not in self.layers), hosts)
            )
        self._save(hosts)
        self._write_inventory(hosts)
        self.log(
            f"{count} sandbox hosts up in {time.monotonic() - start:.1f} s; "
            f"inventory: {self.inventory}"
        )
        return hosts

    def changes_of(self, host: Host) -> Path:
        """A host's own changes to its root: its overlay's upper folder."""
        return Path(host.folder) / ("root-space" if self.root_space else "") / "upper"

    def _prepare(self, host: Host, lower: str, shared: list[str]) -> None:
        folder = Path(host.folder)
        changes = folder
        if self.root_space:
            # df / on the host shows this size (overlayfs reports its upper dir's file system)
            changes = folder / "root-space"
            changes.mkdir(parents=True, exist_ok=True)
            subprocess.run(
                [
                    *("mount", "-t", "tmpfs", "-o", f"size={self.root_space},mode=0755"),
                    *("sandbox-root-space", str(changes)),
                ],
                check=True,
            )
        upper = changes / "upper"
        for sub in (changes / "upper", changes / "work", folder / "merged", folder / "disks"):
            sub.mkdir(parents=True, exist_ok=True)
        kind = oskinds.KINDS[host.os]
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
        files = {
            "etc/hostname": f"{host.name}\n",
            "etc/hosts": f"127.0.0.1 localhost\n{host.address} {host.name}\n",
            "etc/ssh/sshd_config.d/10-sandbox.conf": (
                f"ListenAddress {host.address}:{host.port}\n"
                "HostKey /etc/ssh/ssh_host_ed25519_key\n"
                "PasswordAuthentication no\nKbdInteractiveAuthentication no\n"
                "UsePAM yes\nUseDNS no\nMaxStartups 100:30:200\nMaxSessions 100\n"
                # the default post-quantum key exchange doubles a login's CPU (0.27 against
                # 0.13 s, both ends), and the suite logs in thousands of times on one machine
                "KexAlgorithms curve25519-sha256,curve25519-sha256@libssh.org\n"
            ),
            "etc/environment": "".join(
                f'{k}="{v}"\n'
                for k, v in {
                    **sources.session_environment(dict(os.environ), self.byte_compile),
                    **CCACHE_ENVIRONMENT,
                }.items()
            ),
            "root/.ssh/authorized_keys": self.key_file.with_suffix(".pub").read_text(),
            # the host's /dev is its own: udev's names of its disks, made at boot
            "etc/tmpfiles.d/sandbox-disks.conf": "".join(
                f"L /dev/disk/by-id/{disk['by_id']} - - - - ../../{Path(disk['device']).name}\n"
                for disk in host.disks
            ),
            # Ansible's modules compile their module_utils once per host, not once per task
            f"{SYSTEM_PYTHON_PATH}/sandbox_zipimport_cache.py": ZIPIMPORT_CACHE.read_text(),
            f"{SYSTEM_PYTHON_PATH}/sandbox-zipimport-cache.pth": "import sandbox_zipimport_cache\n",
        }
        for relative, text in files.items():
            path = upper / relative
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(text)
        os.chmod(upper / "root", 0o700)
        os.chmod(upper / "root/.ssh", 0o700)
        os.chmod(upper / "root/.ssh/authorized_keys", 0o600)
        host_key = upper / "etc/ssh/ssh_host_ed25519_key"
        subprocess.run(
            ["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C", host.name, "-f", str(host_key)],
            check=True,
        )
        host.host_key = " ".join(host_key.with_suffix(".pub").read_text().split()[:2])
        debian_sources = str(sources.DEBIAN_SOURCES)
        binds = [
            (
                str(sources.debian_sources_file(kind.suite, self.shared_cache))
                if path == debian_sources
                else path,
                path,
            )
            for path in shared
        ]
        spec = {
            "name": host.name,
            "lower": lower,
            "upper": str(upper),
            "work": str(changes / "work"),
            "merged": str(folder / "merged"),
            "disks": host.disks,
            "binds": binds,
            "binds_rw": [(str(self.shared_cache / "ccache"), CCACHE_FOLDER)],
            "marker": f"{MARKER}={self.folder}/{host.name}",
            "cgroups": [str(Path(root) / host.name) for root in self._cgroup_roots()],
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

    def _wait_ready(self, host: Host, timeout: float = 90.0, first_boot: bool = True) -> None:
        """sshd answers, systemd has finished booting with no failed unit, and on the first
        boot /dev/shm has the fleet's size (systemd-nspawn mounts its own; later boots keep
        what the host's fstab says, as systemd-remount-fs applies it)."""
        console = Path(host.folder) / "console.log"
        deadline = time.monotonic() + timeout
        while not _ssh_banner(host.address, host.port):
            if host.unshare_pid and not _alive(host.unshare_pid):
                text = console.read_text(errors="replace") if console.exists() else ""
                hint = (
                    "\nAll hosts share this machine's inotify instances "
                    "(fs.inotify.max_user_instances): fewer hosts at once, or a higher limit."
                    if "Too many open files" in text
                    else ""
                )
                raise RuntimeError(f"{host.name} died while starting:\n{text[-2000:]}{hint}")
            if time.monotonic() > deadline:
                raise RuntimeError(
                    f"{host.name}: sshd not answering on {host.address}:{host.port} "
                    f"after {timeout:.0f} s; see {console}"
                )
            time.sleep(0.05)
        host.init_pid = _container_init(f"{self.folder}/{host.name}")
        booted = self.ssh(
            host,
            f"timeout {max(1, int(deadline - time.monotonic()))} systemctl is-system-running "
            "--wait; systemctl --failed --no-legend --plain"
            + (f"; mount -o remount,size={self.shm_size} /dev/shm" if first_boot else ""),
        )
        state = booted.stdout.split("\n", 1)[0].strip()
        if state != "running" or booted.returncode != 0:
            raise RuntimeError(
                f"{host.name} ({host.os}) booted into state {state!r}: "
                f"{booted.stdout.strip()} {booted.stderr.strip()}"
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
            "    sandbox: true",
            # hostcheck from this checkout; its wheels and pillow-simd's in the machine-wide
            # cache (keyed by source tree, and by OS, Python and CPU flags), shared by all runs
            '    hostcheck_wheel: ""',
            f"    hostcheck_build_source: {self.checkout}",
            f"    hostcheck_build_cache: {MACHINE_CACHE / 'hostcheck-wheels'}",
            f"    pillow_simd_wheel_cache: {MACHINE_CACHE / 'pillow_simd' / 'wheels'}",
            "  children:",
            "    gpu_nodes:",
            "      hosts:",
        ]
        for host in hosts:
            kind = oskinds.KINDS[host.os]
            lines += [
                f"        {host.name}:",
                f"          ansible_host: {host.address}",
                f"          ansible_port: {host.port}",
                f"          ansible_python_interpreter: {kind.python}",
                f"          sandbox_os: {kind.name}",
                f"          sandbox_disks: {json.dumps(host.disk_paths)}",
            ]
        # one group per OS kind as well (os_debian12, os_rocky9, ...)
        for kind in dict.fromkeys(host.os for host in hosts):
            lines += [f"    os_{kind}:", "      hosts:"]
            lines += [f"        {host.name}:" for host in hosts if host.os == kind]
        self.inventory.parent.mkdir(parents=True, exist_ok=True)
        self.inventory.write_text("\n".join(lines) + "\n")
        group_vars = self.inventory.parent / "group_vars"
        shutil.rmtree(group_vars, ignore_errors=True)
        shutil.copytree(GROUP_VARS, group_vars)

    def ssh_argv(self, host: Host, command: str) -> list[str]:
        """The ssh command line that runs a command on a host, as Ansible would reach it (each
        one a login of its own: counted in the cost ledger's ssh_logins)."""
        costs.SSH_LOGINS[0] += 1
        return [
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
        ]

    def ssh(self, host: Host, command: str, timeout: float = 120.0) -> subprocess.CompletedProcess:
        """Run a command on a host over SSH, as Ansible would reach it."""
        return subprocess.run(
            self.ssh_argv(host, command),
            capture_output=True,
            text=True,
            timeout=timeout,
            check=False,
        )

    def ssh_bytes(
        self, host: Host, command: str, data: bytes | None = None, timeout: float = 300.0
    ) -> subprocess.CompletedProcess:
        """As ssh, with bytes in (data on the command's standard input) and out."""
        return subprocess.run(
            self.ssh_argv(host, command),
            input=data,
            capture_output=True,
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
                    "os": host.os,
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
        mine = _kill_marked(lambda found: found == mark, timeout)
        deadline = time.monotonic() + timeout
        while _ssh_banner(host.address, host.port):
            if time.monotonic() > deadline:
                raise RuntimeError(f"{host.name} still running {timeout:.0f} s after SIGKILL")
            time.sleep(0.05)
        return mine

    def reboot(self, host: Host, timeout: float = 60.0) -> None:
        """`systemctl reboot` on the host: its systemd stops every service and exits, which
        ends systemd-nspawn; the host then boots again from the same folder and disks."""
        self.ssh(host, "systemctl reboot", timeout=30)
        mark = f"{self.folder}/{host.name}"
        deadline = time.monotonic() + timeout
        while any(found == mark for _, found in _marked_processes()):
            if time.monotonic() > deadline:
                raise RuntimeError(f"{host.name} still running {timeout:.0f} s after its reboot")
            time.sleep(0.1)
        self.power_on(host)

    def power_on(self, host: Host) -> None:
        """Boot a host stopped by stop() or its own reboot again, from the same folder and
        disks, and wait until its systemd is running."""
        hosts = self.hosts()
        host.init_pid = None
        self._start(host)
        self._wait_ready(host, first_boot=False)
        self._save([host if h.name == host.name else h for h in hosts])

    # --- tear down -------------------------------------------------------------------------

    def down(self, quiet: bool = False) -> dict:
        """Remove every process, loop device and folder of this fleet; safe to repeat."""
        killed = self._kill_processes()
        detached = self._detach_loops()
        self._unmount()
        self._remove_cgroups()
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

    def _cgroup_roots(self) -> list[Path]:
        """hostcheck-sandbox-<fleet id> under this process's cgroup, in each hierarchy that
        systemd-nspawn uses (the named systemd one and cgroup2)."""
        roots = []
        for line in Path("/proc/self/cgroup").read_text().splitlines():
            number, controllers, path = line.split(":", 2)
            if controllers == "name=systemd":
                mount = Path("/sys/fs/cgroup/systemd")
            elif number == "0" and Path("/sys/fs/cgroup/unified/cgroup.procs").exists():
                mount = Path("/sys/fs/cgroup/unified")
            elif number == "0":
                mount = Path("/sys/fs/cgroup")
            else:
                continue
            if (mount / "cgroup.procs").exists():
                roots.append(mount / path.lstrip("/") / f"hostcheck-sandbox-{self.id}")
        return roots

    def _remove_cgroups(self) -> list[str]:
        removed = []
        for root in self._cgroup_roots():
            if not root.exists():
                continue
            deadline = time.monotonic() + 10
            while root.exists():
                for folder in [*sorted(root.rglob("*"), key=lambda p: -len(p.parts)), root]:
                    if folder.is_dir():
                        with contextlib.suppress(OSError):
                            folder.rmdir()
                if root.exists() and time.monotonic() > deadline:
                    raise RuntimeError(f"cgroup {root} still in use 10 s after SIGKILL")
                time.sleep(0.05 * root.exists())
            removed.append(str(root))
        return removed

    def _kill_processes(self) -> list[int]:
        return _kill_marked(lambda mark: mark.startswith(f"{self.folder}/"), timeout=30)

    def _unmount(self) -> list[str]:
        """Unmount what _prepare mounted under the fleet's folder (root_space's tmpfs), found
        in this machine's mount table, so a crashed run's mounts go too (deepest first)."""
        prefix = str(self.folder) + "/"
        mounted = []
        for line in Path("/proc/self/mountinfo").read_text().splitlines():
            point = line.split()[4].replace("\\040", " ")
            if point.startswith(prefix):
                mounted.append(point)
        for point in sorted(set(mounted), key=lambda p: -len(p)):
            subprocess.run(["umount", "--lazy", point], check=False)
        return mounted

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


def _kill_marked(chosen, timeout: float = 10.0) -> list[int]:
    """SIGKILL every process whose marker is chosen, again and again until none is left: a
    host caught starting (systemd-nspawn forking its container) can fork a marked child
    after one listing, and that child would outlive a single pass."""
    killed: list[int] = []
    deadline = time.monotonic() + timeout
    while True:
        mine = [pid for pid, mark in _marked_processes() if chosen(mark) and _alive(pid)]
        if not mine:
            return killed
        if time.monotonic() > deadline:
            raise RuntimeError(f"processes {mine} still running {timeout:.0f} s after SIGKILL")
        for pid in mine:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
        killed += [pid for pid in mine if pid not in killed]
        time.sleep(0.02)


def running_hosts() -> int:
    """Sandbox hosts running on this machine, of every fleet and checkout (their markers)."""
    return len({mark for _, mark in _marked_processes()})


def _alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as handle:
            return handle.read().split(") ", 1)[1][0] != "Z"
    except (FileNotFoundError, IndexError):
        return False


def _container_init(mark: str) -> int | None:
    """The host's systemd: the process with the host's marker that is PID 1 of its namespace."""
    for pid, found in _marked_processes():
        if found != mark:
            continue
        try:
            status = Path(f"/proc/{pid}/status").read_text()
        except OSError:
            continue
        for line in status.splitlines():
            if line.startswith("NSpid:") and line.split()[-1] == "1" and len(line.split()) > 2:
                return pid
    return None


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
