#!/usr/bin/env python3
"""From a node drained for a small /dev/shm to a resumed one: playbooks/repair.yml, next to
what it does by hand (the shm role's converge, then one hostcheck run), measured alternately
in one run on the same node (compare the ratio; the goal is at most 2x).

    sudo .venv/bin/python benchmarks/repair_time.py [--repeat N]

The node is a one-host Slurm cluster (Debian's Slurm 22.05 on a sandbox host) with hostcheck
and its Slurm health check installed as the Slurm tests install them (their playbook and
thresholds), the health check's interval an hour so that slurmd does not resume the node on its
own. Before each round /dev/shm is remounted at 32 MiB and the health check program drains the
node (not timed). repair.yml then reads Slurm's drains, runs hostcheck, the shm role, hostcheck
again, and resumes the node; by hand: ansible-playbook with the shm role alone (facts as
provision.yml gathers them), hostcheck over SSH, and the node resumed after the clock stops.
Both are timed from the controller, SSH and Ansible's start included.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from tests.integration import test_slurm_healthcheck as slurm_tests
from tests.integration.ansible import build_wheel, run_playbook
from tests.integration.slurm_cluster import start_cluster
from tests.sandbox.fleet import CHECKOUT, Fleet

GOAL = 2.0
SHM_ONLY = """\
- name: Size /dev/shm (the shm role alone)
  hosts: gpu_nodes
  gather_facts: true
  gather_subset: [min]
  roles:
    - role: hostcheck.gpu_hosts.shm
"""
HOSTCHECK_RUN = (
    f"{slurm_tests.HOSTCHECK} run --profile default --config {slurm_tests.CONFIG_FILE} "
    f"--reuse-measurements {slurm_tests.REPORT} --report json:- >/dev/null"
)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=5, help="rounds (each times both)")
    args = parser.parse_args()
    work = Path(tempfile.mkdtemp(prefix="bench-repair-"))
    values = {
        **slurm_tests.VALUES,
        "slurm_healthcheck_interval": 3600,
        "test_wheel": str(build_wheel(CHECKOUT, work / "wheels")),
    }
    repair_values = {**values, "shm_size": "64MiB", "repair_window_days": 0}
    shm_playbook = work / "shm.yml"
    shm_playbook.write_text(SHM_ONLY)
    fleet = Fleet(instance="bench-repair", os_kinds="debian12", log=lambda _: None)
    try:
        fleet.up(1)
        cluster = start_cluster(fleet)
        cluster.run("mkdir -p /srv/dataset && head -c 4194304 /dev/urandom > /srv/dataset/a.bin")
        done = run_playbook(fleet, slurm_tests.PLAYBOOK, extra_vars=values)
        if done.returncode != 0:
            print(done.stderr[-3000:], file=sys.stderr)
            return 1
        name = cluster.hosts[0].name

        def drained_small() -> None:
            cluster.run("mount -o remount,size=32m /dev/shm", name)
            cluster.run(slurm_tests.PROGRAM, name, check=False)  # exit 1: unhealthy, drained
            node = cluster.node(name)
            assert slurm_tests.drained_by_hostcheck(node), node

        def with_repair() -> float:
            began = time.monotonic()
            done = run_playbook(
                fleet,
                "playbooks/repair.yml",
                extra_vars={**repair_values, "repair_reports_dir": str(work / "reports")},
            )
            took = time.monotonic() - began
            assert done.returncode == 0, done.stderr[-3000:]
            cluster.wait_for(name, slurm_tests.schedulable, timeout=10)  # not timed
            return took

        def by_hand() -> float:
            began = time.monotonic()
            done = run_playbook(fleet, str(shm_playbook), extra_vars=repair_values)
            cluster.run(HOSTCHECK_RUN, name)
            took = time.monotonic() - began
            assert done.returncode == 0, done.stderr[-3000:]
            cluster.resume(name)
            return took

        cases = {"repair.yml": with_repair, "shm role + hostcheck": by_hand}
        times: dict[str, list[float]] = {case: [] for case in cases}
        for round_ in range(args.repeat):
            order = list(cases) if round_ % 2 == 0 else list(reversed(cases))
            for case in order:
                drained_small()
                times[case].append(cases[case]())
            print(
                f"round {round_ + 1}: "
                + ", ".join(f"{case} {times[case][-1]:.2f} s" for case in cases),
                flush=True,
            )
    finally:
        fleet.down(quiet=True)
    medians = {case: statistics.median(t) for case, t in times.items()}
    for case, t in times.items():
        print(f"{case:>22}: min {min(t):.2f}  median {medians[case]:.2f}  max {max(t):.2f} s")
    ratio = medians["repair.yml"] / medians["shm role + hostcheck"]
    print(
        json.dumps({"medians_s": medians, "ratio": round(ratio, 2), "goal": GOAL}),
    )
    print(f"repair.yml / (shm role + hostcheck): {ratio:.2f}x (goal at most {GOAL:g}x)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
