"""Acting on Slurm: read the node, drain it with hostcheck's own reason, resume only what
hostcheck drained. Every scontrol call runs under a timeout."""

from __future__ import annotations

import math
import re
import subprocess
from dataclasses import dataclass, field

from hostcheck.health.verdict import HEALTHY, UNHEALTHY, Verdict

PREFIX = "hostcheck:"  # the reason of every drain hostcheck makes starts with it
REASON_LENGTH = 200  # scontrol shows the whole reason; sinfo -R cuts it far shorter
_STAMP = re.compile(r"\s*\[[^\]@]*@[^\]]*\]\s*$")  # the [user@time] scontrol adds


class SlurmError(Exception):
    """scontrol failed or did not answer in time."""


@dataclass(frozen=True)
class Node:
    name: str
    state: str  # as scontrol shows it, e.g. IDLE+DRAIN
    reason: str  # without scontrol's [user@time]
    partitions: tuple[str, ...] = ()

    @property
    def flags(self) -> set[str]:
        return set(self.state.split("+"))

    @property
    def drained(self) -> bool:
        return "DRAIN" in self.flags

    @property
    def down(self) -> bool:
        return bool(self.flags & {"DOWN", "FAIL", "FUTURE"})

    @property
    def drained_by_hostcheck(self) -> bool:
        return self.drained and self.reason.startswith(PREFIX)

    def to_dict(self) -> dict:
        """As `hostcheck repair` prints it."""
        return {
            "name": self.name,
            "state": self.state,
            "reason": self.reason,
            "drained": self.drained,
            "drained_by_hostcheck": self.drained_by_hostcheck,
        }


def parse_node(text: str) -> Node:
    """`scontrol -o show node NAME`: one line of Key=Value pairs; the reason runs from
    `Reason=` to scontrol's `[user@time]` (it may hold spaces and `=`)."""
    name = re.search(r"\bNodeName=(\S+)", text)
    state = re.search(r"\bState=(\S+)", text)
    partitions = re.search(r"\bPartitions=(\S+)", text)
    if not name or not state:
        raise SlurmError(f"scontrol show node: no NodeName or State in {text.strip()[:120]!r}")
    reason = ""
    found = re.search(r"\bReason=(.*?\[[^\]@]*@[^\]]*\])", text) or re.search(
        r"\bReason=(.*)$", text.strip()
    )
    if found:
        reason = _STAMP.sub("", found.group(1)).strip()
    return Node(
        name=name.group(1),
        state=state.group(1),
        reason=reason,
        partitions=tuple(partitions.group(1).split(",")) if partitions else (),
    )


def drain_reason(verdict: Verdict) -> str:
    text = f"{PREFIX} {'; '.join(verdict.causes)}"
    return text if len(text) <= REASON_LENGTH else text[: REASON_LENGTH - 3] + "..."


@dataclass(frozen=True)
class Plan:
    """What to do to the node: drain (with reason), resume, or nothing, and why."""

    action: str  # drain, resume or none
    said: str
    reason: str = ""


def plan(node: Node, verdict: Verdict) -> Plan:
    if verdict.state == UNHEALTHY:
        reason = drain_reason(verdict)
        if node.drained_by_hostcheck:
            if node.reason == reason:
                return Plan("none", "stays drained")
            return Plan("drain", "stays drained, reason updated", reason)
        if node.drained:
            return Plan("none", f"left as it is: drained by someone else ({node.reason})")
        if node.down:
            return Plan("none", f"left as it is: {node.state} ({node.reason or 'no reason'})")
        return Plan("drain", "drained", reason)
    if verdict.state == HEALTHY and node.drained_by_hostcheck:
        if node.down:
            return Plan("none", f"left as it is: {node.state}, drained by hostcheck")
        return Plan("resume", "resumed (hostcheck had drained it)")
    if node.drained and not node.drained_by_hostcheck:
        return Plan("none", f"left drained by someone else ({node.reason})")
    if verdict.state == HEALTHY:
        return Plan("none", f"{node.state}, nothing to do")
    return Plan("none", f"{node.state}, not changed while the verdict is unknown")


@dataclass(frozen=True)
class Cap:
    """How much of a partition hostcheck's own drains may take: a share of its nodes, at least
    one node (a small partition can still lose its broken node); percent 0: no cap."""

    percent: float

    def allowed(self, nodes: int) -> int:
        return max(1, math.floor(nodes * self.percent / 100 + 1e-9))


@dataclass
class Capped:
    """Why a drain was held back: the partition, hostcheck's drains there, its size."""

    partition: str
    drained: list[str] = field(default_factory=list)
    nodes: int = 0
    allowed: int = 0

    def said(self, percent: float) -> str:
        return (
            f"not drained: the cap is reached (hostcheck drains {len(self.drained)} of the "
            f"{self.nodes} nodes of partition {self.partition}: {', '.join(self.drained)}; "
            f"{percent:g} % allows {self.allowed})"
        )


def over_cap(name: str, partitions: tuple[str, ...], nodes: list[Node], cap: Cap) -> Capped | None:
    """The first of the node's partitions where one more hostcheck drain would pass the cap."""
    for partition in partitions:
        members = [n for n in nodes if partition in n.partitions]
        drained = sorted(n.name for n in members if n.drained_by_hostcheck and n.name != name)
        allowed = cap.allowed(len(members))
        if len(drained) + 1 > allowed:
            return Capped(partition, drained, len(members), allowed)
    return None


class Scontrol:
    def __init__(self, program: str, deadline) -> None:
        self.program = program
        self.deadline = deadline  # () -> seconds left for scontrol

    def _run(self, *args: str) -> str:
        timeout = min(10.0, self.deadline())
        if timeout <= 0.2:
            raise SlurmError("no time left in the budget for scontrol")
        try:
            done = subprocess.run(
                [self.program, *args],
                capture_output=True,
                text=True,
                timeout=timeout,
                stdin=subprocess.DEVNULL,
                check=False,
            )
        except subprocess.TimeoutExpired:
            raise SlurmError(
                f"scontrol {args[0]} gave no answer in {timeout:.0f} s (controller unreachable?)"
            ) from None
        except OSError as exc:
            raise SlurmError(f"cannot run {self.program}: {exc.strerror}") from None
        if done.returncode != 0:
            lines = (done.stderr or done.stdout).strip().splitlines()
            raise SlurmError(
                f"scontrol {args[0]} failed (exit {done.returncode}): "
                f"{lines[-1] if lines else 'no message'}"
            )
        return done.stdout

    def node(self, name: str) -> Node:
        return parse_node(self._run("-o", "show", "node", name))

    def nodes(self) -> list[Node]:
        return [parse_node(line) for line in self._run("-o", "show", "node").splitlines() if line]

    def reboot_program(self) -> str:
        """slurm.conf's RebootProgram ('' when none is set): what `scontrol reboot` needs."""
        for line in self._run("show", "config").splitlines():
            key, _, value = line.partition("=")
            if key.strip() == "RebootProgram":
                return "" if value.strip() in ("", "(null)") else value.strip()
        return ""

    def drain(self, name: str, reason: str) -> None:
        self._run("update", f"NodeName={name}", "State=DRAIN", f"Reason={reason}")

    def resume(self, name: str) -> None:
        self._run("update", f"NodeName={name}", "State=RESUME")

    def reboot(self, name: str, reason: str) -> None:
        """Slurm drains the node, reboots it through RebootProgram when it is idle, and
        resumes it once it is back."""
        self._run("reboot", "ASAP", "nextstate=RESUME", f"reason={reason}", name)


@dataclass
class Acted:
    said: str  # what was done, in a few words
    capped: Capped | None = None  # a drain held back by the cap
    done: str = ""  # "drained" or "resumed" when the node was changed so; "" otherwise


def act(
    scontrol: Scontrol, name: str, verdict: Verdict, dry_run: bool = False, cap: Cap | None = None
) -> Acted:
    """Read the node, do what the plan says, and say what was done in a few words. A new drain
    that would take hostcheck's drains in one of the node's partitions past the cap is not
    made (a reason updated on a node hostcheck already drained is no new drain)."""
    node = scontrol.node(name)
    step = plan(node, verdict)
    if step.action == "none":
        return Acted(step.said)
    if step.action == "drain" and not node.drained_by_hostcheck and cap and cap.percent > 0:
        capped = over_cap(name, node.partitions, scontrol.nodes(), cap)
        if capped is not None:
            return Acted(capped.said(cap.percent), capped)
    if dry_run:
        return Acted(f"would be {step.said} (--dry-run)")
    if step.action == "drain":
        scontrol.drain(name, step.reason)
        # a reason updated on a node hostcheck had drained already is no new drain
        return Acted(step.said, done="" if node.drained_by_hostcheck else "drained")
    scontrol.resume(name)
    return Acted(step.said, done="resumed")
