"""The cuda_check role's validate action through ansible-playbook on this machine."""

from __future__ import annotations

from tests.support.role_validation import validate


def test_the_action_validates_once(tmp_path):
    first, again = validate("cuda_check", {"cuda_check_toolkit_version": "12.4"}, tmp_path)
    assert "failed" not in first, first.get("msg")
    assert first["values"]["settings"]["cuda_check_toolkit_version"] == "12.4"
    assert again["values"] == first["values"]
    assert again["msg"] == "cuda_check: validated earlier in this run"


def test_the_action_fails_naming_the_variable(tmp_path):
    (failed,) = validate("cuda_check", {"cuda_check_cudnn_version": "9.x"}, tmp_path)
    assert failed["failed"] is True
    assert failed["msg"].startswith('cuda_check_cudnn_version: "" or a version of dotted digits')
