"""A fleet whose hosts are what a playbook left on them, for modules whose subject is not the
first converge itself: booted from converged layers kept in the machine-wide cache
(tests/sandbox/layers.py), made by converging here when none is kept for these inputs. Either
way a second run of the playbook must then change nothing on them: that run proves the hosts
are what the converge leaves, and costs a no-op converge instead of a first one.

make test's selection (the gate) keeps no layer: it runs because what a converge reads changed
since the last full pass, so a layer of these inputs is not there and would serve only a
second run of the same commit. There a miss converges the fleet and the tests use it as it is,
without stopping, moving and booting the hosts again for a no-op run."""

from __future__ import annotations

import os

from tests.integration.ansible import run_playbook
from tests.paths import CHECKOUT, MACHINE_CACHE
from tests.sandbox import oskinds
from tests.sandbox.fleet import Fleet
from tests.sandbox.layers import Layers, layer_key
from tests.selection import MODE_ENVIRONMENT

LAYERS = Layers(MACHINE_CACHE / "sandbox")


def keeps_layers() -> bool:
    return os.environ.get(MODE_ENVIRONMENT) != "changed"


def converged_fleet(
    make_fleet,
    instance: str,
    hosts: int,
    playbook: str,
    *,
    extra_vars: dict | None = None,
    tags: str | None = None,
    limit: list[str] | None = None,
    **options,
) -> Fleet:
    """make_fleet(instance, hosts, **options) with the hosts in limit (all by default)
    converged by `ansible-playbook playbook` with these variables and tags."""
    if options.get("root_space"):
        raise ValueError("converged layers are moved out of a host's root: no root_space")
    names = [f"node{i}" for i in range(1, hosts + 1)]
    converged = limit or names
    wanted = options.get("os_kinds")
    kinds = oskinds.for_hosts(hosts, oskinds.parse(wanted) if isinstance(wanted, str) else wanted)
    recipe = {
        "playbook": playbook,
        "extra_vars": extra_vars or {},
        "tags": tags,
        "hosts": converged,
        "os": [kind.name for kind in kinds],
        "options": {k: v for k, v in sorted(options.items()) if k != "os_kinds"},
    }
    key = layer_key(CHECKOUT, recipe)
    run_options = {"tags": tags, "limit": ",".join(converged) if limit else None}
    with LAYERS.locked(key):
        layers = LAYERS.find(key, converged)
        if layers is None:
            fleet = make_fleet(instance, hosts, **options)
            first = run_playbook(fleet, playbook, extra_vars, **run_options)
            assert first.returncode == 0, (
                " | ".join(f"{h}: {first.failure_text(h)}" for h in first.failed_hosts())
                or first.stderr[-3000:]
            )
            if not keeps_layers():
                return fleet
            stopped = [host for host in fleet.hosts() if host.name in converged]
            for host in stopped:
                fleet.stop(host)
            layers = LAYERS.keep(key, {host.name: fleet.changes_of(host) for host in stopped})
            fleet.down(quiet=True)
    fleet = make_fleet(instance, hosts, layers=layers, **options)
    again = run_playbook(fleet, playbook, extra_vars, **run_options)
    assert again.returncode == 0, again.stderr[-3000:]
    for name in converged:
        assert again.changed(name) == 0, (
            f"{name} booted from the converged layer {LAYERS.folder(key)} is not what the "
            f"converge left: {again.changed_tasks(name)}"
        )
    return fleet
