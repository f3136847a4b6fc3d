"""The shm role's validate action through ansible-playbook on this machine."""

from __future__ import annotations

from tests.support.role_validation import validate


def test_the_action_validates_once_and_gives_the_same_values_again(tmp_path):
    first, again = validate("shm", {"shm_size": "25%", "shm_enabled": False}, tmp_path)
    assert first["values"] == {"option": "25%"} == again["values"]
    assert first["digest"] == again["digest"]
    assert again["msg"] == "shm: validated earlier in this run"


def test_the_action_fails_naming_the_variable(tmp_path):
    (failed,) = validate("shm", {"shm_size": "150%"}, tmp_path)
    assert failed["failed"] is True
    assert failed["msg"].startswith("shm_size: a percentage of RAM must be between 1% and 100%")
