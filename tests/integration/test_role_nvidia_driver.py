"""The nvidia_driver role over SSH on sandbox hosts: a host without a GPU is skipped and left
alone; a host made to look like a GPU host (tests/sandbox/fakegpu.py: PCI functions, a loaded
module version and mokutil faked in its own mount namespace, stand-in packages in a signed
local repository given as the CUDA mirror) takes the role's decisions for real: Secure Boot
refusal and MOK signing, install and holds, reboot decisions, Fabric Manager only with an
NVSwitch, branch drift refused, a mirror without the running kernel's headers."""

from __future__ import annotations

import platform

import pytest

from tests.integration.ansible import COLLECTION_PREFIX, run_playbook
from tests.integration.cases import case_name, cases_of, refusal, run_cases
from tests.sandbox.fakegpu import GPU, NIC, NVSWITCH, build_repo, push_repo
from tests.support.os_vars import LOAD_OS_VARS_TASK, READ_FACTS_TASK

# What this module covers (tests/selection.py: a change to these paths selects it)
COVERS = (
    "roles/nvidia_driver/*",
    "plugins/*/nvidia_driver*",
    "plugins/module_utils/pci.py",
    "tests/sandbox/fakegpu.py",
    "tests/integration/playbooks/fake_gpu.yml",
    "tests/integration/playbooks/nvidia_driver.yml",
    "plugins/modules/package_manager_ready.py",
    "plugins/modules/os_packages_missing.py",
    "plugins/module_utils/dpkg_status.py",
    "tests/integration/cases.py",
)

pytestmark = pytest.mark.integration
PLAYBOOK = "tests/integration/playbooks/nvidia_driver.yml"
FAKE = "tests/integration/playbooks/fake_gpu.yml"
KERNEL = platform.release()
MOK = {"nvidia_driver_mok_key": "/root/mok/MOK.priv", "nvidia_driver_mok_cert": "/root/mok/MOK.der"}
REPO = {
    "nvidia_driver_branch": "550",
    "nvidia_driver_cuda_repo_url": "file:///srv/fake-cuda",
    "nvidia_driver_cuda_repo_key_url": "file:///srv/fake-cuda/key.asc",
}
REBOOT_TASK = "nvidia_driver : Say whether a reboot is needed"
VERIFY_TASK = (
    "nvidia_driver : Verify the installed driver, its holds, nouveau and Fabric Manager "
    "(changes nothing)"
)


@pytest.fixture(scope="module")
def repos(tmp_path_factory):
    base = tmp_path_factory.mktemp("fake-cuda")
    return {
        "full": build_repo(base / "full", KERNEL),
        "no_headers": build_repo(base / "no-headers", KERNEL, headers=False),
    }


@pytest.fixture(scope="module")
def fleet(make_fleet):
    return make_fleet("nvidia_driver", hosts=2)


def fake(fleet, host, repo=None, pci=(GPU,), loaded="", secure_boot="disabled", enrolled=False):
    extra = {
        "fake_pci": list(pci),
        "fake_loaded_version": loaded,
        "fake_secure_boot": secure_boot,
        "fake_mok_enrolled": enrolled,
    }
    if repo is not None:
        push_repo(fleet, host, repo)
    done = run_playbook(fleet, FAKE, extra_vars=extra, limit=host.name)
    assert done.returncode == 0, done.stderr or done.output
    return done


def run(fleet, host, **extra):
    return run_playbook(fleet, PLAYBOOK, extra_vars=extra or None, limit=host.name)


def installed(fleet, host) -> dict[str, str]:
    """name -> 'version selection' of the NVIDIA packages dpkg has."""
    done = fleet.ssh(
        host, "dpkg-query -W -f='${Package} ${Version} ${Status}\\n' 'nvidia*' 'cuda*' 2>/dev/null"
    )
    found = {}
    for line in done.stdout.splitlines():
        name, version, want, _, state = line.split()
        if state == "installed":
            found[name] = f"{version} {want}"
    return found


def reboot_message(done, host) -> str:
    return done.task_results(REBOOT_TASK)[host.name]["msg"]


def role_results(done, host) -> list[tuple[str, dict]]:
    """(task name without the collection's prefix, result) of every task of the role's files
    the host ran (not the argument spec check Ansible puts before main.yml)."""
    return [
        (task["task"]["name"].removeprefix(COLLECTION_PREFIX), task["hosts"][host.name])
        for play in done.output["plays"]
        for task in play["tasks"]
        if host.name in task["hosts"]
        and task["task"]["name"].startswith(COLLECTION_PREFIX)
        and "Validating arguments against arg spec" not in task["task"]["name"]
    ]


def test_host_without_gpu_is_skipped_and_left_alone(fleet):
    """Validated (and read) once, the install one skipped task, verify not reading again."""
    host = fleet.hosts()[0]
    fake(fleet, host, pci=(NIC,))
    done = run(fleet, host)
    assert done.returncode == 0, done.stderr
    assert done.changed(host.name) == 0
    ran = role_results(done, host)
    assert [name for name, _ in ran] == [
        f"nvidia_driver : {LOAD_OS_VARS_TASK}",
        "nvidia_driver : Validate the variables",
        f"nvidia_driver : {READ_FACTS_TASK}",
        f"nvidia_driver : {LOAD_OS_VARS_TASK}",
        "nvidia_driver : Validate the variables",
        "nvidia_driver : Install the driver",
        VERIFY_TASK,
    ]
    assert "no NVIDIA GPU on the PCI bus" in ran[1][1]["msg"]
    assert ran[2][1]["skipped"] is True
    assert ran[4][1]["msg"] == "nvidia_driver: validated earlier in this run"
    assert ran[5][1]["skipped"] is True
    assert ran[6][1]["msg"] == (
        f"{host.name}: no NVIDIA GPU on the PCI bus and nvidia_driver_skip_without_gpu: nothing "
        "installed, nothing to verify"
    )
    assert installed(fleet, host) == {}
    assert fleet.ssh(host, "ls /etc/modprobe.d/hostcheck-blacklist-nouveau.conf").returncode != 0


BAD_INPUT = [
    ({"nvidia_driver_branch": "latest"}, "nvidia_driver_branch", "three-digit"),
    ({"nvidia_driver_branch": 5500}, "nvidia_driver_branch", "three-digit"),
    ({"nvidia_driver_source": "nvidia"}, "nvidia_driver_source", "nvidia"),
    ({"nvidia_driver_kernel_modules": "closed"}, "nvidia_driver_kernel_modules", "closed"),
    # Debian's only source is NVIDIA's repository, which has no precompiled modules
    (
        {"nvidia_driver_module_build": "precompiled"},
        "nvidia_driver_module_build",
        "not packaged",
    ),
    ({"nvidia_driver_source": "distribution"}, "nvidia_driver_source", "not available"),
    ({"nvidia_driver_mok_key": "/root/mok/MOK.priv"}, "nvidia_driver_mok_cert", "go together"),
    (
        {"nvidia_driver_mok_key": "MOK.priv", "nvidia_driver_mok_cert": "MOK.der"},
        "nvidia_driver_mok_key",
        "absolute path",
    ),
    (
        {"nvidia_driver_fabric_manager": "sometimes"},
        "nvidia_driver_fabric_manager",
        "sometimes",
    ),
]


@pytest.fixture(scope="module")
def bad_input_run(fleet):
    """Every bad value in one run on the second host, a case each (tests/integration/cases.py)."""
    host = fleet.hosts()[1]
    return host, run_cases(fleet, host, PLAYBOOK, cases_of(BAD_INPUT))


@pytest.mark.parametrize(
    ("index", "variable", "words"), [(i, v, w) for i, (_, v, w) in enumerate(BAD_INPUT)]
)
def test_bad_input_fails_before_any_change(fleet, bad_input_run, index, variable, words):
    host, done = bad_input_run
    refusal(done, index)
    message = " ".join(done.messages(case_name(index)))
    assert variable in message and words in message, message
    assert installed(fleet, host) == {}


def test_secure_boot_refuses_unsigned_dkms_modules(fleet, repos):
    host = fleet.hosts()[0]
    fake(fleet, host, repo=repos["full"], loaded="550.40.07", secure_boot="enabled")
    done = run(fleet, host, **REPO)
    assert done.returncode != 0
    message = " ".join(done.messages(host.name))
    assert "Secure Boot is enabled" in message and "nvidia_driver_mok_key" in message, message
    assert done.changed(host.name) == 0
    assert installed(fleet, host) == {}


def test_secure_boot_with_an_enrolled_mok_installs_holds_and_asks_for_a_reboot(fleet, repos):
    host = fleet.hosts()[0]
    fake(fleet, host, repo=repos["full"], loaded="550.40.07", secure_boot="enabled", enrolled=True)
    assert (
        fleet.ssh(
            host, "mkdir -p /root/mok && touch /root/mok/MOK.priv /root/mok/MOK.der"
        ).returncode
        == 0
    )
    done = run(fleet, host, **REPO, **MOK)
    assert done.returncode == 0, done.messages(host.name) or done.stderr
    assert installed(fleet, host) == {
        "nvidia-driver-pinning-550": "550.54.15-1 hold",
        "nvidia-open": "550.54.15-1 hold",
        "nvidia-persistenced": "550.54.15-1 install",
    }
    enabled = fleet.ssh(
        host, "systemctl is-enabled nvidia-persistenced; systemctl is-active nvidia-persistenced"
    )
    assert enabled.stdout.split() == ["enabled", "active"]
    module = fleet.ssh(host, f"modinfo -k {KERNEL} -F version nvidia")
    assert module.stdout.strip() == "550.54.15"
    mok = fleet.ssh(host, "cat /etc/dkms/framework.conf.d/hostcheck-mok.conf").stdout
    assert (
        "mok_signing_key=/root/mok/MOK.priv" in mok and "mok_certificate=/root/mok/MOK.der" in mok
    )
    blacklist = fleet.ssh(host, "cat /etc/modprobe.d/hostcheck-blacklist-nouveau.conf").stdout
    assert "blacklist nouveau" in blacklist
    sources = fleet.ssh(host, "cat /etc/apt/sources.list.d/nvidia-cuda.sources").stdout
    assert "URIs: file:///srv/fake-cuda/" in sources and "Signed-By:" in sources
    assert (
        "a reboot is needed (the loaded module is 550.40.07, the installed driver 550.54.15)"
        in (reboot_message(done, host))
    )

    again = run(fleet, host, **REPO, **MOK)
    assert again.returncode == 0 and again.changed(host.name) == 0


def test_a_needed_reboot_fails_when_asked_and_is_taken_when_allowed(fleet):
    host = fleet.hosts()[0]
    done = run(fleet, host, **REPO, **MOK, nvidia_driver_fail_if_reboot_required=True)
    assert done.returncode != 0
    assert any("a reboot is needed" in m for m in done.messages(host.name))
    # check mode: the reboot module says it would reboot, and does not
    checked = run_playbook(
        fleet,
        PLAYBOOK,
        extra_vars={**REPO, **MOK, "nvidia_driver_reboot_ok": True},
        limit=host.name,
        check=True,
    )
    assert checked.returncode == 0, checked.messages(host.name)
    assert checked.task_results("nvidia_driver : Reboot into the installed driver")[host.name][
        "changed"
    ]
    assert reboot_message(checked, host).endswith(
        "rebooting: the loaded module is 550.40.07, the installed driver 550.54.15"
    )


def test_loaded_driver_matching_the_installed_one_needs_no_reboot(fleet, repos):
    host = fleet.hosts()[0]
    fake(fleet, host, loaded="550.54.15", secure_boot="enabled", enrolled=True)
    done = run(fleet, host, **REPO, **MOK, nvidia_driver_fail_if_reboot_required=True)
    assert done.returncode == 0, done.messages(host.name)
    assert "no reboot needed: loaded 550.54.15, installed 550.54.15" in reboot_message(done, host)
    assert done.changed(host.name) == 0


def test_fabric_manager_comes_only_with_an_nvswitch(fleet):
    host = fleet.hosts()[0]
    assert "nvidia-fabricmanager" not in installed(fleet, host)
    fake(fleet, host, pci=(GPU, NVSWITCH), loaded="550.54.15", secure_boot="enabled", enrolled=True)
    done = run(fleet, host, **REPO, **MOK)
    assert done.returncode == 0, done.messages(host.name)
    assert installed(fleet, host)["nvidia-fabricmanager"] == "550.54.15-1 hold"


def test_another_branch_is_refused_and_nothing_is_removed(fleet):
    host = fleet.hosts()[0]
    before = installed(fleet, host)
    done = run(fleet, host, **{**REPO, "nvidia_driver_branch": "535"}, **MOK)
    assert done.returncode != 0
    message = " ".join(done.messages(host.name))
    assert "nvidia_driver_branch: 535 is asked for" in message and "branch 550" in message, message
    assert "nvidia_driver_allow_branch_change" in message
    assert done.changed(host.name) == 0
    assert installed(fleet, host) == before


def test_verify_notices_drift_and_the_next_run_repairs_it(fleet):
    """Someone unheld the driver and removed the nouveau blacklist after provisioning."""
    host = fleet.hosts()[0]
    assert run(fleet, host, **REPO, **MOK).returncode == 0
    drift = "apt-mark unhold nvidia-open && rm /etc/modprobe.d/hostcheck-blacklist-nouveau.conf"
    assert fleet.ssh(host, drift).returncode == 0
    verify = run_playbook(
        fleet,
        "playbooks/verify.yml",
        extra_vars={**REPO, **MOK},
        limit=host.name,
        tags="nvidia_driver",
    )
    assert verify.returncode != 0
    assert verify.task_results(VERIFY_TASK)[host.name]["msg"] == (
        "not held: nvidia-open | /etc/modprobe.d/hostcheck-blacklist-nouveau.conf does not "
        "blacklist nouveau"
    )
    repaired = run(fleet, host, **REPO, **MOK)
    assert repaired.returncode == 0, repaired.failure_text(host.name)
    assert repaired.task_results(VERIFY_TASK)[host.name]["msg"].startswith(
        "driver 550.54.15 (branch 550), module for "
    )
    assert installed(fleet, host)["nvidia-open"] == "550.54.15-1 hold"


def test_a_mirror_without_the_running_kernels_headers_fails_clearly(fleet, repos):
    host = fleet.hosts()[1]
    fake(fleet, host, repo=repos["no_headers"])
    done = run(fleet, host, **REPO)
    assert done.returncode != 0
    message = " ".join(done.messages(host.name))
    assert (
        f"linux-headers-{KERNEL} for the running kernel {KERNEL} could not be installed" in message
    )
    assert "never installs another kernel" in message
    assert installed(fleet, host) == {}
