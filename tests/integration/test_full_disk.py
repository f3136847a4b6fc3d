"""A full root file system on a sandbox host (its root on a 600 MiB tmpfs of its own, the
fleet's root_space, so filling it leaves this machine's disk alone): the converge fails before
any change with one line naming the file system, and leaves /etc/fstab, the limits file and
the live /dev/shm as they were, with no temporary file next to them; once space is freed the
next converge succeeds and the one after it changes nothing. Read from the host (checksums,
fstab's line, the mounted /dev/shm), not only from Ansible's recap."""

from __future__ import annotations

import pytest

from tests.integration.ansible import run_playbook
from tests.sandbox.oskinds import KINDS

# What this module covers (tests/selection.py: a change to these paths selects it)
COVERS = (
    "plugins/modules/free_space_ready.py",
    "plugins/module_utils/root_trust.py",
    "plugins/module_utils/mountinfo.py",
    "playbooks/provision.yml",
)

pytestmark = [pytest.mark.integration, pytest.mark.faults]
TAGS = "shm,ulimits"
LIMITS_FILE = "/etc/security/limits.d/90-hostcheck-training.conf"
MANAGED = f"/etc/fstab {LIMITS_FILE} /etc/systemd/system.conf.d/90-hostcheck-training.conf"
FILL = "/var/tmp/fill"
# what the converge in the fault asks for, both different from the first converge: the shm
# role must rewrite fstab and remount /dev/shm, the ulimits role rewrite its limits file
CHANGED = {"shm_size": "70%", "ulimits_nofile_soft": 12000}


def sh(fleet, host, command: str) -> str:
    done = fleet.ssh(host, command)
    assert done.returncode == 0, f"{command}: {done.stdout[-1500:]}{done.stderr[-1500:]}"
    return done.stdout


def host_state(fleet, host) -> dict:
    """The managed files' checksums, the live /dev/shm's options, Ansible's leftovers."""
    return {
        "md5": sh(fleet, host, f"md5sum {MANAGED}"),
        "shm": sh(fleet, host, "findmnt -n -o OPTIONS /dev/shm"),
        # the temporary files Ansible's modules write next to a file they replace
        "leftovers": sh(fleet, host, "find /etc -xdev -name '.ansible_tmp*' -o -name '*~'"),
    }


@pytest.fixture(scope="module")
def converged(make_fleet):
    """One Debian 12 host with a 600 MiB root, converged once with the defaults."""
    fleet = make_fleet("disk1", os_kinds=[KINDS["debian12"]], root_space="600M")
    (host,) = fleet.hosts()
    first = run_playbook(fleet, tags=TAGS)
    assert first.returncode == 0, first.failure_text(host.name)
    return fleet, host


def test_a_full_root_fails_naming_it_before_any_change(converged, record_property):
    fleet, host = converged
    before = host_state(fleet, host)
    assert before["leftovers"] == ""
    # dd stops at ENOSPC: the root is full
    fleet.ssh(host, f"dd if=/dev/zero of={FILL} bs=1M")
    assert sh(fleet, host, "df -B1 --output=avail / | tail -1").strip() == "0"
    record_property("fault", "the root file system full during a converge that rewrites fstab")

    run = run_playbook(fleet, tags=TAGS, extra_vars=CHANGED)
    assert run.returncode != 0 and run.failed_hosts() == [host.name]
    (message,) = run.messages(host.name)
    assert "\n" not in message
    assert message.startswith("the file system at / is full: it has 0 B free")
    assert "configuration (/etc)" in message and "free space there (df -h /)" in message
    assert run.changed(host.name) == 0, run.changed_tasks(host.name)
    assert host_state(fleet, host) == before


def test_once_space_is_freed_the_converge_succeeds_and_then_changes_nothing(converged):
    fleet, host = converged
    sh(fleet, host, f"rm -f {FILL}")
    run = run_playbook(fleet, tags=TAGS, extra_vars=CHANGED)
    assert run.returncode == 0, run.failure_text(host.name)
    assert run.changed(host.name) > 0
    again = run_playbook(fleet, tags=TAGS, extra_vars=CHANGED)
    assert again.returncode == 0, again.failure_text(host.name)
    assert again.changed(host.name) == 0, again.changed_tasks(host.name)

    fstab = sh(fleet, host, "grep ' /dev/shm ' /etc/fstab")
    assert fstab == "tmpfs /dev/shm tmpfs nosuid,nodev,size=70% 0 0\n"
    limits = sh(fleet, host, f"cat {LIMITS_FILE}").splitlines()
    assert "*\tsoft\tnofile\t12000" in limits and "root\tsoft\tnofile\t12000" in limits
    assert host_state(fleet, host)["leftovers"] == ""
