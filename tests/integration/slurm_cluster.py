"""A real Slurm cluster (Debian's slurm-wlm 22.05) on sandbox hosts: slurmctld on node1, slurmd
on every host, one MUNGE key and one slurm.conf everywhere.

The hosts share this machine's network namespace: each slurmd has a port of its own, and the
ports come from the fleet's id, so two clusters (pytest workers) never meet. slurmctld binds
node1's address only; slurmd and srun bind every address, as the daemons reach each other
from 127.0.0.1 and a step's I/O connects back to whichever address srun's request came from.
"""

from __future__ import annotations

import base64
import os
import re
import shlex
import socket
import subprocess
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor

from tests.paths import MACHINE_CACHE
from tests.sandbox import rootfs
from tests.sandbox.fleet import Fleet, Host
from tests.sandbox.oskinds import KINDS

PACKAGES = ("slurmd", "slurm-client", "munge")
CONTROLLER_PACKAGES = ("slurmctld",)
CONF = "/etc/slurm/slurm.conf"
# what Debian's packages make, owned by slurm
STATE_DIR = "/var/lib/slurm/slurmctld"
SPOOL_DIR = "/var/lib/slurm/slurmd"
LOG_DIR = "/var/log/slurm"
# A stopped slurmd is DOWN+NOT_RESPONDING within about 20 s; a client facing a stopped
# slurmctld gives up after MessageTimeout - 1 s (Debian's default, 10, would make it 9 s).
TIMEOUTS = {
    "SlurmdTimeout": "10",
    "SlurmctldTimeout": "10",
    "MessageTimeout": "5",
    "TCPTimeout": "2",
    "KillWait": "5",
    "InactiveLimit": "0",
    "MinJobAge": "10",
}
APT = "DEBIAN_FRONTEND=noninteractive apt-get -q -o Dpkg::Options::=--force-unsafe-io"
_KEY = re.compile(r"(?:^|\s)([A-Za-z][A-Za-z0-9_]*)=")
_REASON = re.compile(r"(.*) \[([^@\]\s]+)@([^\]\s]+)\]")


class SlurmError(RuntimeError):
    pass


def cluster_port(fleet_id: str) -> int:
    """SlurmctldPort of a fleet's cluster; node N's slurmd listens on it + 1 + N (6819, 6820,
    6821 for the port Slurm defaults to). Below the ephemeral range, 8 ports per fleet."""
    return 6817 + 8 * (int(fleet_id, 16) % 3000)


def parse_node(line: str) -> dict[str, str]:
    """One line of `scontrol show node NAME -o` as a dict. Values may hold spaces (OS=Linux 6.1
    #1 SMP ...). Reason comes last and is free text: its ` [user@time]` goes to ReasonUser and
    ReasonTime, and Reason is "" when the node has none."""
    head, found, reason = line.strip().partition(" Reason=")
    keys = list(_KEY.finditer(head))
    fields = {
        key.group(1): head[key.end() : after.start() if after else len(head)].strip()
        for key, after in zip(keys, [*keys[1:], None])
    }
    fields["Reason"] = reason
    stamped = _REASON.fullmatch(reason) if found else None
    if stamped:
        fields["Reason"], fields["ReasonUser"], fields["ReasonTime"] = stamped.groups()
    return fields


class SlurmCluster:
    """Slurm on a fleet whose hosts are up; install() brings it up, the helpers run on node1."""

    def __init__(
        self,
        fleet: Fleet,
        extra_lines: Sequence[str] = (),
        port: int | None = None,
        log: Callable[[str], object] | None = None,
    ) -> None:
        self.fleet = fleet
        self.hosts = fleet.hosts()
        if not self.hosts:
            raise SlurmError("the fleet has no hosts: bring it up first")
        self.controller = self.hosts[0]
        self.extra_lines = list(extra_lines)
        self.port = port or cluster_port(fleet.id)
        self.log = log or fleet.log
        self.timings: dict[str, float] = {}
        self.deb_cache = MACHINE_CACHE / "slurm" / f"debs-{rootfs.cache_key(KINDS['debian12'])}.tar"

    # --- commands --------------------------------------------------------------------------

    def host(self, name: str) -> Host:
        for host in self.hosts:
            if host.name == name:
                return host
        raise KeyError(f"no host {name} (the fleet has {', '.join(h.name for h in self.hosts)})")

    def run(
        self,
        command: str,
        host: Host | str | None = None,
        timeout: float = 60.0,
        check: bool = True,
    ) -> subprocess.CompletedProcess:
        """A shell command on a host (node1 unless named); check raises with its output."""
        target = self.host(host) if isinstance(host, str) else host or self.controller
        done = self.fleet.ssh(target, command, timeout=timeout)
        if check and done.returncode != 0:
            output = f"{done.stdout.strip()}\n{done.stderr.strip()}".strip()
            raise SlurmError(f"{target.name}: {command!r} exited {done.returncode}: {output}")
        return done

    def on_all(
        self, command: str | Callable[[Host], str], timeout: float = 60.0
    ) -> list[subprocess.CompletedProcess]:
        """The command on every host at once (a function of the host, or the same for all)."""

        def one(host: Host) -> subprocess.CompletedProcess:
            return self.run(command(host) if callable(command) else command, host, timeout)

        with ThreadPoolExecutor(max_workers=len(self.hosts)) as pool:
            return list(pool.map(one, self.hosts))

    def ssh_bytes(self, host: Host, command: str, data: bytes | None = None) -> bytes:
        """As fleet.ssh_bytes, raising SlurmError when the command fails."""
        done = self.fleet.ssh_bytes(host, command, data)
        if done.returncode != 0:
            error = done.stderr.decode(errors="replace").strip()
            raise SlurmError(f"{host.name}: {command!r} exited {done.returncode}: {error}")
        return done.stdout

    # --- bringing the cluster up -----------------------------------------------------------

    def install(self, timeout: float = 60.0) -> SlurmCluster:
        """Packages, MUNGE key, slurm.conf and daemons; returns when every node is idle."""
        self._check_ports_free()
        self._timed("packages", self.install_packages)
        self._timed("daemons", lambda: self._start(timeout))
        return self

    def _timed(self, step: str, action: Callable[[], object]) -> None:
        start = time.monotonic()
        action()
        self.timings[step] = time.monotonic() - start
        self.log(f"slurm {step}: {self.timings[step]:.1f} s")

    def packages_for(self, host: Host) -> tuple[str, ...]:
        return PACKAGES + (CONTROLLER_PACKAGES if host is self.controller else ())

    def install_packages(self) -> None:
        """dpkg -i of the .deb files an earlier run kept in the machine-wide cache (one set per
        root file system), else apt-get update and install, keeping the files. Both took 4-5 s
        with this machine lightly loaded; busy (load 6-9 on 2 CPUs), apt-get took 20-25 s, dpkg
        5-11."""
        cached = self.deb_cache.exists()
        if cached:
            debs = self.deb_cache.read_bytes()
            with ThreadPoolExecutor(max_workers=len(self.hosts)) as pool:
                if all(pool.map(lambda host: self._install_cached(host, debs), self.hosts)):
                    return
            self.deb_cache.unlink(missing_ok=True)  # the next run keeps a fresh set
        # what dpkg -i left half-installed is completed first
        repair = f"{APT} install -y --fix-broken --no-install-recommends >/dev/null && "
        self.on_all(
            lambda host: (
                f"{APT} update >/dev/null && {repair if cached else ''}{APT} install -y "
                f"--no-install-recommends {' '.join(self.packages_for(host))} >/dev/null"
            ),
            timeout=600,
        )
        if not cached:
            self._keep_debs()

    def _install_cached(self, host: Host, debs: bytes) -> bool:
        others = [p for p in PACKAGES + CONTROLLER_PACKAGES if p not in self.packages_for(host)]
        skip = f" | grep -Ev '^({'|'.join(others)})_'" if others else ""
        try:
            self.ssh_bytes(
                host,
                "set -e; rm -rf /var/tmp/slurm-debs; mkdir /var/tmp/slurm-debs; "
                "cd /var/tmp/slurm-debs; tar xf -; DEBIAN_FRONTEND=noninteractive "
                f"dpkg -i --force-unsafe-io $(ls *.deb{skip}) >/dev/null; "
                "cd /; rm -rf /var/tmp/slurm-debs",
                debs,
            )
        except SlurmError as error:
            self.log(f"slurm: cached packages refused, installing with apt-get: {error}")
            return False
        return True

    def _keep_debs(self) -> None:
        try:
            tar = self.ssh_bytes(self.controller, "cd /var/cache/apt/archives && tar cf - *.deb")
        except SlurmError as error:  # apt was told to remove them (as in Docker images)
            self.log(f"slurm: no .deb files to keep: {error}")
            return
        self.deb_cache.parent.mkdir(parents=True, exist_ok=True)
        partial = self.deb_cache.with_name(f".{self.deb_cache.name}.{os.getpid()}")
        partial.write_bytes(tar)
        partial.replace(self.deb_cache)

    def conf_text(self, extra_lines: Sequence[str] = ()) -> str:
        """slurm.conf: the base settings (an extra line with the same key replaces one), the
        other extra lines, every host as a node, one partition."""
        head = self.controller
        settings = {
            "ClusterName": "sandbox",
            "SlurmctldHost": f"{head.name}({head.address})",
            "SlurmctldPort": str(self.port),
            "CommunicationParameters": "NoCtldInAddrAny",
            "SlurmUser": "slurm",
            "AuthType": "auth/munge",
            "CredType": "cred/munge",
            "ProctrackType": "proctrack/linuxproc",
            "TaskPlugin": "task/none",
            "JobAcctGatherType": "jobacct_gather/none",
            "SelectType": "select/linear",
            "SchedulerType": "sched/builtin",
            # A job waiting for a node that comes back (resumed, responding again) starts at
            # the next scheduling pass: every 2 s here, not Slurm's 60 s, which outlasts srun's
            # 30 s in the tests.
            "SchedulerParameters": "sched_interval=2",
            "MpiDefault": "none",
            "ReturnToService": "2",
            "StateSaveLocation": STATE_DIR,
            "SlurmdSpoolDir": SPOOL_DIR,
            "SlurmctldPidFile": "/run/slurmctld.pid",
            "SlurmdPidFile": "/run/slurmd.pid",
            **TIMEOUTS,
        }
        others = []
        for line in extra_lines:
            key, sep, value = line.partition("=")
            known = next((k for k in settings if k.lower() == key.strip().lower()), None)
            if sep and known:
                settings[known] = value.strip()
            else:
                others.append(line)
        lines = [f"{key}={value}" for key, value in settings.items()]
        lines += others
        lines += [
            f"NodeName={h.name} NodeAddr={h.address} Port={self.port + 1 + n} CPUs=1 State=UNKNOWN"
            for n, h in enumerate(self.hosts, start=1)
        ]
        lines.append("PartitionName=batch Nodes=ALL Default=YES MaxTime=INFINITE State=UP")
        return "\n".join(lines) + "\n"

    def _conf_command(self) -> str:
        return f"cat > {CONF} <<'SLURM_CONF'\n{self.conf_text(self.extra_lines)}SLURM_CONF\n"

    def _check_ports_free(self) -> None:
        for port in range(self.port, self.port + 2 + len(self.hosts)):
            with socket.socket() as probe:
                # as the daemons bind: connections left in TIME_WAIT do not count
                probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
                try:
                    probe.bind(("0.0.0.0", port))
                except OSError as error:
                    raise SlurmError(
                        f"port {port} of this cluster ({self.port}..) is taken ({error}): "
                        "another Slurm on this machine (pass port=), or installed already"
                    ) from None

    def _start(self, timeout: float) -> None:
        """The key and slurm.conf everywhere, munge restarted, slurmctld and slurmd started
        (the packages enabled them), all hosts at once; slurmctld asks every node to register
        when it starts, so a slurmd that starts first is not left out."""
        key = base64.b64encode(os.urandom(128)).decode()
        self.on_all(
            lambda host: (
                f"echo {key} | base64 -d > /etc/munge/munge.key && "
                "chown munge:munge /etc/munge/munge.key && chmod 0400 /etc/munge/munge.key && "
                f"install -d -o slurm -g slurm {STATE_DIR} {SPOOL_DIR} {LOG_DIR} && "
                f"{self._conf_command()}"
                "systemctl restart munge && "
                + ("systemctl restart slurmctld && " if host is self.controller else "")
                + "systemctl restart slurmd"
            )
        )
        self.wait_idle(timeout=timeout)

    def wait_idle(self, names: Sequence[str] | None = None, timeout: float = 60.0) -> float:
        """Until `sinfo -N` shows the nodes (all unless named) idle; how long that took."""
        wanted = list(names or [h.name for h in self.hosts])
        return self._wait_sinfo(
            lambda states: all(states.get(name) == "idle" for name in wanted),
            f"nodes {', '.join(wanted)} not idle",
            timeout,
        )

    def wait_registered(self, timeout: float = 30.0) -> float:
        """Until slurmctld answers and no node is UNKNOWN to it; how long that took."""
        return self._wait_sinfo(
            lambda states: bool(states) and not any("unknown" in s for s in states.values()),
            "nodes not registered",
            timeout,
        )

    def _wait_sinfo(
        self, ready: Callable[[dict[str, str]], bool], what: str, timeout: float
    ) -> float:
        start = time.monotonic()
        seen = "nothing (no answer from the host)"
        for code, output in self.rounds("sinfo -N -h -o '%N %T'", timeout):
            states = dict(line.split(None, 1) for line in output.splitlines() if " " in line)
            if code == 0 and ready(states):
                return time.monotonic() - start
            seen = output.strip()
        raise SlurmError(
            f"{what} after {timeout:.0f} s; sinfo on {self.controller.name}:\n{seen}\n"
            + self.journals()
        )

    def rounds(
        self, command: str, timeout: float, interval: float = 0.25
    ) -> Iterator[tuple[int, str]]:
        """The command on node1 every `interval` s, in one SSH session (one login per wait,
        not one per look): each round's exit code and output (stdout and stderr together), as
        they come, until the caller stops or `timeout` s have passed."""
        script = (
            f"while :; do out=$({command} 2>&1); "
            f'echo "$? $(printf %s "$out" | base64 -w0)"; sleep {interval:g}; done'
        )
        process = subprocess.Popen(
            self.fleet.ssh_argv(self.controller, script),
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            text=True,
        )
        deadline = threading.Timer(timeout, process.kill)
        deadline.start()
        try:
            for line in process.stdout:
                code, _, encoded = line.strip().partition(" ")
                yield int(code), base64.b64decode(encoded).decode(errors="replace")
        finally:
            deadline.cancel()
            process.kill()
            process.wait()

    def journals(self, lines: int = 30) -> str:
        """The last journal lines of munge and the Slurm daemons on every host."""
        parts = []
        for host in self.hosts:
            units = "-u munge -u slurmd" + (" -u slurmctld" if host is self.controller else "")
            done = self.run(
                f"journalctl --no-pager -o short-precise -n {lines} {units}", host, check=False
            )
            parts.append(f"--- journal of {host.name}\n{done.stdout.strip()}")
        return "\n".join(parts)

    # --- nodes and jobs --------------------------------------------------------------------

    def node(self, name: str) -> dict[str, str]:
        """`scontrol show node NAME -o` on node1, parsed (parse_node)."""
        return parse_node(self.run(f"scontrol show node {shlex.quote(name)} -o").stdout)

    def state(self, name: str) -> str:
        """IDLE, IDLE+DRAIN, DOWN+NOT_RESPONDING, ..."""
        return self.node(name)["State"]

    def drain(self, name: str, reason: str) -> None:
        self.run(
            f"scontrol update NodeName={shlex.quote(name)} State=DRAIN Reason={shlex.quote(reason)}"
        )

    def resume(self, name: str) -> None:
        self.run(f"scontrol update NodeName={shlex.quote(name)} State=RESUME")

    def wait_for(
        self,
        name: str,
        predicate: Callable[[dict[str, str]], bool],
        timeout: float = 30.0,
        interval: float = 0.25,
    ) -> float:
        """Look at node(name) every `interval` s until predicate(node) holds; how long that
        took. Errors (the controller down) count as not yet."""
        start = time.monotonic()
        last = "nothing (no answer from the host)"
        command = f"scontrol show node {shlex.quote(name)} -o"
        for code, output in self.rounds(command, timeout, interval):
            if code != 0:
                last = f"{command!r} exited {code}: {output.strip()}"
                continue
            seen = parse_node(output)
            if predicate(seen):
                return time.monotonic() - start
            last = f"State={seen.get('State')} Reason={seen.get('Reason')!r}"
        raise SlurmError(f"{name}: not as awaited after {timeout:.0f} s; last seen {last}")

    def srun(self, args: str | Sequence[str], timeout: float = 30.0) -> subprocess.CompletedProcess:
        """srun ARGS on node1, killed after timeout (exit 124); not checked."""
        line = args if isinstance(args, str) else shlex.join(args)
        return self.run(f"timeout {timeout:g} srun {line}", timeout=timeout + 15, check=False)

    # --- configuration and daemons ---------------------------------------------------------

    def reconfigure(self, extra_lines: Sequence[str], restart: bool = False) -> None:
        """slurm.conf with these extra lines (instead of earlier ones) on every host, then
        `scontrol reconfigure`: enough for HealthCheckProgram, -Interval and -NodeState. With
        restart, every daemon restarts and every node has registered again on return (ports,
        nodes, authentication need that)."""
        self.extra_lines = list(extra_lines)
        self.on_all(self._conf_command())
        if restart:
            self.run("systemctl restart slurmctld")
            self.on_all("systemctl restart slurmd")
            self.wait_registered()
        else:
            self.run("scontrol reconfigure")

    def restart_slurmd(self, *names: str) -> None:
        """Restart slurmd on these hosts (all unless named); it runs HealthCheckProgram once
        at start, before it registers."""
        for name in names or [h.name for h in self.hosts]:
            self.run("systemctl restart slurmd", name)

    def stop_controller(self) -> None:
        self.run("systemctl stop slurmctld")

    def start_controller(self, timeout: float = 30.0) -> float:
        """slurmctld started; returns (how long that took) once every node has registered
        again (nodes are UNKNOWN to a new slurmctld for about 5 s)."""
        start = time.monotonic()
        self.run("systemctl start slurmctld")
        self.wait_registered(timeout)
        return time.monotonic() - start


def start_cluster(
    fleet: Fleet, extra_lines: Sequence[str] = (), timeout: float = 60.0
) -> SlurmCluster:
    """SlurmCluster(fleet, extra_lines).install(): every node idle."""
    return SlurmCluster(fleet, extra_lines).install(timeout=timeout)
