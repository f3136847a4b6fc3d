"""Kernel tunables in the sysctl_tuning role: names and values checked strictly, written the
way the kernel prints them, and sysctl.d files read back. The role's validate and verify
actions (plugins/action/sysctl_tuning_*.py) call these; its tasks use sysctl_tuning_parse_file
and sysctl_tuning_todo as filters (plugins/filter/sysctl_tuning.py).

sysctl_tuning_parse_file(file_text)             {name: value} of a sysctl.d file
sysctl_tuning_todo(wanted, file_text[, live])   [{key, value}] whose line in the file, or
    (live given: the probe's `sysctl`) whose live value, is not the wanted one
sysctl_tuning_settings(settings, 'sysctl_tuning_settings'[, probe's sysctl])
    {name: value as a string}, null values left out, or an error naming the variable and
    every bad key; given the probe's `sysctl` result as a third argument, also checks that
    each name is a writable sysctl of this host's kernel and that a number goes where the
    kernel has numbers (as many as it has: net.ipv4.tcp_rmem takes three)
sysctl_tuning_same('a  b', 'a b')               equal field by field (whitespace ignored)
"""

from __future__ import annotations

import re

from ansible.errors import AnsibleFilterError
from ansible_collections.hostcheck.gpu_hosts.plugins.module_utils.sysctl import (
    DOTTED_NAME_PATTERN,
    sysctl_file_lines,
)

_NAME = re.compile(DOTTED_NAME_PATTERN)
# Decimal only: the kernel reads 010 as octal and 0x10 as hex, which nobody means here.
_INTEGER = re.compile(r"^-?(0|[1-9][0-9]*)$")


def _value_text(value: object) -> tuple[str | None, str | None]:
    """(the value as sysctl.d and the kernel print it, why it is not a value)."""
    if isinstance(value, bool):
        return None, "a boolean; write 1 or 0"
    if isinstance(value, int):
        return str(value), None
    if isinstance(value, float):
        return None, "not an integer"
    if isinstance(value, (list, tuple)):
        if not value:
            return None, "an empty list"
        fields = []
        for field in value:
            text, why = _value_text(field)
            if why or text is None or " " in text:
                return None, f"field {field!r}: {why or 'one word per field'}"
            fields.append(text)
        return " ".join(fields), None
    if isinstance(value, str):
        if "\n" in value or "\r" in value:
            return None, "more than one line"
        text = " ".join(value.split())
        if not text:
            return None, "empty"
        return text, None
    return None, f"a {type(value).__name__}; expected a number, a string or a list of numbers"


def _check_on_host(name: str, text: str, found: dict | None) -> str | None:
    if not found or not found.get("exists"):
        return (
            "not a sysctl of this host's kernel (misspelt, or its kernel module is not loaded: "
            "load it first, e.g. with community.general.modprobe)"
        )
    if not found.get("writable"):
        return "a read-only sysctl"
    now = (found.get("value") or "").split()
    if now and all(_INTEGER.match(field) for field in now):
        wanted = text.split()
        if len(wanted) != len(now) or not all(_INTEGER.match(field) for field in wanted):
            count = "an integer" if len(now) == 1 else f"{len(now)} integers"
            return f"expected {count}, as it has now ({' '.join(now)!r})"
    return None


def sysctl_tuning_settings(
    settings: object, name: str = "sysctl_tuning_settings", host: dict | None = None
) -> dict[str, str]:
    if not isinstance(settings, dict):
        raise AnsibleFilterError(
            f"{name}: expected a mapping of sysctl names to values (got {settings!r})"
        )
    problems = []
    wanted: dict[str, str] = {}
    for key, value in settings.items():
        if not isinstance(key, str) or not _NAME.match(key):
            problems.append(
                f"{name}[{key!r}]: not a sysctl name; write it with dots, e.g. vm.swappiness"
            )
            continue
        if value is None:
            continue  # null: not managed by the role (and dropped from its file)
        text, why = _value_text(value)
        if why is None and text is not None and host is not None:
            why = _check_on_host(key, text, host.get(key))
        if why is not None or text is None:
            problems.append(f"{name}[{key!r}]: {why} (got {value!r})")
            continue
        wanted[key] = text
    if problems:
        raise AnsibleFilterError("; ".join(problems))
    return wanted


def sysctl_tuning_parse_file(text: str | None) -> dict[str, str]:
    """{key: value} of the role's sysctl.d file (the last line of a key wins, as at boot). Keys
    stay as written: the role's tasks hand them back to ansible.posix.sysctl, which finds a
    line by its key as written (a net/ipv4/tcp_rmem line is dropped by that name)."""
    return dict(sysctl_file_lines(text))


def sysctl_tuning_same(have: object, want: object) -> bool:
    """A live or file value against the wanted one, field by field."""
    return have is not None and str(have).split() == str(want).split()


def sysctl_tuning_todo(
    wanted: dict[str, str], file_text: object, live: dict | None = None
) -> list[dict[str, str]]:
    in_file = sysctl_tuning_parse_file(file_text)
    todo = []
    for key, value in wanted.items():
        right = in_file.get(key) == value
        if live is not None:
            right = right and sysctl_tuning_same((live.get(key) or {}).get("value"), value)
        if not right:
            todo.append({"key": key, "value": value})
    return todo
