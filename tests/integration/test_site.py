"""site.yml end to end on fresh sandbox hosts: converge, prove from fresh SSH sessions, idempotence,
check mode, and bad input stopped before any change."""

from __future__ import annotations

import json

import pytest
import yaml

from tests.integration.ansible import run_playbook

pytestmark = pytest.mark.integration
MiB = 2**20
VENV = "/opt/venvs/train"


@pytest.fixture(scope="module")
def converged(make_fleet):
    fleet = make_fleet("site", hosts=3)
    first = run_playbook(fleet, "site.yml")
    assert first.returncode == 0, first.failed_hosts() and [
        (h, first.messages(h)) for h in first.failed_hosts()
    ]
    return fleet, first


def sh(fleet, host, command):
    done = fleet.ssh(host, command)
    assert done.returncode == 0, f"{host.name}: {command}: {done.stderr}"
    return done.stdout.strip()


def test_fresh_sessions_see_what_site_yml_set(converged):
    fleet, _ = converged
    for host in fleet.hosts():
        memtotal_kib = int(sh(fleet, host, "awk '/MemTotal/{print $2}' /proc/meminfo"))
        size = int(sh(fleet, host, "df -B1 --output=size /dev/shm | tail -1"))
        assert size == -(-(memtotal_kib // 4) * 50 // 100) * 4096  # shm_size 50%
        assert "size=50%" in sh(fleet, host, "findmnt --fstab -n -o OPTIONS /dev/shm")
        limits = [sh(fleet, host, f"ulimit -{flag}") for flag in ("Sn", "Hn", "Sl", "Hl")]
        assert limits == ["16384", "20000", "8192", "8192"]
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
        assert turbo is True and simd.startswith(version.split(".post")[0])
        check = fleet.ssh(host, f"{VENV}/bin/hostcheck run --config /etc/hostcheck/config.yaml")
        assert check.returncode == 0, check.stdout[-3000:]
        report = json.loads(sh(fleet, host, "cat /var/lib/hostcheck/report.json"))
        assert report["schema_version"] == 1 and report["exit_code"] == 0


def test_second_run_changes_nothing(converged):
    fleet, _ = converged
    second = run_playbook(fleet, "site.yml")
    assert second.returncode == 0
    assert {h: s["changed"] for h, s in second.stats.items()} == {h.name: 0 for h in fleet.hosts()}


def test_check_diff_on_fresh_hosts(make_fleet):
    fresh = make_fleet("site-check", hosts=2)
    run = run_playbook(fresh, "site.yml", check=True, diff=True)
    assert run.returncode == 0, [(h, run.messages(h)) for h in run.failed_hosts()]
    for host in fresh.hosts():
        assert int(sh(fresh, host, "df -B1 --output=size /dev/shm | tail -1")) == 64 * MiB
        assert fresh.ssh(host, f"test -e {VENV}").returncode == 1


BAD_INPUT = [
    ({"shm_size": "-1G"}, "shm_size"),
    ({"shm_size": "64"}, None),  # unit-less bytes are allowed: 64 bytes is below what is used
    ({"shm_size": "12 parsecs"}, "shm_size"),
    ({"shm_size": "150%"}, "shm_size"),
    ({"shm_size": "1.5G"}, "shm_size"),
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
    """One host per bad row, each with its row as host_vars, all in one site.yml run."""
    fleet = make_fleet("site-bad", hosts=len(BAD_ROWS))
    host_vars = fleet.inventory.parent / "host_vars"
    host_vars.mkdir(exist_ok=True)
    hosts = fleet.hosts()
    for host, (variables, _) in zip(hosts, BAD_ROWS):
        (host_vars / f"{host.name}.yml").write_text(yaml.safe_dump(variables))
    before = {host.name: sh(fleet, host, STATE) for host in hosts}
    return fleet, hosts, before, run_playbook(fleet, "site.yml")


@pytest.mark.parametrize(
    ("row", "named"), [(index, named) for index, (_, named) in enumerate(BAD_ROWS)]
)
def test_bad_input_stops_before_any_change(bad_run, row, named):
    fleet, hosts, before, run = bad_run
    host = hosts[row]
    assert run.returncode != 0
    assert host.name in run.failed_hosts()
    assert run.changed(host.name) == 0
    assert named in " ".join(run.messages(host.name))
    assert sh(fleet, host, STATE) == before[host.name]
