"""Write an audit marker for every audited host that has no file in the audit folder.

    python audit_markers.py FOLDER < outcomes.json

Standard input: {"<host>": {"state": "unreachable"|"timeout"|"no-report", "reason": "..."}
or {} when the play recorded nothing for the host}. A host whose `<host>.json` exists (its
fetched report, or a marker written before) is left alone. Markers are the documents
`hostcheck fleet` reads (hostcheck/fleet/load.py):

    {"kind": "hostcheck-audit-marker", "host", "state", "reason", "at"}

each written to a temporary name and renamed, so the fleet never reads half a marker.
Standard output: {"written": [host, ...]} (playbooks/audit.yml reports a change when it is
not empty). Exit 1 with a line on standard error for bad input; standard library only, run
by the controller's Python.
"""

from __future__ import annotations

import datetime as dt
import json
import os
import sys
import tempfile

KIND = "hostcheck-audit-marker"
STATES = ("unreachable", "timeout", "no-report")
UNKNOWN = (
    "the audit recorded no outcome for this host: the play stopped for it before hostcheck "
    "ran or its report was fetched (see the play's output)"
)
MAX_REASON = 2000


def marker(host: str, outcome: dict, at: str) -> dict:
    state = outcome.get("state") if isinstance(outcome, dict) else None
    reason = outcome.get("reason") if isinstance(outcome, dict) else None
    if state not in STATES:
        state, reason = "no-report", UNKNOWN
    reason = " ".join(str(reason or state).split())[:MAX_REASON]
    return {"kind": KIND, "host": host, "state": state, "reason": reason, "at": at}


def write_atomic(path: str, text: str) -> None:
    fd, tmp = tempfile.mkstemp(prefix=".marker.", suffix=".tmp", dir=os.path.dirname(path))
    try:
        with os.fdopen(fd, "w") as handle:
            handle.write(text)
        os.chmod(tmp, 0o644)
        os.replace(tmp, path)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise


def main(argv: list[str]) -> int:
    if len(argv) != 1 or not os.path.isdir(argv[0]):
        print("audit_markers: usage: audit_markers.py FOLDER < outcomes.json", file=sys.stderr)
        return 1
    folder = argv[0]
    try:
        outcomes = json.load(sys.stdin)
    except ValueError as exc:
        print(f"audit_markers: standard input is not JSON: {exc}", file=sys.stderr)
        return 1
    if not isinstance(outcomes, dict):
        print("audit_markers: standard input must be a JSON object", file=sys.stderr)
        return 1
    at = dt.datetime.now(dt.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")
    written = []
    for host, outcome in sorted(outcomes.items()):
        if not host or "/" in host or host.startswith("."):
            print(f"audit_markers: {host!r} cannot be a file name in the folder", file=sys.stderr)
            return 1
        path = os.path.join(folder, f"{host}.json")
        if os.path.lexists(path):
            continue
        write_atomic(path, json.dumps(marker(host, outcome, at), indent=2) + "\n")
        written.append(host)
    print(json.dumps({"written": written}))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
