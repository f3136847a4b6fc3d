"""The hostcheck role's systemd units: command lines written the way systemd reads them.
systemd_quote writes one argument of an ExecStart= value (the role's template uses it as the
filter hostcheck_systemd_quote); systemd_split gives the argv systemd would run from a whole
line (hostcheck_verify reads the unit on the host with it).

systemd splits ExecStart= on blanks, honours double and single quotes with C escapes, expands
%-specifiers and $VARIABLES: an argument made only of safe characters is written as it is,
any other is double-quoted with backslash, double quote, % and $ escaped.
"""

from __future__ import annotations

import re

from ansible.errors import AnsibleFilterError

_SAFE = re.compile(r"^[A-Za-z0-9_./:=,+@-]+$")
_ESCAPES = {"\\": "\\\\", '"': '\\"', "\n": "\\n", "\t": "\\t"}


def systemd_quote(value: object) -> str:
    if not isinstance(value, str):
        value = str(value)
    if _SAFE.match(value):
        return value
    text = "".join(_ESCAPES.get(ch, ch) for ch in value)
    return '"' + text.replace("%", "%%").replace("$", "$$") + '"'


def systemd_split(line: str) -> list[str]:
    """The reverse of systemd_quote over a whole line (the quoting it writes, no more)."""
    words: list[str] = []
    i, n = 0, len(line)
    while i < n:
        if line[i] in " \t":
            i += 1
            continue
        if line[i] == '"':
            i += 1
            word = []
            while i < n and line[i] != '"':
                if line[i] == "\\" and i + 1 < n:
                    word.append({"n": "\n", "t": "\t"}.get(line[i + 1], line[i + 1]))
                    i += 2
                    continue
                word.append(line[i])
                i += 1
            if i >= n:
                raise AnsibleFilterError(f"unterminated quote in {line!r}")
            i += 1
            words.append("".join(word).replace("%%", "%").replace("$$", "$"))
            continue
        start = i
        while i < n and line[i] not in " \t":
            i += 1
        words.append(line[start:i].replace("%%", "%").replace("$$", "$"))
    return words
