"""python -m tests.sandbox up --hosts 3 [--os debian12,rocky9] | down | status"""

from __future__ import annotations

import argparse
import json
import os
import sys

from tests.sandbox import oskinds
from tests.sandbox.fleet import Fleet


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="sandbox", description=__doc__)
    commands = parser.add_subparsers(dest="command", required=True)
    up = commands.add_parser("up", help="bring up a fleet (replacing any earlier one)")
    up.add_argument("--hosts", type=int, default=3)
    up.add_argument("--shm-size", default="64m", help="/dev/shm size of each host")
    up.add_argument("--disks", type=int, default=2, help="loop-device disks per host")
    up.add_argument("--port", type=int, default=22)
    up.add_argument(
        "--os",
        default=",".join(oskinds.DEFAULT_MIX),
        help=f"OS kinds, taken in turn for the hosts (kinds: {', '.join(oskinds.KINDS)})",
    )
    commands.add_parser("down", help="remove everything the harness created")
    status = commands.add_parser("status", help="show the hosts")
    status.add_argument("--json", action="store_true")
    parser.add_argument("--instance", default="main", help="a second fleet beside the main one")
    args = parser.parse_args(argv)
    if args.command == "up":
        try:
            kinds = oskinds.parse(args.os)
        except ValueError as exc:
            print(f"sandbox: --os: {exc}", file=sys.stderr)
            return 2
    if os.geteuid() != 0:
        print("sandbox: needs root (namespaces, mounts, loop devices)", file=sys.stderr)
        return 2
    if args.command == "up":
        fleet = Fleet(
            os_kinds=kinds,
            shm_size=args.shm_size,
            disks_per_host=args.disks,
            port=args.port,
            instance=args.instance,
        )
        try:
            hosts = fleet.up(args.hosts)
        except (RuntimeError, ValueError) as exc:
            print(f"sandbox: {exc}", file=sys.stderr)
            fleet.down(quiet=True)
            return 1
        for host in hosts:
            print(
                f"  {host.name:8} {host.os:11} ssh root@{host.address} -i {fleet.key_file}  "
                f"disks: {' '.join(host.disk_paths)}"
            )
        print("take it down with: make sandbox-down")
        return 0
    fleet = Fleet(instance=args.instance)
    if args.command == "down":
        fleet.down()
        return 0
    rows = fleet.status()
    if args.json:
        print(json.dumps(rows, indent=2))
    elif not rows:
        print("no sandbox fleet (make sandbox-up HOSTS=3)")
    for row in rows if not args.json else ():
        state = "up" if row["ssh"] else ("running, no ssh" if row["running"] else "DOWN")
        print(
            f"{row['name']:8} {row['os']:11} {row['address']:22} {state:16} pid {row['init_pid']}  "
            f"disks {' '.join(row['disks'])}"
        )
    return 0 if all(r["ssh"] for r in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
