"""Xid and SXid events: what the NVIDIA driver logs when a GPU (Xid) or an NVSwitch (SXid)
reports an error, read from kernel-log messages, and what each code asks of the node.

The table is NVIDIA's Xid catalog reduced to what a node-health check decides: drain (the GPU
cannot be trusted with a job until it is reset, the node rebooted or the part replaced), warn
(worth a look, no job is at risk yet), or the job's own fault (the GPU is fine; the job that
hit it failed). A code not in the table warns, so that a new driver's codes are seen.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

DRAIN, WARN, JOB = "drain", "warn", "job"
GPU_RESET, REBOOT, PERSON = "a GPU reset", "a reboot", "a person"


@dataclass(frozen=True)
class XidRule:
    code: int
    meaning: str
    action: str  # DRAIN, WARN or JOB
    cleared_by: str = ""  # what makes a drained GPU usable again: GPU_RESET, REBOOT or PERSON
    remedy: str = ""


def _rules(*rules: XidRule) -> dict[int, XidRule]:
    return {rule.code: rule for rule in rules}


RESET_REMEDY = "drain the node; once its jobs end, reset the GPU (nvidia-smi -r -i <bus id>)"
REPLACE_REMEDY = "replace the GPU (open a hardware ticket with the bus id and the serial number)"

XIDS = _rules(
    XidRule(13, "graphics engine exception (the job's illegal instruction or access)", JOB),
    XidRule(31, "GPU memory page fault (the job used an address it does not own)", JOB),
    XidRule(43, "GPU stopped processing the job's channel after the job's own error", JOB),
    XidRule(45, "the job's channel was torn down (the job ended or was killed)", JOB),
    XidRule(
        48,
        "double-bit ECC error: GPU memory returned data it could not correct",
        DRAIN,
        GPU_RESET,
        RESET_REMEDY + "; if it comes back, " + REPLACE_REMEDY,
    ),
    XidRule(61, "internal micro-controller breakpoint", DRAIN, GPU_RESET, RESET_REMEDY),
    XidRule(62, "internal micro-controller halted", DRAIN, GPU_RESET, RESET_REMEDY),
    XidRule(
        63,
        "a memory row was remapped (or a page retired); it takes effect at the next GPU reset",
        WARN,
        GPU_RESET,
        "reset the GPU when its jobs end; the gpu check drains while the remap is pending",
    ),
    XidRule(
        64, "a memory row could not be remapped (or a page retired)", DRAIN, PERSON, REPLACE_REMEDY
    ),
    XidRule(
        74,
        "NVLink error",
        DRAIN,
        GPU_RESET,
        RESET_REMEDY + "; if links stay down, check the NVLink bridge or the NVSwitch tray",
    ),
    XidRule(
        79,
        "GPU has fallen off the bus",
        DRAIN,
        REBOOT,
        "drain and power-cycle the node; if it comes back, reseat the GPU or " + REPLACE_REMEDY,
    ),
    XidRule(
        92,
        "high rate of corrected single-bit ECC errors",
        WARN,
        "",
        "watch the GPU's ECC counts (nvidia-smi -q -d ECC); replace it if the rate keeps rising",
    ),
    XidRule(
        94,
        "contained uncorrectable ECC error: the job that met it was stopped, the row awaits "
        "remapping",
        DRAIN,
        GPU_RESET,
        RESET_REMEDY + " (the reset remaps the row)",
    ),
    XidRule(
        95,
        "uncontained uncorrectable ECC error: every job on the GPU is affected",
        DRAIN,
        GPU_RESET,
        RESET_REMEDY + "; if it comes back, " + REPLACE_REMEDY,
    ),
    XidRule(
        119,
        "GSP firmware did not answer in time (RPC timeout)",
        DRAIN,
        REBOOT,
        RESET_REMEDY + " or reboot",
    ),
    XidRule(120, "GSP firmware error", DRAIN, REBOOT, RESET_REMEDY + " or reboot"),
    XidRule(
        140,
        "uncorrectable ECC error the GPU could not recover from",
        DRAIN,
        GPU_RESET,
        RESET_REMEDY + "; if it comes back, " + REPLACE_REMEDY,
    ),
    XidRule(
        154,
        "the driver asks for a recovery action (the message says which: reset or reboot)",
        DRAIN,
        REBOOT,
        "do what the message asks (GPU reset, or node reboot), after draining the node",
    ),
)


def rule(code: int) -> XidRule:
    """The code's rule; a code not in the table warns."""
    return XIDS.get(code) or XidRule(
        code,
        f"Xid {code}, not in hostcheck's table",
        WARN,
        "",
        "look the code up in NVIDIA's Xid catalog (docs.nvidia.com/deploy/xid-errors)",
    )


def sxid_rule(code: int, fatal: bool) -> XidRule:
    """NVSwitch errors say themselves whether they are fatal."""
    if fatal:
        return XidRule(
            code,
            f"fatal NVSwitch error {code}",
            DRAIN,
            REBOOT,
            "drain the node and reset the NVSwitch tray (reboot); if it comes back, replace it",
        )
    return XidRule(
        code,
        f"non-fatal NVSwitch error {code}",
        WARN,
        "",
        "watch the switch's SXid rate; fatal ones drain",
    )


def rule_of(kind: str, code: int, fatal: bool) -> XidRule:
    """The rule of an Xid ("xid") or an SXid ("sxid", fatal as its line says)."""
    return sxid_rule(code, fatal) if kind == "sxid" else rule(code)


@dataclass(frozen=True)
class GpuEvent:
    kind: str  # "xid" or "sxid"
    code: int
    bus_id: str  # as sysfs names the device, function included: 0000:3b:00.0
    fatal: bool  # SXid: the line says "Fatal"; Xid: the table says drain
    text: str  # the rest of the line

    @property
    def rule(self) -> XidRule:
        return rule_of(self.kind, self.code, self.fatal)


_BUS = r"(?:PCI:)?([0-9a-fA-F]{4,8}:[0-9a-fA-F]{2}:[0-9a-fA-F]{2})(?:\.([0-7]))?"
_XID = re.compile(r"NVRM: Xid \(" + _BUS + r"\): (\d+)(?:, ?(.*))?")
_SXID = re.compile(
    r"nvidia-nvswitch\d+: SXid \(" + _BUS + r"\): (\d+), ?(Fatal|Non-fatal)?,? ?(.*)"
)


def bus_id(domain_bus_device: str, function: str | None) -> str:
    domain, bus, device = domain_bus_device.lower().split(":")
    return f"{int(domain, 16):04x}:{bus}:{device}.{function or '0'}"


def parse(message: str) -> GpuEvent | None:
    """The event a kernel-log message reports, or None when it reports none."""
    if "Xid" not in message:
        return None
    match = _XID.search(message)
    if match:
        code = int(match.group(3))
        return GpuEvent(
            "xid",
            code,
            bus_id(match.group(1), match.group(2)),
            rule(code).action == DRAIN,
            (match.group(4) or "").strip(),
        )
    match = _SXID.search(message)
    if match:
        return GpuEvent(
            "sxid",
            int(match.group(3)),
            bus_id(match.group(1), match.group(2)),
            match.group(4) == "Fatal",
            (match.group(5) or "").strip(),
        )
    return None
