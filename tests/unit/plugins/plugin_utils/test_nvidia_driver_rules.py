"""The nvidia_driver role off the sandbox: what it would install on each OS (rendered from its
per-OS vars as the role loads them; Ubuntu and the RHEL family cannot run here), its decisions
as tables, and its probe against fixture trees."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml
from ansible_collections.hostcheck.gpu_hosts.plugins.filter.nvidia_driver import (
    nvidia_driver_refusals,
    nvidia_driver_versioned,
)
from ansible_collections.hostcheck.gpu_hosts.plugins.modules import (
    nvidia_driver_probe as probe_module,
)
from ansible_collections.hostcheck.gpu_hosts.plugins.plugin_utils.nvidia_driver_rules import (
    nvidia_driver_fabric_manager,
    nvidia_driver_installed_branches,
    nvidia_driver_os,
    nvidia_driver_packages,
    nvidia_driver_reboot,
    nvidia_driver_settings,
    nvidia_driver_upstream,
    nvidia_driver_version_mismatches,
)
from ansible_collections.hostcheck.gpu_hosts.plugins.plugin_utils.role_action import (
    Invalid,
    with_facts,
)

from tests.paths import CHECKOUT as REPO
from tests.support.os_vars import vars_file_for

ROLE = REPO / "roles" / "nvidia_driver"

FACTS = {
    "ubuntu2204": {
        "distribution": "Ubuntu",
        "distribution_major_version": "22",
        "distribution_version": "22.04",
        "os_family": "Debian",
        "kernel": "5.15.0-105-generic",
    },
    "ubuntu2404": {
        "distribution": "Ubuntu",
        "distribution_major_version": "24",
        "distribution_version": "24.04",
        "os_family": "Debian",
        "kernel": "6.8.0-31-generic",
    },
    "debian12": {
        "distribution": "Debian",
        "distribution_major_version": "12",
        "distribution_version": "12.7",
        "os_family": "Debian",
        "kernel": "6.1.0-25-amd64",
    },
    "rocky8": {
        "distribution": "Rocky",
        "distribution_major_version": "8",
        "distribution_version": "8.10",
        "os_family": "RedHat",
        "kernel": "4.18.0-553.el8_10.x86_64",
    },
    "rocky9": {
        "distribution": "Rocky",
        "distribution_major_version": "9",
        "distribution_version": "9.4",
        "os_family": "RedHat",
        "kernel": "5.14.0-427.13.1.el9_4.x86_64",
    },
    "rhel9": {
        "distribution": "RedHat",
        "distribution_major_version": "9",
        "distribution_version": "9.4",
        "os_family": "RedHat",
        "kernel": "5.14.0-427.13.1.el9_4.x86_64",
    },
}


def defaults() -> dict:
    return yaml.safe_load((ROLE / "defaults" / "main.yml").read_text())


def os_vars(facts: dict, **variables) -> dict:
    """This OS as the filters see it: the role's per-OS vars for these facts, loaded as the
    nvidia_driver_validate action loads them (first_found order, {fact} fields filled in), and
    put together by the action's nvidia_driver_os."""
    facts = {"architecture": "x86_64", **facts}
    chosen = vars_file_for("nvidia_driver", facts)
    settings = {**defaults(), **variables}
    return nvidia_driver_os(
        with_facts(yaml.safe_load(chosen.read_text()), facts),
        facts,
        settings["nvidia_driver_cuda_repo_url"],
        settings["nvidia_driver_cuda_repo_key_url"],
    )


def given(**changes) -> dict:
    d = defaults()
    base = {
        "branch": d["nvidia_driver_branch"],
        "source": d["nvidia_driver_source"],
        "modules": d["nvidia_driver_kernel_modules"],
        "build": d["nvidia_driver_module_build"],
        "fabric_manager": d["nvidia_driver_fabric_manager"],
        "mok_key": "",
        "mok_cert": "",
        "allow_branch_change": False,
        "modules_signed": False,
        "reboot_ok": False,
        "fail_if_reboot_required": False,
        "packages": [],
    }
    return {**base, **changes}


def plan(os_name: str, **changes) -> dict:
    os = os_vars(FACTS[os_name])
    settings = nvidia_driver_settings(given(**changes), os)
    packages = nvidia_driver_packages(os, settings, FACTS[os_name]["kernel"])
    return {**packages, "source": settings["source"]}


# ---------------------------------------------------------------- what each OS installs

CUDA = "https://developer.download.nvidia.com/compute/cuda/repos"
EXPECTED = [
    (
        "ubuntu2204",
        {},
        {
            "source": "distribution",
            "driver": ["nvidia-headless-570-server-open", "nvidia-utils-570-server"],
            "headers": ["linux-headers-5.15.0-105-generic"],
            "stream": "",
            "repository": None,
            "fabric_manager": ["nvidia-fabricmanager-570", "libnvidia-nscq-570"],
            "hold": ["nvidia-headless-570-server-open", "nvidia-utils-570-server"],
            "signed": False,
        },
    ),
    (
        "ubuntu2204",
        {"branch": "535", "modules": "proprietary", "build": "precompiled"},
        {
            "source": "distribution",
            "driver": [
                "linux-modules-nvidia-535-server-5.15.0-105-generic",
                "nvidia-headless-no-dkms-535-server",
                "nvidia-utils-535-server",
            ],
            "headers": [],
            "stream": "",
            "repository": None,
            "signed": True,
        },
    ),
    (
        "ubuntu2404",
        {"build": "precompiled"},
        {
            "driver": [
                "linux-modules-nvidia-570-server-open-6.8.0-31-generic",
                "nvidia-headless-no-dkms-570-server-open",
                "nvidia-utils-570-server",
            ],
            "headers": [],
            "signed": True,
        },
    ),
    (
        "ubuntu2404",
        {"source": "cuda"},
        {
            "source": "cuda",
            "pin": ["nvidia-driver-pinning-570"],
            "driver": ["nvidia-open"],
            "headers": ["linux-headers-6.8.0-31-generic"],
            "fabric_manager": ["nvidia-fabricmanager"],
            "hold": ["nvidia-driver-pinning-570", "nvidia-open"],
            "repository": {
                "name": "nvidia-cuda",
                "url": f"{CUDA}/ubuntu2404/x86_64",
                "key_url": f"{CUDA}/ubuntu2404/x86_64/3bf863cc.pub",
            },
        },
    ),
    (
        "debian12",
        {"modules": "proprietary"},
        {
            "source": "cuda",
            "driver": ["cuda-drivers"],
            "headers": ["linux-headers-6.1.0-25-amd64"],
            "repository": {
                "name": "nvidia-cuda",
                "url": f"{CUDA}/debian12/x86_64",
                "key_url": f"{CUDA}/debian12/x86_64/3bf863cc.pub",
            },
        },
    ),
    (
        "rocky8",
        {"branch": "550"},
        {
            "source": "cuda",
            "stream": "550-open",
            "module": "@nvidia-driver:550-open",
            "driver": [],
            "headers": ["kernel-devel-4.18.0-553.el8_10.x86_64"],
            "fabric_manager": ["nvidia-fabric-manager"],
            "repository": {
                "name": "nvidia-cuda",
                "url": f"{CUDA}/rhel8/x86_64",
                "key_url": f"{CUDA}/rhel8/x86_64/D42D0685.pub",
            },
        },
    ),
    (
        "rocky9",
        {"modules": "proprietary"},
        {
            "stream": "570-dkms",
            "headers": ["kernel-devel-5.14.0-427.13.1.el9_4.x86_64"],
            "hold": [
                "nvidia-driver*",
                "kmod-nvidia*",
                "nvidia-kmod-common",
                "nvidia-persistenced",
                "nvidia-modprobe",
            ],
        },
    ),
    (
        "rhel9",
        {"modules": "proprietary", "build": "precompiled"},
        {
            "stream": "570",
            "module": "@nvidia-driver:570",
            "headers": [],
            "signed": False,
            "repository": {
                "name": "nvidia-cuda",
                "url": f"{CUDA}/rhel9/x86_64",
                "key_url": f"{CUDA}/rhel9/x86_64/D42D0685.pub",
            },
        },
    ),
]


@pytest.mark.parametrize(("os_name", "changes", "expected"), EXPECTED)
def test_each_os_installs_the_table(os_name, changes, expected):
    got = plan(os_name, **changes)
    assert {key: got[key] for key in expected} == expected


def test_a_mirror_replaces_nvidias_repository_and_key():
    os = os_vars(
        FACTS["rocky9"],
        nvidia_driver_cuda_repo_url="https://mirror.example/cuda/rhel9",
        nvidia_driver_cuda_repo_key_url="file:///etc/pki/nvidia.pub",
    )
    assert os["repository_url"] == "https://mirror.example/cuda/rhel9"
    assert os["repository_key_url"] == "file:///etc/pki/nvidia.pub"
    os = os_vars(FACTS["rocky9"], nvidia_driver_cuda_repo_url="https://mirror.example/c")
    assert os["repository_key_url"] == "https://mirror.example/c/D42D0685.pub"


@pytest.mark.parametrize(
    ("os_name", "changes", "variable", "words"),
    [
        (
            "rocky9",
            {"source": "distribution"},
            "nvidia_driver_source",
            "not available on Rocky 9.4",
        ),
        ("rhel9", {"build": "precompiled"}, "nvidia_driver_module_build", "open precompiled"),
        (
            "ubuntu2204",
            {"source": "cuda", "build": "precompiled"},
            "nvidia_driver_module_build",
            "not packaged by the cuda source",
        ),
        ("ubuntu2204", {"branch": "5.5"}, "nvidia_driver_branch", "three-digit"),
        ("ubuntu2204", {"branch": True}, "nvidia_driver_branch", "three-digit"),
        (
            "ubuntu2204",
            {"build": "precompiled", "mok_key": "/k", "mok_cert": "/c"},
            "nvidia_driver_mok_key",
            "only DKMS builds",
        ),
        ("ubuntu2204", {"mok_cert": "/c"}, "nvidia_driver_mok_key", "go together"),
    ],
)
def test_conflicting_or_unsupported_choices_name_the_variable(os_name, changes, variable, words):
    with pytest.raises(Invalid) as error:
        plan(os_name, **changes)
    assert str(error.value).startswith(f"{variable}:") and words in str(error.value)


def test_the_argument_specs_know_every_default():
    specs = yaml.safe_load((ROLE / "meta" / "argument_specs.yml").read_text())["argument_specs"]
    options = specs["main"]["options"]
    assert set(options) == set(defaults())
    for name, value in defaults().items():
        assert options[name]["default"] == value, name


# ---------------------------------------------------------------- decisions

SETTINGS = nvidia_driver_settings(given(branch="550"), os_vars(FACTS["ubuntu2204"]))
PACKAGES = {"signed": False}


def test_installed_branches_come_from_packages_modules_and_streams():
    seen = nvidia_driver_installed_branches(
        {
            "packages": {
                "nvidia-utils-535-server": "535.183.01-0ubuntu0.22.04.1",
                "nvidia-container-toolkit": "1.14.3-1",
            },
            "built_version": "550.54.15",
            "loaded_version": "535.183.01",
            "dnf_stream": "550-dkms",
        }
    )
    assert sorted(seen) == ["535", "550"]
    assert seen["535"] == [
        "package nvidia-utils-535-server 535.183.01-0ubuntu0.22.04.1",
        "loaded module 535.183.01",
    ]
    assert "dnf module stream nvidia-driver:550-dkms" in seen["550"]


@pytest.mark.parametrize(
    ("probe", "changes", "words"),
    [
        (
            {"loaded_version": "535.183.01"},
            {},
            ["nvidia_driver_branch: 550 is asked for", "branch 535"],
        ),
        ({"dnf_stream": "535-dkms"}, {}, ["dnf module stream nvidia-driver:535-dkms"]),
        ({"secure_boot": "enabled"}, {}, ["Secure Boot is enabled", "nvidia_driver_mok_key"]),
        (
            {"secure_boot": "enabled", "mok_enrolled": False},
            {"mok_key": "/k", "mok_cert": "/c"},
            ["nvidia_driver_mok_cert: /c is not enrolled"],
        ),
        (
            {"mok_missing": ["/k"]},
            {"mok_key": "/k", "mok_cert": "/c"},
            ["not found on the host: /k"],
        ),
    ],
)
def test_refusals(probe, changes, words):
    refusals = nvidia_driver_refusals(probe, {**SETTINGS, **changes}, PACKAGES)
    assert len(refusals) == 1
    for word in words:
        assert word in refusals[0]


@pytest.mark.parametrize(
    ("probe", "changes", "packages"),
    [
        ({"loaded_version": "535.183.01"}, {"allow_branch_change": True}, PACKAGES),
        ({"loaded_version": "550.40.07"}, {}, PACKAGES),
        ({"secure_boot": "enabled"}, {}, {"signed": True}),
        ({"secure_boot": "enabled"}, {"modules_signed": True}, PACKAGES),
        (
            {"secure_boot": "enabled", "mok_enrolled": True},
            {"mok_key": "/k", "mok_cert": "/c"},
            PACKAGES,
        ),
        ({"secure_boot": "disabled"}, {}, PACKAGES),
    ],
)
def test_no_refusal(probe, changes, packages):
    assert nvidia_driver_refusals(probe, {**SETTINGS, **changes}, packages) == []


@pytest.mark.parametrize(
    ("probe", "changes", "local", "expected"),
    [
        (
            {"loaded_version": "550.40.07", "built_version": "550.54.15"},
            {},
            False,
            {"needed": True, "reboot": False, "fail": False, "load": False},
        ),
        (
            {"loaded_version": "550.40.07", "built_version": "550.54.15"},
            {"reboot_ok": True},
            False,
            {"needed": True, "reboot": True, "fail": False},
        ),
        (
            {"loaded_version": "550.40.07", "built_version": "550.54.15"},
            {"reboot_ok": True, "fail_if_reboot_required": True},
            True,
            {"needed": True, "reboot": False, "fail": True},
        ),
        (
            {"loaded_version": "550.40.07", "built_version": "550.54.15"},
            {"fail_if_reboot_required": True},
            False,
            {"needed": True, "reboot": False, "fail": True},
        ),
        (
            {"loaded_version": "550.54.15", "built_version": "550.54.15"},
            {"reboot_ok": True, "fail_if_reboot_required": True},
            False,
            {"needed": False, "reboot": False, "fail": False, "load": False},
        ),
        (
            {"built_version": "550.54.15", "nouveau_loaded": True},
            {"reboot_ok": True},
            False,
            {"needed": True, "reboot": True, "load": False},
        ),
        ({"built_version": "550.54.15"}, {}, False, {"needed": False, "load": True}),
        (
            {"driver_version": "550.54.15", "loaded_version": "535.183.01"},
            {},
            False,
            {"needed": True},
        ),
    ],
)
def test_reboot_decisions(probe, changes, local, expected):
    decision = nvidia_driver_reboot(probe, {**SETTINGS, **changes}, local)
    assert {key: decision[key] for key in expected} == expected


def test_reboot_messages_say_why_and_what_to_do():
    probe = {"loaded_version": "550.40.07", "built_version": "550.54.15"}
    local = nvidia_driver_reboot(probe, {**SETTINGS, "reboot_ok": True}, True)["message"]
    assert "local connection" in local and "never reboots the machine it runs on" in local
    asked = nvidia_driver_reboot(probe, SETTINGS, False)["message"]
    assert asked == (
        "a reboot is needed (the loaded module is 550.40.07, the installed driver 550.54.15); "
        "set nvidia_driver_reboot_ok: true to let the role reboot, or reboot the host yourself"
    )


@pytest.mark.parametrize(
    ("switches", "setting", "expected"),
    [
        ([], "auto", False),
        ([{"address": "x"}], "auto", True),
        ([], True, True),
        ([{"address": "x"}], False, False),
    ],
)
def test_fabric_manager_only_with_nvswitches_unless_told(switches, setting, expected):
    assert (
        nvidia_driver_fabric_manager({"nvswitches": switches}, {"fabric_manager": setting})
        is expected
    )


def test_versions():
    assert nvidia_driver_upstream("1:550.54.15-0ubuntu0.22.04.1") == "550.54.15"
    assert nvidia_driver_upstream("535.183.01-1.el9") == "535.183.01"
    assert nvidia_driver_upstream("1.14.3-1") is None
    assert nvidia_driver_versioned(
        ["nvidia-fabricmanager-550"], "{name}={version}-*", "550.54.15"
    ) == ["nvidia-fabricmanager-550=550.54.15-*"]
    probe = {
        "driver_version": "550.54.15",
        "packages": {
            "nvidia-fabricmanager-550": "550.54.14-1",
            "libnvidia-nscq-550": "550.54.15-1",
        },
    }
    assert nvidia_driver_version_mismatches(
        probe, ["nvidia-fabricmanager-550", "libnvidia-nscq-550", "x"]
    ) == ["nvidia-fabricmanager-550 550.54.14-1", "x not installed"]


# ---------------------------------------------------------------- the probe on fixture trees


def pci(root: Path, address: str, vendor: str, pci_class: str) -> None:
    device = root / "sys/bus/pci/devices" / address
    device.mkdir(parents=True)
    (device / "vendor").write_text(f"{vendor}\n")
    (device / "class").write_text(f"{pci_class}\n")
    (device / "device").write_text("0x2330\n")


def test_probe_finds_gpus_and_nvswitches_and_reads_versions(tmp_path):
    pci(tmp_path, "0000:3b:00.0", "0x10de", "0x030200")
    pci(tmp_path, "0000:3b:00.1", "0x10de", "0x040300")  # the GPU's audio function
    pci(tmp_path, "0000:5a:00.0", "0x10de", "0x068000")
    pci(tmp_path, "0000:17:00.0", "0x15b3", "0x020700")
    (tmp_path / "sys/module/nvidia").mkdir(parents=True)
    (tmp_path / "sys/module/nvidia/version").write_text("550.54.15\n")
    (tmp_path / "boot").mkdir()
    (tmp_path / "boot/vmlinuz-6.8.0-31-generic").write_text("")
    found = probe_module.probe(
        {"root": str(tmp_path), "mok_key": "", "mok_cert": "", "nouveau_file": ""}
    )
    assert [g["address"] for g in found["gpus"]] == ["0000:3b:00.0"]
    assert [s["address"] for s in found["nvswitches"]] == ["0000:5a:00.0"]
    assert found["loaded_version"] == "550.54.15"
    assert found["nouveau_loaded"] is False
    assert found["kernels"] == ["vmlinuz-6.8.0-31-generic"]
    assert found["secure_boot"] in ("unsupported", "enabled", "disabled")


@pytest.mark.parametrize(
    ("content", "blacklisted"),
    [
        (
            "# Written by the nvidia_driver role\nblacklist nouveau\noptions nouveau modeset=0\n",
            True,
        ),
        ("# blacklist nouveau\noptions nouveau modeset=0\n", False),
        (None, False),
    ],
)
def test_probe_reads_the_nouveau_blacklist_back(tmp_path, content, blacklisted):
    conf = "etc/modprobe.d/hostcheck-blacklist-nouveau.conf"
    if content is not None:
        (tmp_path / conf).parent.mkdir(parents=True)
        (tmp_path / conf).write_text(content)
    params = {"root": str(tmp_path), "mok_key": "", "mok_cert": "", "nouveau_file": f"/{conf}"}
    assert probe_module.probe(params)["nouveau_blacklisted"] is blacklisted
    assert probe_module.probe({**params, "nouveau_file": ""})["nouveau_blacklisted"] is None


def test_probe_reads_secure_boot_from_the_efi_variable(tmp_path):
    efivar = tmp_path / probe_module.EFI_SECURE_BOOT
    efivar.parent.mkdir(parents=True)
    efivar.write_bytes(b"\x06\x00\x00\x00\x01")
    if probe_module.shutil.which("mokutil"):
        pytest.skip("mokutil is installed here and answers for this machine")
    assert probe_module.secure_boot(str(tmp_path)) == "enabled"
    efivar.write_bytes(b"\x06\x00\x00\x00\x00")
    assert probe_module.secure_boot(str(tmp_path)) == "disabled"
    assert probe_module.secure_boot(str(tmp_path / "none")) == "unsupported"
