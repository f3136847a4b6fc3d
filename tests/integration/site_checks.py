"""What a host converged by site.yml with the sandbox's variables must show, read over fresh SSH
sessions, whatever its OS kind: test_os_matrix.py asks it of every kind but Debian 12, and
test_smoke.py of its Debian 12 host (the gate's converge is that kind's)."""

from __future__ import annotations

import json

from tests.integration.ansible import run_module

VENV = "/opt/venvs/train"
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


def sh(fleet, host, command: str) -> str:
    done = fleet.ssh(host, command)
    assert done.returncode == 0, f"{host.name}: {command}: {done.stderr}"
    return done.stdout.strip()


def gathered_as(fleet) -> dict[str, tuple[str, str, str, str]]:
    """Each host's OS kind -> what Ansible's facts call its distribution (FACTS' order)."""
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
    return seen


def assert_fresh_sessions_see_what_site_yml_set(fleet, host) -> None:
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
    # every setting, in a session of its own; the benchmarks the converge's run measured stay
    # out (the quick profile: 0.1 CPU-seconds against the default's 4)
    check = fleet.ssh(
        host, f"{VENV}/bin/hostcheck run --profile quick --config /etc/hostcheck/config.yaml"
    )
    assert check.returncode == 0, f"{host.os}: {check.stdout[-3000:]}"
    report = json.loads(sh(fleet, host, "cat /var/lib/hostcheck/report.json"))
    assert report["schema_version"] == 1 and report["exit_code"] == 0


def assert_build_packages_went_in_under_the_distributions_names(fleet, host) -> None:
    wanted = BUILD_PACKAGES[host.os]
    if FACTS[host.os][3] == "dnf":
        query = f"rpm -q --qf '%{{NAME}}\\n' {' '.join(wanted)}"
    else:
        query = f"dpkg-query -W -f='${{Package}}\\n' {' '.join(wanted)}"
    assert sh(fleet, host, query).split() == wanted, host.os


def assert_services_get_the_limits_and_no_unit_failed(fleet, host) -> None:
    assert sh(fleet, host, "systemctl --failed --no-legend --plain") == "", host.os
    shown = sh(fleet, host, "systemctl show -p DefaultLimitNOFILESoft -p DefaultLimitNOFILE")
    values = dict(line.split("=", 1) for line in shown.splitlines())
    assert values == {"DefaultLimitNOFILESoft": "16384", "DefaultLimitNOFILE": "20000"}, host.os
