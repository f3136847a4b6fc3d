"""The nvidia_driver role's validate action: nvidia_driver_enabled, the numeric ranges, the
variables together and against each OS's package table, each bad value named; the values the
tasks use (wanted, plan, the per-OS variables); and the action run on this machine."""

from __future__ import annotations

import pytest
import yaml
from ansible.errors import AnsibleFilterError
from ansible_collections.hostcheck.gpu_hosts.plugins.plugin_utils.numbers import check_numbers
from ansible_collections.hostcheck.gpu_hosts.plugins.plugin_utils.nvidia_driver_rules import (
    nvidia_driver_values,
)
from ansible_collections.hostcheck.gpu_hosts.plugins.plugin_utils.platforms import problem
from ansible_collections.hostcheck.gpu_hosts.plugins.plugin_utils.role_action import (
    Invalid,
    with_facts,
)

from tests.paths import CHECKOUT
from tests.support.os_vars import vars_file_for
from tests.support.role_arguments import checked, spec_refusal

ROLE = CHECKOUT / "roles" / "nvidia_driver"
DEFAULTS = yaml.safe_load((ROLE / "defaults" / "main.yml").read_text())
RANGES = yaml.safe_load((ROLE / "vars" / "main.yml").read_text())["__nvidia_driver_number_ranges"]
CUDA = "https://developer.download.nvidia.com/compute/cuda/repos"
FACTS = {
    "debian12": ("Debian", "12", "12.7", "Debian", "6.1.0-25-amd64", "x86_64"),
    "ubuntu2204": ("Ubuntu", "22", "22.04", "Debian", "5.15.0-105-generic", "x86_64"),
    "ubuntu2404": ("Ubuntu", "24", "24.04", "Debian", "6.8.0-31-generic", "aarch64"),
    "rocky9": ("Rocky", "9", "9.4", "RedHat", "5.14.0-427.el9_4.x86_64", "x86_64"),
    "rhel7": ("RedHat", "7", "7.9", "RedHat", "3.10.0-1160.el7.x86_64", "x86_64"),
    "centos7": ("CentOS", "7", "7.9", "RedHat", "3.10.0-1160.el7.x86_64", "x86_64"),
}


def facts(name: str) -> dict:
    keys = ("distribution", "distribution_major_version", "distribution_version", "os_family")
    return dict(zip(keys, FACTS[name][:4]), kernel=FACTS[name][4], architecture=FACTS[name][5])


def os_vars(host: dict) -> dict:
    """vars/<OS>.yml as validate.yml's include_vars task loads it, its {fact} fields filled in."""
    chosen = vars_file_for("nvidia_driver", host)
    return with_facts(yaml.safe_load(chosen.read_text()), host)


@pytest.mark.parametrize(("os_name", "shown"), [("centos7", "CentOS 7.9"), ("rhel7", "RedHat 7.9")])
def test_el7_is_refused_by_the_platform_check(os_name, shown):
    """EL 7 is past its end of life: the role's platform check (meta/main.yml: EL 8 and 9)
    refuses it naming nvidia_driver_enabled, before the package table is read."""
    host = facts(os_name)
    platforms = yaml.safe_load((ROLE / "meta" / "main.yml").read_text())["galaxy_info"]["platforms"]
    refused = problem({**host, "distribution_release": ""}, platforms, "nvidia_driver")
    assert refused.startswith(f"nvidia_driver: {shown} is not supported; the role runs on ")
    assert "EL 8, 9" in refused and "set nvidia_driver_enabled: false" in refused


def values(os_name: str = "debian12", **changes) -> dict:
    host = facts(os_name)
    return nvidia_driver_values({**DEFAULTS, **changes}, os_vars(host), host)


# ---------------------------------------------------------------- nvidia_driver_enabled


# ---------------------------------------------------------------- ranges


@pytest.mark.parametrize("value", [29, 86401, -5, "abc", True, 1.5, None, "900s"])
def test_reboot_timeout_out_of_range_is_named(value):
    with pytest.raises(AnsibleFilterError, match=r"^nvidia_driver_reboot_timeout: a whole number"):
        check_numbers({**DEFAULTS, "nvidia_driver_reboot_timeout": value}, RANGES)


def test_reboot_timeout_in_range_passes():
    for value in (30, 86400, "900"):
        numbers = check_numbers({**DEFAULTS, "nvidia_driver_reboot_timeout": value}, RANGES)
        assert numbers["nvidia_driver_reboot_timeout"] == int(value)


# ---------------------------------------------------------------- together and per OS


def test_the_defaults_on_debian():
    got = values("debian12")
    assert got["wanted"]["branch"] == "570" and got["wanted"]["source"] == "cuda"
    assert got["plan"]["driver"] == ["nvidia-open"]
    assert got["plan"]["headers"] == ["linux-headers-6.1.0-25-amd64"]
    assert got["plan"]["repository"] == {
        "name": "nvidia-cuda",
        "url": f"{CUDA}/debian12/x86_64",
        "key_url": f"{CUDA}/debian12/x86_64/3bf863cc.pub",
    }
    assert got["os"]["name"] == "Debian 12.7"
    assert got["os_vars"]["__nvidia_driver_package_manager"] == "apt"
    assert got["os_vars"]["__nvidia_driver_cuda_repo_os"] == "debian12"
    assert got["os_vars"]["__nvidia_driver_fabric_manager_spec"] == "{name}={version}-*"


def test_ubuntu_on_arm_uses_nvidias_sbsa_repository():
    got = values("ubuntu2404", nvidia_driver_source="cuda")
    assert got["plan"]["repository"]["url"] == f"{CUDA}/ubuntu2404/sbsa"
    assert values("ubuntu2404")["plan"]["driver"] == [
        "nvidia-headless-570-server-open",
        "nvidia-utils-570-server",
    ]


def test_rocky_gets_the_stream_and_the_dnf_variables():
    got = values("rocky9", nvidia_driver_branch="550")
    assert got["plan"]["module"] == "@nvidia-driver:550-open"
    assert got["os_vars"]["__nvidia_driver_package_manager"] == "dnf"
    assert got["os_vars"]["__nvidia_driver_versionlock_package"] == (
        "python3-dnf-plugin-versionlock"
    )
    assert got["os_vars"]["__nvidia_driver_cuda_repo_os"] == "rhel9"


def test_a_mirror_and_its_key():
    got = values(
        "rocky9",
        nvidia_driver_cuda_repo_url=" https://mirror.example/cuda/rhel9 ",
        nvidia_driver_cuda_repo_key_url="file:///etc/pki/nvidia.pub",
    )
    assert got["plan"]["repository"]["url"] == "https://mirror.example/cuda/rhel9"
    assert got["plan"]["repository"]["key_url"] == "file:///etc/pki/nvidia.pub"
    got = values("rocky9", nvidia_driver_cuda_repo_url="https://mirror.example/c")
    assert got["plan"]["repository"]["key_url"] == "https://mirror.example/c/D42D0685.pub"


@pytest.mark.parametrize(
    ("os_name", "changes", "variable", "words"),
    [
        ("debian12", {"nvidia_driver_branch": "latest"}, "nvidia_driver_branch", "three-digit"),
        ("debian12", {"nvidia_driver_branch": 5500}, "nvidia_driver_branch", "three-digit"),
        ("debian12", {"nvidia_driver_branch": True}, "nvidia_driver_branch", "three-digit"),
        (
            "debian12",
            {"nvidia_driver_mok_key": "MOK.priv", "nvidia_driver_mok_cert": "/MOK.der"},
            "nvidia_driver_mok_key",
            "an absolute path on the host",
        ),
        (
            "debian12",
            {"nvidia_driver_mok_key": "/MOK.priv", "nvidia_driver_mok_cert": "MOK.der"},
            "nvidia_driver_mok_cert",
            "an absolute path on the host",
        ),
        ("debian12", {"nvidia_driver_mok_key": "/k"}, "nvidia_driver_mok_cert", "go together"),
        ("debian12", {"nvidia_driver_mok_cert": "/c"}, "nvidia_driver_mok_key", "go together"),
        (
            "debian12",
            {"nvidia_driver_source": "distribution"},
            "nvidia_driver_source",
            "distribution is not available on Debian 12.7: use one of cuda",
        ),
        (
            "debian12",
            {"nvidia_driver_module_build": "precompiled"},
            "nvidia_driver_module_build",
            "not packaged by the cuda source on Debian 12.7",
        ),
        (
            "rocky9",
            {"nvidia_driver_module_build": "precompiled"},
            "nvidia_driver_module_build",
            "open precompiled modules are not packaged",
        ),
        (
            "ubuntu2204",
            {
                "nvidia_driver_module_build": "precompiled",
                "nvidia_driver_mok_key": "/k",
                "nvidia_driver_mok_cert": "/c",
            },
            "nvidia_driver_mok_key",
            "a MOK key signs only DKMS builds",
        ),
    ],
)
def test_bad_and_conflicting_values_name_the_variable(os_name, changes, variable, words):
    with pytest.raises(Invalid) as error:
        values(os_name, **changes)
    message = str(error.value)
    assert message.startswith(f"{variable}: ") and words in message, message
    assert "\n" not in message


@pytest.mark.parametrize(
    ("changes", "refused"),
    [
        (
            {"nvidia_driver_source": "nvidia"},
            "nvidia_driver_source must be one of: auto, distribution, cuda, got: nvidia",
        ),
        (
            {"nvidia_driver_kernel_modules": "closed"},
            "nvidia_driver_kernel_modules must be one of: open, proprietary, got: closed",
        ),
        (
            {"nvidia_driver_module_build": "kbuild"},
            "nvidia_driver_module_build must be one of: dkms, precompiled, got: kbuild",
        ),
        (
            {"nvidia_driver_fabric_manager": "sometimes"},
            "nvidia_driver_fabric_manager must be one of: auto, True, False, got: sometimes",
        ),
        (
            {"nvidia_driver_fabric_manager": "yes"},
            "nvidia_driver_fabric_manager must be one of: auto, True, False, got: yes",
        ),
        # what the spec's choices alone would take (the base refuses it): 1 for true, a list
        (
            {"nvidia_driver_fabric_manager": 1},
            "nvidia_driver_fabric_manager must be one of: auto, True, False, got: 1",
        ),
        (
            {"nvidia_driver_fabric_manager": [False]},
            "nvidia_driver_fabric_manager must be one of: auto, True, False, got: [False]",
        ),
    ],
)
def test_a_choice_not_offered_is_refused_by_the_argument_spec_first(changes, refused):
    assert spec_refusal("nvidia_driver", changes).endswith(f"value of {refused}")


def test_fabric_manager_given_as_text_true_is_a_choice():
    # -e nvidia_driver_fabric_manager=True: the spec reads it as its choice true
    assert (
        checked("nvidia_driver", {"nvidia_driver_fabric_manager": "True"})[
            "nvidia_driver_fabric_manager"
        ]
        is True
    )


# ---------------------------------------------------------------- the action on this machine
