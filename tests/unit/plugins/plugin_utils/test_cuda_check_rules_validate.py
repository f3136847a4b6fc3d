"""The cuda_check role's validate action: cuda_check_without_driver, the version variables,
cuda_check_venv, the folder lists and the two switches, each bad value refused with its
message; and the action run on this machine."""

from __future__ import annotations

import pytest
import yaml
from ansible_collections.hostcheck.gpu_hosts.plugins.plugin_utils.cuda_check_rules import (
    PATH_VARIABLES,
    VARIABLES,
    VERSION_VARIABLES,
    cuda_check_values,
)
from ansible_collections.hostcheck.gpu_hosts.plugins.plugin_utils.role_action import Invalid

from tests.paths import CHECKOUT
from tests.support.role_arguments import checked, spec_refusal

ROLE = CHECKOUT / "roles" / "cuda_check"
DEFAULTS = yaml.safe_load((ROLE / "defaults" / "main.yml").read_text())
GOOD = {**DEFAULTS, "cuda_check_venv": "/opt/venvs/train"}


def refused(**changes) -> str:
    with pytest.raises(Invalid) as error:
        cuda_check_values({**GOOD, **changes})
    return str(error.value)


def refused_after_the_spec(**changes) -> str:
    """The action's refusal of what the role's argument spec let through (and converted)."""
    with pytest.raises(Invalid) as error:
        cuda_check_values(checked("cuda_check", {**GOOD, **changes}))
    return str(error.value)


def test_every_variable_is_checked():
    assert set(VARIABLES) == set(DEFAULTS)


def test_the_defaults_and_good_values_pass_as_the_settings_of_the_decision():
    assert cuda_check_values(GOOD) == {
        "settings": {
            "cuda_check_venv": "/opt/venvs/train",
            "cuda_check_without_driver": "skip",
            "cuda_check_min_driver_version": "",
            "cuda_check_min_cuda_version": "",
            "cuda_check_toolkit_version": "",
            "cuda_check_cudnn_version": "",
            "cuda_check_torch_cuda_version": "",
            "cuda_check_require_torch_cuda": True,
        }
    }
    assert cuda_check_values(
        {
            **GOOD,
            "cuda_check_without_driver": "fail",
            "cuda_check_min_driver_version": "550.54.15",
            "cuda_check_min_cuda_version": "12.4",
            "cuda_check_toolkit_version": 12,
            "cuda_check_cudnn_version": "9",
            "cuda_check_torch_cuda_version": "12.10",
            "cuda_check_toolkit_paths": ["/usr/local", "/opt/cuda"],
            "cuda_check_cudnn_include_paths": ["/usr/include"],
            "cuda_check_enabled": "yes",
            "cuda_check_require_torch_cuda": 0,
        }
    )["settings"] == {
        "cuda_check_venv": "/opt/venvs/train",
        "cuda_check_without_driver": "fail",
        "cuda_check_min_driver_version": "550.54.15",
        "cuda_check_min_cuda_version": "12.4",
        "cuda_check_toolkit_version": "12",
        "cuda_check_cudnn_version": "9",
        "cuda_check_torch_cuda_version": "12.10",
        "cuda_check_require_torch_cuda": False,
    }


@pytest.mark.parametrize(("value", "shown"), [("never", "never"), (None, ""), ("", "")])
def test_without_driver_is_fail_or_skip(value, shown):
    # the role's argument spec refuses it, before the action's checks (null reads as "")
    assert spec_refusal("cuda_check", {"cuda_check_without_driver": value}).endswith(
        f"value of cuda_check_without_driver must be one of: fail, skip, got: {shown}"
    )


@pytest.mark.parametrize("name", VERSION_VARIABLES)
@pytest.mark.parametrize(
    ("value", "shown"),
    [
        (12.1, "12.1"),
        ("12.x", '"12.x"'),
        ("v12", '"v12"'),
        ("12.", '"12."'),
        (True, "true"),
        (None, "null"),
        ([12], "[12]"),
    ],
)
def test_versions_are_dotted_digits(name, value, shown):
    assert refused(**{name: value}) == (
        f'{name}: "" or a version of dotted digits such as "12.4" or "550.54.15", quoted '
        f"(unquoted, YAML reads 12.10 as the number 12.1); got {shown}"
    )


@pytest.mark.parametrize(
    ("value", "shown"),
    [
        ("opt/venvs/train", '"opt/venvs/train"'),
        ("/opt/my venv", '"/opt/my venv"'),
        (5, '"5"'),
        (None, '""'),
    ],
)
def test_the_venv_is_an_absolute_path_without_blanks(value, shown):
    assert refused_after_the_spec(cuda_check_venv=value) == (
        f"cuda_check_venv: the absolute path of the training venv, without blanks; got {shown}"
    )


@pytest.mark.parametrize("name", PATH_VARIABLES)
@pytest.mark.parametrize(
    ("value", "shown"),
    [
        (["usr/local"], '["usr/local"]'),
        (["/usr/local", 1], '["/usr/local", "1"]'),
        ("usr/local", '["usr/local"]'),
    ],
)
def test_folder_lists_are_lists_of_absolute_paths(name, value, shown):
    assert refused_after_the_spec(**{name: value}) == (
        f"{name}: a list of absolute paths; got {shown}"
    )


@pytest.mark.parametrize("name", PATH_VARIABLES)
def test_folder_lists_take_what_ansible_takes_for_a_list(name):
    """One folder as text is a list of one (Ansible's list type); a mapping and null are
    refused by the spec."""
    values = cuda_check_values(checked("cuda_check", {**GOOD, name: "/opt/cuda"}))
    assert values["settings"] == cuda_check_values(GOOD)["settings"]
    assert checked("cuda_check", {**GOOD, name: "/opt/cuda"})[name] == ["/opt/cuda"]
    assert f"argument '{name}' is of type dict" in spec_refusal("cuda_check", {name: {"a": "/x"}})
    assert f"argument '{name}' is of type NoneType" in spec_refusal("cuda_check", {name: None})


def test_the_first_bad_variable_is_named():
    message = refused(cuda_check_min_cuda_version="x", cuda_check_venv="relative")
    assert message.startswith("cuda_check_min_cuda_version: ")


# ---------------------------------------------------------------- the action on this machine
