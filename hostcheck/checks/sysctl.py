"""Kernel tunables (sysctl) that the sysctl_tuning role sets, read from /proc/sys."""

from __future__ import annotations

from typing import Any, Union

from hostcheck import config as c
from hostcheck._shared.sysctl import NAME_PATTERN, proc_path
from hostcheck.checks.base import CheckContext, CheckSpec
from hostcheck.model import CheckResult, Finding, Status

CHECK_ID = "sysctl"
FIX = (
    "set sysctl_tuning_settings['{name}'] (role sysctl_tuning) {want} and run: "
    "ansible-playbook site.yml --tags sysctl_tuning"
)

_NUMBERS = {
    "anyOf": [
        {"type": "integer"},
        {"type": "array", "minItems": 1, "items": {"type": ["integer", "null"]}},
    ]
}
_VALUES = {
    "anyOf": [
        {"type": ["integer", "string"]},
        {"type": "array", "minItems": 1, "items": {"type": ["integer", "string", "null"]}},
    ]
}
# patternProperties, not properties: the profile loader requires every declared property
# of every object in the final profile, and min, max and equals are each optional.
EXPECTATION = {
    "type": "object",
    "additionalProperties": False,
    "patternProperties": {"^(min|max)$": _NUMBERS, "^equals$": _VALUES},
}
SCHEMA = c.obj(
    {
        "expect": {
            "type": "object",
            "propertyNames": {"pattern": NAME_PATTERN},
            "additionalProperties": c.nullable(EXPECTATION),
        },
    }
)

Field = Union[int, str]


def parse_value(text: str) -> tuple[Field, ...]:
    """The fields of a /proc/sys value (tab- or space-separated); numbers become ints."""
    fields: list[Field] = []
    for word in text.split():
        try:
            fields.append(int(word))
        except ValueError:
            fields.append(word)
    return tuple(fields)


def format_value(fields: tuple[Field, ...]) -> str:
    return "\t".join(str(f) for f in fields)


def _as_list(value: Any, width: int) -> list | None:
    """The per-field expectation; None when a scalar meets a multi-field sysctl."""
    if isinstance(value, list):
        return value if len(value) == width else None
    return [value] if width == 1 else None


def compare(fields: tuple[Field, ...], expectation: dict) -> tuple[bool | None, list[str]]:
    """(all met, the unmet parts); (None, why) when the expectation cannot be applied."""
    unmet = []
    for kind in ("min", "max", "equals"):
        if kind not in expectation:
            continue
        wanted = _as_list(expectation[kind], len(fields))
        if wanted is None:
            shape = "a list of" if len(fields) > 1 else "one value, not a list of"
            return None, [
                f"{kind}: the value has {len(fields)} field(s); give {shape} {len(fields)}"
            ]
        for index, (have, want) in enumerate(zip(fields, wanted)):
            if want is None:
                continue
            where = f"field {index + 1}: " if len(fields) > 1 else ""
            if kind == "equals":
                if str(have) != str(want):
                    unmet.append(f"{where}{have} != {want}")
            elif not isinstance(have, int):
                return None, [f"{where}{have!r} is not a number"]
            elif kind == "min" and have < want:
                unmet.append(f"{where}{have} < {want}")
            elif kind == "max" and have > want:
                unmet.append(f"{where}{have} > {want}")
    return not unmet, unmet


def describe(expectation: dict) -> str:
    parts = []
    for kind, word in (("min", ">="), ("max", "<="), ("equals", "=")):
        if kind in expectation:
            value = expectation[kind]
            text = (
                " ".join("*" if v is None else str(v) for v in value)
                if isinstance(value, list)
                else str(value)
            )
            parts.append(f"{word} {text}")
    return " and ".join(parts) or "report only"


def _want_text(expectation: dict) -> str:
    if "equals" in expectation:
        return f"to {expectation['equals']}"
    if "min" in expectation and "max" in expectation:
        return f"between {expectation['min']} and {expectation['max']}"
    if "min" in expectation:
        return f"to {expectation['min']} or more"
    return f"to {expectation.get('max')} or less"


def check_one(ctx: CheckContext, name: str, expectation: dict) -> tuple[Finding, Any]:
    expected = describe(expectation)
    try:
        path = proc_path(name)
    except ValueError as exc:
        return Finding(name, Status.ERROR, None, expected, str(exc), "profile"), None
    remedy = FIX.format(name=name, want=_want_text(expectation)) if expectation else ""
    text = ctx.system.read(path)
    if text is None:
        if ctx.system.exists(path):
            return Finding(name, Status.ERROR, None, expected, "not readable", path), None
        return (
            Finding(name, Status.SKIP, None, expected, "not on this kernel", path, remedy=""),
            None,
        )
    fields = parse_value(text)
    if not fields:
        return Finding(name, Status.ERROR, None, expected, "empty value", path), None
    shown = " ".join(str(f) for f in fields)
    measured: Any = fields[0] if len(fields) == 1 else list(fields)
    ok, reasons = compare(fields, expectation)
    if ok is None:
        status, display = Status.ERROR, f"{shown} ({'; '.join(reasons)})"
        remedy = f"fix sysctl.expect.{name} in the profile: {'; '.join(reasons)}"
    elif ok:
        status, display = Status.PASS, shown
    elif len(fields) == 1:
        status, display = Status.FAIL, ", ".join(reasons)
    else:
        status, display = Status.FAIL, f"{shown} ({', '.join(reasons)})"
    return Finding(name, status, measured, expected, display, path, remedy), measured


def run(ctx: CheckContext) -> CheckResult:
    expect = ctx.config["expect"]
    findings = []
    values: dict[str, Any] = {}
    for name in sorted(expect):
        if expect[name] is None:
            continue  # switched off by a later profile layer
        finding, value = check_one(ctx, name, expect[name])
        findings.append(finding)
        values[name] = value
    if not findings:
        return CheckResult.skipped(CHECK_ID, "no sysctl expectations in the profile")
    return CheckResult.from_findings(CHECK_ID, findings, {"values": values})


SPEC = CheckSpec(
    id=CHECK_ID,
    title="Kernel tunables (sysctl)",
    explain=(
        "Reads each sysctl named in the profile's sysctl.expect from /proc/sys and compares "
        "it with {min: N}, {max: N} or {equals: N} (multi-value sysctls such as "
        "net.ipv4.tcp_rmem take a list compared field by field, null for a field that does "
        "not matter; {} reports the value only). These are the values the sysctl_tuning "
        "role sets: vm.swappiness low so that the training process and its DataLoader "
        "workers are not swapped out under page-cache pressure from dataset reads; "
        "vm.max_map_count high because memory-mapped datasets and tensors shared between "
        "workers each take mappings; vm.overcommit_memory not 2, so that forking workers "
        "from a large process does not fail; fs.file-max and fs.nr_open above the "
        "open-files limits the ulimits role sets; net.core socket buffers, somaxconn and "
        "netdev_max_backlog for NCCL over TCP and the rendezvous store of many ranks. "
        "net.* values belong to the network namespace of hostcheck (a container sees its "
        "own); a sysctl this kernel does not have is skipped."
    ),
    run=run,
    schema=SCHEMA,
    roles=("sysctl_tuning",),
)
