"""Bad variable values stop site.yml before any change, with a message naming the variable."""

from __future__ import annotations

import shlex

import pytest

from tests.integration.ansible import run_playbook
from tests.integration.cases import cases_of, refusal, run_cases
from tests.integration.site_checks import sh

# What this module covers (tests/selection.py: a change to these paths selects it)
COVERS = (
    "roles/*/meta/argument_specs.yml",
    "plugins/action/*_validate.py",
    "plugins/modules/*_validate.py",
    "plugins/plugin_utils/*_rules.py",
    "plugins/modules/free_space_ready.py",
    "tests/integration/playbooks/validate_all.yml",
    "playbooks/provision.yml",
    "playbooks/tasks/group_roles.yml",
    "playbooks/tasks/validate_roles.yml",
    "plugins/action/role_switch.py",
    "plugins/modules/role_switch.py",
    "roles/*/meta/main.yml",
    "tests/sandbox/oskinds.py",
    "tests/integration/site_checks.py",
    "tests/integration/cases.py",
)

pytestmark = pytest.mark.integration


BAD_INPUT = [
    ({"shm_size": "-1G"}, "shm_size"),
    ({"shm_size": "64"}, None),  # unit-less bytes are allowed: 64 bytes is below what is used
    ({"shm_size": "12 parsecs"}, "shm_size"),
    ({"shm_size": "150%"}, "shm_size"),
    ({"shm_size": "64XB"}, "shm_size"),
    ({"ulimits_nofile_soft": "lots"}, "ulimits_nofile_soft"),
    ({"ulimits_nofile_soft": -5}, "ulimits_nofile_soft"),
    ({"ulimits_nofile_soft": 1.5}, "ulimits_nofile_soft"),
    ({"ulimits_memlock_soft": "8X"}, "ulimits_memlock_soft"),
    ({"ulimits_nofile_soft": 20000, "ulimits_nofile_hard": 16384}, "ulimits_nofile"),
    ({"ulimits_users": []}, "ulimits_users"),
    ({"sysctl_tuning_cpu_governor": "turbo"}, "sysctl_tuning_cpu_governor"),
    ({"sysctl_tuning_thp_enabled": "sometimes"}, "sysctl_tuning_thp_enabled"),
    ({"sysctl_tuning_settings": {"vm.swappiness": "ten"}}, "sysctl_tuning_settings"),
    ({"pillow_simd_venv": "venvs/train"}, "pillow_simd_venv"),
    ({"pillow_simd_venv": "/etc/hostname"}, "pillow_simd_venv"),
    ({"pillow_simd_version": "latest"}, "pillow_simd_version"),
    ({"pillow_simd_avx2": "sometimes"}, "pillow_simd_avx2"),
    ({"hostcheck_fail_on": "error"}, "hostcheck_fail_on"),
    ({"hostcheck_config": {"checks": {"shm": {"min_size": "150%"}}}}, "hostcheck_config"),
]


BAD_ROWS = [row for row in BAD_INPUT if row[1]]
STATE = "df -B1 --output=size /dev/shm | tail -1; ls /etc/security/limits.d; ls /opt"


@pytest.fixture(scope="module")
def bad_run(make_fleet):
    """Every bad row in one site.yml run on one host: each row an inventory alias of the host
    with its row as host variables (tests/integration/cases.py)."""
    fleet = make_fleet("site-bad", hosts=1)
    (host,) = fleet.hosts()
    before = sh(fleet, host, STATE)
    return fleet, host, before, run_cases(fleet, host, "site.yml", cases_of(BAD_ROWS))


@pytest.mark.parametrize(
    ("row", "named"), [(index, named) for index, (_, named) in enumerate(BAD_ROWS)]
)
def test_bad_input_stops_before_any_change(bad_run, row, named):
    fleet, host, before, run = bad_run
    assert named in refusal(run, row)
    assert sh(fleet, host, STATE) == before


# Identity files of OSes the roles do not support, written over a Rocky 9 look-alike: CentOS 7
# (end of life; /etc/centos-release as it ships) and a distribution Ansible does not know.
UNSUPPORTED = {
    "CentOS 7": {
        "/etc/os-release": 'NAME="CentOS Linux"\nVERSION="7 (Core)"\nID="centos"\n'
        'ID_LIKE="rhel fedora"\nVERSION_ID="7"\nPRETTY_NAME="CentOS Linux 7 (Core)"\n',
        "/etc/centos-release": "CentOS Linux release 7.9.2009 (Core)\n",
        "/etc/redhat-release": "CentOS Linux release 7.9.2009 (Core)\n",
        "/etc/system-release": "CentOS Linux release 7.9.2009 (Core)\n",
    },
    "Plan 9": {
        "/etc/os-release": 'NAME="Plan 9"\nID=plan9\nVERSION_ID="4"\nPRETTY_NAME="Plan 9"\n',
    },
}
ROLES = (
    "nvidia_driver",
    "shm",
    "ulimits",
    "sysctl_tuning",
    "pillow_simd",
    "dataset_staging",
    "hostcheck",
    "cuda_check",
)


@pytest.mark.parametrize("name", sorted(UNSUPPORTED))
def test_an_unsupported_os_fails_every_role_before_any_change(make_fleet, name):
    from tests.sandbox.oskinds import KINDS

    fleet = make_fleet(f"unsupported-{name.split()[0].lower()}", os_kinds=[KINDS["rocky9"]])
    (host,) = fleet.hosts()
    remove = "rm -f /etc/rocky-release /etc/redhat-release /etc/system-release /usr/lib/os-release"
    writes = "; ".join(
        f"printf %s {shlex.quote(text)} > {path}" for path, text in UNSUPPORTED[name].items()
    )
    sh(fleet, host, f"{remove}; {writes}")
    before = sh(fleet, host, STATE)
    site = run_playbook(fleet, "site.yml")
    assert site.returncode != 0
    assert site.changed(host.name) == 0
    (first,) = site.messages(host.name)  # the first role validated stops the host
    assert first.startswith(f"nvidia_driver: {name}") and "is not supported" in first, first
    each = run_playbook(fleet, "tests/integration/playbooks/validate_all.yml")
    messages = each.messages(host.name)
    for role in ROLES:
        assert any(m.startswith(f"{role}: {name}") and "not supported" in m for m in messages), (
            role,
            messages,
        )
    assert each.changed(host.name) == 0
    assert sh(fleet, host, STATE) == before
