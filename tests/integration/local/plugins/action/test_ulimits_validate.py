"""The ulimits role's validate action through ansible-playbook on this machine (switched off: the
host is not read)."""

from __future__ import annotations

from tests.support.role_validation import validate


def test_the_action_validates_once_and_gives_the_same_values_again(tmp_path):
    first, again = validate("ulimits", {"ulimits_enabled": False, "ulimits_users": ["*"]}, tmp_path)
    assert first["values"] == {
        "conf": {
            "nofile": {"soft": "65536", "hard": "1048576"},
            "memlock": {"soft": "unlimited", "hard": "unlimited"},
            "nproc": {"soft": "65536", "hard": "unlimited"},
        }
    }
    assert "pam_limits never applies '*' or @group lines to" in first["msg"]
    assert again["values"] == first["values"] and again["digest"] == first["digest"]
    assert again["msg"] == "ulimits: validated earlier in this run"


def test_the_action_fails_naming_the_variable(tmp_path):
    (failed,) = validate(
        "ulimits", {"ulimits_enabled": False, "ulimits_memlock_hard": "8MB"}, tmp_path
    )
    assert failed["failed"] is True
    assert failed["msg"].startswith("ulimits_memlock_hard: 8000000 bytes is not a whole")
