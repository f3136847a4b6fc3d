"""site.yml end to end on fresh sandbox hosts: converge, prove from fresh SSH sessions, idempotence.
Check mode and bad input are in test_site_check.py and test_site_bad_input.py (they run beside
this module in another pytest worker)."""

from __future__ import annotations

import json

import pytest

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
