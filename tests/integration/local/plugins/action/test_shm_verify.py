"""The shm role's validate action through ansible-playbook on this machine: what it reads and says
would change."""

from __future__ import annotations

from tests.support.role_validation import validate


def test_the_action_reads_this_machine_once_and_says_what_would_change(tmp_path):
    first, again = validate("shm", {"shm_size": "25%"}, tmp_path)
    assert "failed" not in first, first.get("msg")
    assert first["values"]["option"] == "25%"
    assert first["values"]["fstab_line"].endswith(",size=25% 0 0")
    assert set(first["values"]["changes"]) <= {"fstab", "live"}
    assert again["values"] == first["values"]
    assert again["msg"] == "shm: validated earlier in this run"
