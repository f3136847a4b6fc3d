"""site.yml end to end, from the collection installed as a user has it (tests/integration/
collection.py), on one fresh sandbox host of every OS kind but Debian 12 (tests/sandbox/oskinds.py:
Debian 13, and the Ubuntu 22.04/24.04 and Rocky 8/9 look-alikes), each booting systemd:
Ansible sees each as its distribution, site.yml converges and verifies, fresh SSH sessions see
what it set, the packages went in under each distribution's names, and a second run changes
nothing. The first converge runs on the oldest ansible-core the collection claims
(collection.OLDEST_CORE), the second on this checkout's (the newest): the state one leaves is
the state the other wants. Debian 12 is the kind of the gate's smoke converge (test_smoke.py),
which asks the same of its host (tests/integration/site_checks.py); converging it here again
cost a sixth of this module. Check mode and bad input are in test_site_check.py and
test_site_bad_input.py (they run beside this module in another pytest worker)."""

from __future__ import annotations

import shutil
import time
from pathlib import Path

import pytest
import yaml

from tests.integration import collection
from tests.integration.ansible import run_playbook
from tests.integration.site_checks import (
    BUILD_PACKAGES,
    FACTS,
    assert_build_packages_went_in_under_the_distributions_names,
    assert_fresh_sessions_see_what_site_yml_set,
    assert_services_get_the_limits_and_no_unit_failed,
    gathered_as,
    sh,
)
from tests.sandbox.oskinds import KINDS

# What this module covers (tests/selection.py: a change to these paths selects it)
COVERS = (
    "site.yml",
    "playbooks/site.yml",
    "playbooks/provision.yml",
    "playbooks/tasks/group_roles.yml",
    "playbooks/tasks/validate_roles.yml",
    "plugins/action/role_switch.py",
    "plugins/modules/role_switch.py",
    "playbooks/verify.yml",
    "roles/*/vars/*",
    "roles/*/tasks/setup-*.yml",
    "roles/*/meta/main.yml",
    "tests/sandbox/oskinds.py",
    "tests/sandbox/lookalike_*.py",
    "meta/runtime.yml",
    "galaxy.yml",
    "requirements.yml",
    "tests/integration/collection.py",
    "tests/integration/site_checks.py",
)

pytestmark = pytest.mark.integration
ROLES = Path(__file__).resolve().parents[2] / "roles"
SMOKE_KIND = "debian12"  # test_smoke.py's
MATRIX = {name: kind for name, kind in KINDS.items() if name != SMOKE_KIND}


@pytest.fixture(scope="module")
def user(tmp_path_factory, make_fleet):
    """The fleet, and a folder outside the checkout with the collection installed as a user
    has it (only ansible-core, no ansible.cfg of ours) and the fleet's inventory copied in."""
    fleet = make_fleet("site", hosts=len(MATRIX), os_kinds=list(MATRIX.values()))
    folder = tmp_path_factory.mktemp("user")
    controller = collection.install(folder)
    inventory = folder / "inventory"
    inventory.mkdir()
    shutil.copy(fleet.inventory, inventory / "hosts.yml")
    shutil.copytree(Path(fleet.inventory).parent / "group_vars", inventory / "group_vars")
    quick_profile(inventory / "group_vars" / "all" / "hostcheck.yml")
    return fleet, controller, inventory / "hosts.yml"


def quick_profile(group_vars: Path) -> None:
    """The converges' hostcheck runs check every setting but measure nothing (the quick
    profile): the benchmarks (the training loop, the pillow and storage reads) run the same
    code on every kind, 6 CPU-seconds a host, and test_smoke.py's converge runs them."""
    values = yaml.safe_load(group_vars.read_text())
    assert values["hostcheck_profile"] == "default", values["hostcheck_profile"]
    group_vars.write_text(yaml.safe_dump({**values, "hostcheck_profile": "quick"}))


@pytest.fixture(scope="module")
def oldest(tmp_path_factory, user):
    """The same, with the oldest ansible-core the collection claims."""
    fleet, _, inventory = user
    folder = tmp_path_factory.mktemp("user-oldest")
    controller = collection.install(folder, collection.OLDEST_CORE)
    version = collection.core_version(controller)
    claimed = collection.OLDEST_CORE.split(">=")[1].split(".")[:2]
    assert version.split(".")[:2] == claimed, (version, collection.OLDEST_CORE)
    print(f"first converge on ansible-core {version}")
    return fleet, controller, inventory


def switches_as_given_on_the_command_line() -> dict[str, str]:
    """Every boolean variable of every role at its default, as `-e name=true` gives it: a string
    (in the spellings Ansible's argument specs take for a bool)."""
    spellings = {True: ["true", "yes", "1", "True", "on"], False: ["false", "no", "0", "off"]}
    switches = {}
    for spec in sorted(ROLES.glob("*/meta/argument_specs.yml")):
        options = yaml.safe_load(spec.read_text())["argument_specs"]["main"]["options"]
        for name, option in options.items():
            if option.get("type") == "bool":
                forms = spellings[option["default"]]
                switches[name] = forms[len(switches) % len(forms)]
    return switches


def site(user, extra_vars=None):
    """The README's quickstart: ansible-playbook -i inventory/hosts.yml hostcheck.gpu_hosts.site"""
    fleet, controller, inventory = user
    return run_playbook(
        fleet,
        "hostcheck.gpu_hosts.site",
        controller=controller,
        inventory=inventory,
        extra_vars=extra_vars,
    )


@pytest.fixture(scope="module")
def converged(oldest):
    """The first run (the oldest ansible-core claimed) gives every role's switches as strings
    from the command line; the second run (the newest, without them) must then change nothing:
    the strings meant what the defaults mean."""
    fleet = oldest[0]
    start = time.monotonic()
    first = site(oldest, switches_as_given_on_the_command_line())
    elapsed = time.monotonic() - start
    assert first.returncode == 0, [(h, first.failure_text(h)) for h in first.failed_hosts()]
    print(f"site.yml on {len(MATRIX)} hosts, one of each OS kind but {SMOKE_KIND}: {elapsed:.0f} s")
    return fleet, first


def test_every_kind_is_gathered_as_its_distribution(converged):
    fleet, _ = converged
    assert gathered_as(fleet) == {name: FACTS[name] for name in MATRIX}
    inventory = Path(fleet.inventory).read_text()
    for kind in MATRIX:
        assert f"    os_{kind}:" in inventory  # a group per OS kind


def test_fresh_sessions_see_what_site_yml_set(converged):
    fleet, _ = converged
    for host in fleet.hosts():
        assert_fresh_sessions_see_what_site_yml_set(fleet, host)


def test_build_packages_went_in_under_each_distributions_names(converged):
    fleet, _ = converged
    for host in fleet.hosts():
        assert_build_packages_went_in_under_the_distributions_names(fleet, host)


def test_services_get_the_limits_and_no_unit_failed(converged):
    fleet, _ = converged
    for host in fleet.hosts():
        assert_services_get_the_limits_and_no_unit_failed(fleet, host)


def test_second_run_changes_nothing(user, converged):
    fleet, _ = converged
    second = site(user)
    assert second.returncode == 0, [(h, second.failure_text(h)) for h in second.failed_hosts()]
    assert {h: s["changed"] for h, s in second.stats.items()} == {h.name: 0 for h in fleet.hosts()}


def test_look_alikes_refuse_the_other_distributions_package_names(converged):
    """A role naming a Debian package on Ubuntu, or an Ubuntu one on Debian, fails here as it
    would there: each kind keeps its own apt preferences beside this machine's files."""
    fleet, _ = converged
    machine_preferences = {path.name for path in Path("/etc/apt/preferences.d").glob("*")}
    for host in fleet.hosts():
        distribution, _, _, manager = FACTS[host.os]
        if manager != "apt":
            continue
        own = BUILD_PACKAGES[host.os][0]
        foreign = BUILD_PACKAGES["debian12" if distribution == "Ubuntu" else "ubuntu2404"][0]
        assert fleet.ssh(host, f"apt-get install -s -qq {own}").returncode == 0, host.os
        refused = fleet.ssh(host, f"apt-get install -s -qq {foreign}")
        assert refused.returncode != 0, f"{host.os} would install {foreign}"
        listed = set(sh(fleet, host, "ls /etc/apt/preferences.d").split())
        assert machine_preferences <= listed, host.os
        assert ("sandbox-ubuntu-lookalike.pref" in listed) == (distribution == "Ubuntu"), host.os
