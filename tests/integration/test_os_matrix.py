"""site.yml end to end, from the collection installed as a user has it (tests/integration/
collection.py), on one fresh sandbox host of every OS kind (tests/sandbox/oskinds.py:
Debian 12 and 13, and the Ubuntu 22.04/24.04 and Rocky 8/9 look-alikes), each booting systemd:
Ansible sees each as its distribution, site.yml converges and verifies, fresh SSH sessions see
what it set, the packages went in under each distribution's names, and a second run changes
nothing. The first converge runs on the oldest ansible-core the collection claims
(collection.OLDEST_CORE), the second on this checkout's (the newest): the state one leaves is
the state the other wants. Check mode and bad input are in test_site_check.py and
test_site_bad_input.py (they run beside this module in another pytest worker)."""

from __future__ import annotations

import json
import shutil
import time
from pathlib import Path

import pytest
import yaml

from tests.integration import collection
from tests.integration.ansible import run_module, run_playbook
from tests.sandbox.oskinds import KINDS

# What this module covers (tests/selection.py: a change to these paths selects it)
COVERS = (
    "site.yml",
    "playbooks/site.yml",
    "playbooks/provision.yml",
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
)

pytestmark = pytest.mark.integration
MiB = 2**20
VENV = "/opt/venvs/train"
ROLES = Path(__file__).resolve().parents[2] / "roles"
# kind -> (distribution, major version, os_family, pkg_mgr) as Ansible's facts must say
FACTS = {
    "debian12": ("Debian", "12", "Debian", "apt"),
    "debian13": ("Debian", "13", "Debian", "apt"),
    "ubuntu2204": ("Ubuntu", "22", "Debian", "apt"),
    "ubuntu2404": ("Ubuntu", "24", "Debian", "apt"),
    "rocky8": ("Rocky", "8", "RedHat", "dnf"),
    "rocky9": ("Rocky", "9", "RedHat", "dnf"),
}
# The JPEG headers pillow-simd is built against (every host gets them, a cached wheel or not),
# under each distribution's own name as its package manager records them.
BUILD_PACKAGES = {
    "debian12": ["libjpeg62-turbo-dev", "zlib1g-dev"],
    "debian13": ["libjpeg62-turbo-dev", "zlib1g-dev"],
    "ubuntu2204": ["libjpeg-turbo8-dev", "zlib1g-dev"],
    "ubuntu2404": ["libjpeg-turbo8-dev", "zlib1g-dev"],
    "rocky8": ["libjpeg-turbo-devel", "zlib-devel"],
    "rocky9": ["libjpeg-turbo-devel", "zlib-devel"],
}


@pytest.fixture(scope="module")
def user(tmp_path_factory, make_fleet):
    """The fleet, and a folder outside the checkout with the collection installed as a user
    has it (only ansible-core, no ansible.cfg of ours) and the fleet's inventory copied in."""
    fleet = make_fleet("site", hosts=len(KINDS), os_kinds=list(KINDS.values()))
    folder = tmp_path_factory.mktemp("user")
    controller = collection.install(folder)
    inventory = folder / "inventory"
    inventory.mkdir()
    shutil.copy(fleet.inventory, inventory / "hosts.yml")
    shutil.copytree(Path(fleet.inventory).parent / "group_vars", inventory / "group_vars")
    return fleet, controller, inventory / "hosts.yml"


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
    print(f"site.yml on {len(KINDS)} hosts, one of each OS kind: {elapsed:.0f} s")
    return fleet, first


def sh(fleet, host, command):
    done = fleet.ssh(host, command)
    assert done.returncode == 0, f"{host.name}: {command}: {done.stderr}"
    return done.stdout.strip()


def test_every_kind_is_gathered_as_its_distribution(converged):
    fleet, _ = converged
    results = run_module(
        fleet, "ansible.builtin.setup", "gather_subset=!all,!min,distribution,pkg_mgr"
    )
    seen = {}
    for host in fleet.hosts():
        facts = results[host.name]["ansible_facts"]
        seen[host.os] = (
            facts["ansible_distribution"],
            facts["ansible_distribution_major_version"],
            facts["ansible_os_family"],
            facts["ansible_pkg_mgr"],
        )
    assert seen == FACTS
    inventory = Path(fleet.inventory).read_text()
    for kind in KINDS:
        assert f"    os_{kind}:" in inventory  # a group per OS kind


def test_fresh_sessions_see_what_site_yml_set(converged):
    fleet, _ = converged
    for host in fleet.hosts():
        memtotal_kib = int(sh(fleet, host, "awk '/MemTotal/{print $2}' /proc/meminfo"))
        size = int(sh(fleet, host, "df -B1 --output=size /dev/shm | tail -1"))
        assert size == -(-(memtotal_kib // 4) * 50 // 100) * 4096, host.os  # shm_size 50%
        assert "size=50%" in sh(fleet, host, "findmnt --fstab -n -o OPTIONS /dev/shm")
        limits = [sh(fleet, host, f"ulimit -{flag}") for flag in ("Sn", "Hn", "Sl", "Hl")]
        assert limits == ["16384", "20000", "8192", "8192"], host.os
        sysctl_file = sh(fleet, host, "cat /etc/sysctl.d/90-hostcheck-training.conf")
        assert "vm.swappiness" in sysctl_file and "vm.max_map_count" in sysctl_file
        probe = sh(
            fleet,
            host,
            f"{VENV}/bin/python -c 'import json, PIL, PIL.features, importlib.metadata as m; "
            'print(json.dumps([PIL.__version__, PIL.features.check_feature("libjpeg_turbo"), '
            'm.version("pillow-simd")]))\'',
        )
        version, turbo, simd = json.loads(probe)
        assert turbo is True and simd.startswith(version.split(".post")[0]), host.os
        check = fleet.ssh(host, f"{VENV}/bin/hostcheck run --config /etc/hostcheck/config.yaml")
        assert check.returncode == 0, f"{host.os}: {check.stdout[-3000:]}"
        report = json.loads(sh(fleet, host, "cat /var/lib/hostcheck/report.json"))
        assert report["schema_version"] == 1 and report["exit_code"] == 0


def test_build_packages_went_in_under_each_distributions_names(converged):
    fleet, _ = converged
    for host in fleet.hosts():
        wanted = BUILD_PACKAGES[host.os]
        if FACTS[host.os][3] == "dnf":
            query = f"rpm -q --qf '%{{NAME}}\\n' {' '.join(wanted)}"
        else:
            query = f"dpkg-query -W -f='${{Package}}\\n' {' '.join(wanted)}"
        assert sh(fleet, host, query).split() == wanted, host.os


def test_services_get_the_limits_and_no_unit_failed(converged):
    fleet, _ = converged
    for host in fleet.hosts():
        assert sh(fleet, host, "systemctl --failed --no-legend --plain") == "", host.os
        shown = sh(fleet, host, "systemctl show -p DefaultLimitNOFILESoft -p DefaultLimitNOFILE")
        values = dict(line.split("=", 1) for line in shown.splitlines())
        assert values == {"DefaultLimitNOFILESoft": "16384", "DefaultLimitNOFILE": "20000"}, host.os


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
