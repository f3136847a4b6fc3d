"""A package manager busy when a converge starts, on a sandbox host: another process holds
dpkg's lock (as apt-daily or unattended-upgrades do after boot), or a killed dpkg left a package
unpacked but not configured. On a Debian 12 host and an Ubuntu 24.04 look-alike, the roles'
package steps (here the hostcheck role's own task file,
tests/integration/playbooks/package_lock.yml) wait for the lock and go on, fail after their
timeout naming the lock and its holder, and finish the interrupted install first.
Each scenario reads the host's package database afterwards, not Ansible's recap alone."""

from __future__ import annotations

import shlex

import pytest

from tests.integration.ansible import run_playbook

# What this module covers (tests/selection.py: a change to these paths selects it)
COVERS = (
    "plugins/modules/package_manager_ready.py",
    "plugins/modules/os_packages_missing.py",
    "plugins/module_utils/dpkg_status.py",
    "tests/integration/playbooks/package_lock.yml",
    "roles/*/tasks/setup-*.yml",
    "tests/sandbox/oskinds.py",
    "tests/sandbox/lookalike_*.py",
)

pytestmark = [pytest.mark.integration, pytest.mark.faults]
PLAYBOOK = "tests/integration/playbooks/package_lock.yml"
WAIT_TASK = (
    "hostcheck : Wait for other installs to let go of the package manager (apt-daily, "
    "dnf-makecache)"
)
HOLDER_UNIT = "fake-apt-daily"
# Holds dpkg's frontend lock as apt does (fcntl), for the seconds given.
HOLD = (
    "import fcntl, sys, time; lock = open('/var/lib/dpkg/lock-frontend', 'w'); "
    "fcntl.lockf(lock, fcntl.LOCK_EX); time.sleep(float(sys.argv[1]))"
)


@pytest.fixture(scope="module", params=["debian12", "ubuntu2404"])
def apt_host(request, make_fleet):
    """(fleet, host): the session fleet's Debian 12 host, then an Ubuntu 24.04 look-alike."""
    if request.param == "debian12":
        fleet = request.getfixturevalue("fleet")
        return fleet, next(h for h in fleet.hosts() if h.os == "debian12")
    sandbox = make_fleet("package-locks-ubuntu", hosts=1, os_kinds=request.param)
    (host,) = sandbox.hosts()
    return sandbox, host


def run(fleet, host, packages: list[str], timeout: int):
    return run_playbook(
        fleet,
        PLAYBOOK,
        {"lock_test_packages": packages, "lock_test_timeout": timeout},
        limit=host.name,
        timeout=600,
    )


def status(fleet, host, package: str) -> str:
    """dpkg's three status letters of the package ("ii " installed), or "" when unknown."""
    done = fleet.ssh(host, f"dpkg-query -W -f='${{db:Status-Abbrev}}' {package} 2>/dev/null")
    return done.stdout


# A holder that lets go once the role's wait has seen it: a few seconds after the wait's module
# starts on the host (its AnsiballZ folder appears in /tmp), or after two minutes without it.
SAW_THE_WAIT = "/run/holder-saw-the-wait"
UNTIL_WAITED = f"""
import glob, time
PAYLOADS = "/tmp/ansible_*package_manager_ready_payload_*"
before = set(glob.glob(PAYLOADS))
deadline = time.monotonic() + 120
while time.monotonic() < deadline and not set(glob.glob(PAYLOADS)) - before:
    time.sleep(0.1)
if set(glob.glob(PAYLOADS)) - before:
    open("{SAW_THE_WAIT}", "w").close()
time.sleep(5)  # the module looks at the locks as it starts, then once a second
"""
DPKG_HOLDER = "/run/hold-dpkg-lock.py"
HOLD_DPKG_UNTIL_WAITED = (
    "import fcntl\n"
    "lock = open('/var/lib/dpkg/lock-frontend', 'w')\n"
    "fcntl.lockf(lock, fcntl.LOCK_EX)\n" + UNTIL_WAITED
)


def install_holder(fleet, host, path: str, script: str) -> str:
    """Write a holder script that lets go once the wait has begun; its command line."""
    written = fleet.ssh(host, f"printf %s {shlex.quote(script)} > {path} && rm -f {SAW_THE_WAIT}")
    assert written.returncode == 0, written.stderr
    return f"/usr/bin/python3 {path}"


def saw_the_wait(fleet, host) -> bool:
    return fleet.ssh(host, f"test -e {SAW_THE_WAIT}").returncode == 0


def hold_lock(fleet, host, seconds: float | None = None) -> None:
    """A systemd service of the host holds the lock, as apt-daily.service would: for the
    seconds given, or until the role's wait has seen it."""
    if seconds is None:
        holder = install_holder(fleet, host, DPKG_HOLDER, HOLD_DPKG_UNTIL_WAITED)
    else:
        holder = f'/usr/bin/python3 -c "{HOLD}" {seconds}'
    command = (
        f"systemd-run --unit={HOLDER_UNIT} --collect {holder}"
        " && inode=$(stat -c %i /var/lib/dpkg/lock-frontend)"
        ' && for i in $(seq 50); do grep -q ":$inode " /proc/locks && exit 0; sleep 0.1; done;'
        " exit 1"
    )
    done = fleet.ssh(host, command)
    assert done.returncode == 0, done.stderr


def remove(fleet, host, *packages: str) -> None:
    fleet.ssh(
        host, f"systemctl stop {HOLDER_UNIT} 2>/dev/null; apt-get -y -q purge {' '.join(packages)}"
    )


def test_a_lock_released_within_the_timeout_is_waited_for(apt_host):
    fleet, host = apt_host
    remove(fleet, host, "hello")
    hold_lock(fleet, host)
    done = run(fleet, host, ["hello"], timeout=300)
    assert done.returncode == 0, done.failure_text(host.name)
    waited = done.task_results(WAIT_TASK)[host.name]
    assert waited["waited_s"] > 0, waited
    (holder,) = waited["holders"]
    assert holder["lock"] == "/var/lib/dpkg/lock-frontend"
    assert holder["unit"] == f"{HOLDER_UNIT}.service"
    assert holder["command"] == f"/usr/bin/python3 {DPKG_HOLDER}"
    assert saw_the_wait(fleet, host), "the holder let go without seeing the wait begin"
    assert status(fleet, host, "hello") == "ii "


def test_a_lock_held_past_the_timeout_fails_naming_its_holder(apt_host):
    fleet, host = apt_host
    remove(fleet, host, "hello")
    hold_lock(fleet, host, 300)
    try:
        done = run(fleet, host, ["hello"], timeout=3)
        assert done.returncode != 0
        (message,) = [m for m in done.messages(host.name) if "lock" in m]
        pid = done.task_results(WAIT_TASK)[host.name]["holders"][0]["pid"]
        assert message.startswith(
            f"the apt lock /var/lib/dpkg/lock-frontend is still held by process {pid} "
            "(/usr/bin/python3 -c import fcntl"
        )
        assert f"of {HOLDER_UNIT}.service after 3 s" in message
        assert f"systemctl stop {HOLDER_UNIT}.service" in message
        assert status(fleet, host, "hello") in ("", "un ")  # nothing installed
    finally:
        fleet.ssh(host, f"systemctl stop {HOLDER_UNIT}")


def test_a_package_dpkg_left_unconfigured_is_configured_first(apt_host):
    """dpkg killed between unpacking and configuring leaves "iU"; every later apt run would
    stop with "dpkg was interrupted". The wait task runs dpkg --configure -a, then apt goes on."""
    fleet, host = apt_host
    remove(fleet, host, "hello", "figlet")
    unpacked = fleet.ssh(
        host,
        "ls /var/lib/apt/lists/*_Packages* >/dev/null 2>&1 || apt-get update -q; "
        "cd /tmp && apt-get download -q hello && dpkg --unpack /tmp/hello_*.deb",
    )
    assert unpacked.returncode == 0, unpacked.stderr
    assert status(fleet, host, "hello") == "iU "
    done = run(fleet, host, ["figlet"], timeout=60)
    assert done.returncode == 0, done.failure_text(host.name)
    result = done.task_results(WAIT_TASK)[host.name]
    assert result["changed"] is True and result["repaired"] == ["hello"]
    assert status(fleet, host, "hello") == "ii "
    assert status(fleet, host, "figlet") == "ii "
    again = run(fleet, host, ["figlet"], timeout=60)
    assert again.returncode == 0 and again.changed(host.name) == 0


def test_a_package_dpkg_was_killed_unpacking_is_installed_again_then_configured(apt_host):
    """dpkg killed while it unpacks a package leaves it half-installed, reinstall required
    (what it writes to its status file before the first file). dpkg --configure -a passes it
    over, and a package depending on it, unpacked before the cut, fails to configure
    ("dependency problems"), as the driver's dkms package did after a power cut. The wait
    task has apt install the half-installed package again from the archive, then configures
    the rest."""
    fleet, host = apt_host
    remove(fleet, host, "toilet", "toilet-fonts", "figlet")
    cut = fleet.ssh(
        host,
        "ls /var/lib/apt/lists/*_Packages* >/dev/null 2>&1 || apt-get update -q; "
        "DEBIAN_FRONTEND=noninteractive apt-get install -y -q libcaca0 >/dev/null && "
        "cd /tmp && rm -f toilet*.deb && apt-get download -q toilet toilet-fonts && "
        "dpkg --unpack /tmp/toilet-fonts_*.deb /tmp/toilet_*.deb && "
        "sed -i '/^Package: toilet-fonts$/,/^$/s/^Status: .*/Status: install reinstreq "
        "half-installed/' /var/lib/dpkg/status",
    )
    assert cut.returncode == 0, cut.stderr
    assert (status(fleet, host, "toilet-fonts"), status(fleet, host, "toilet")) == ("iHR", "iU ")
    refused = fleet.ssh(host, "dpkg --configure -a")
    assert refused.returncode != 0, refused.stdout  # what the task alone did before
    assert "dependency problems" in refused.stderr, refused.stderr
    done = run(fleet, host, ["figlet"], timeout=60)
    assert done.returncode == 0, done.failure_text(host.name)
    result = done.task_results(WAIT_TASK)[host.name]
    assert result["changed"] is True and result["repaired"] == ["toilet", "toilet-fonts"]
    for package in ("toilet-fonts", "toilet", "figlet"):
        assert status(fleet, host, package) == "ii ", package
    assert fleet.ssh(host, "toilet -f future ok").returncode == 0


# ------------------------------------------------------------------ dnf (a Rocky 9 look-alike)

DNF_HOLDER_UNIT = "fake-dnf-makecache"


@pytest.fixture(scope="module")
def rocky(make_fleet):
    sandbox = make_fleet("package-locks", hosts=1, os_kinds="rocky9")
    (host,) = sandbox.hosts()
    return sandbox, host


DNF_HOLDER = "/run/hold-dnf-lock.py"
HOLD_DNF_UNTIL_WAITED = (
    "import os\nopen('/var/lib/dnf/rpmdb_lock.pid', 'w').write(str(os.getpid()))\n" + UNTIL_WAITED
)


def hold_dnf_lock(fleet, host, seconds: float | None = None) -> None:
    """A service writes its pid into dnf's rpmdb lock file and lives on, as dnf does: for the
    seconds given, or until the role's wait has seen it."""
    if seconds is None:
        holder = install_holder(fleet, host, DNF_HOLDER, HOLD_DNF_UNTIL_WAITED)
    else:  # systemd reads $$ as $
        holder = f"/bin/sh -c 'echo $$$$ > /var/lib/dnf/rpmdb_lock.pid; exec sleep {seconds}'"
    command = (
        f"rm -f /var/lib/dnf/rpmdb_lock.pid && systemd-run --unit={DNF_HOLDER_UNIT} --collect"
        f" {holder}"
        " && for i in $(seq 50); do test -s /var/lib/dnf/rpmdb_lock.pid && exit 0; sleep 0.1;"
        " done; exit 1"
    )
    done = fleet.ssh(host, f"mkdir -p /var/lib/dnf && {command}")
    assert done.returncode == 0, done.stderr


def rpm_installed(fleet, host, package: str) -> bool:
    return fleet.ssh(host, f"rpm -q {package}").returncode == 0


def test_dnf_lock_waited_for_then_held_past_the_timeout(rocky):
    fleet, host = rocky
    fleet.ssh(host, "rpm -e --nodeps python3-packaging")
    assert not rpm_installed(fleet, host, "python3-packaging")

    hold_dnf_lock(fleet, host, 300)
    try:
        held = run(fleet, host, ["python3-packaging"], timeout=3)
        assert held.returncode != 0
        (message,) = [m for m in held.messages(host.name) if "lock" in m]
        pid = held.task_results(WAIT_TASK)[host.name]["holders"][0]["pid"]
        assert message.startswith(
            f"the dnf lock /var/lib/dnf/rpmdb_lock.pid is still held by process {pid} (sleep 300)"
            f" of {DNF_HOLDER_UNIT}.service after 3 s"
        )
        assert not rpm_installed(fleet, host, "python3-packaging")
    finally:
        fleet.ssh(host, f"systemctl stop {DNF_HOLDER_UNIT}")

    hold_dnf_lock(fleet, host)
    done = run(fleet, host, ["python3-packaging"], timeout=300)
    assert done.returncode == 0, done.failure_text(host.name)
    waited = done.task_results(WAIT_TASK)[host.name]
    assert waited["waited_s"] > 0 and waited["holders"][0]["unit"] == f"{DNF_HOLDER_UNIT}.service"
    assert waited["holders"][0]["command"] == f"/usr/bin/python3 {DNF_HOLDER}"
    assert saw_the_wait(fleet, host), "the holder let go without seeing the wait begin"
    assert rpm_installed(fleet, host, "python3-packaging")
