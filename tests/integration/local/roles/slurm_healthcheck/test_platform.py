"""The slurm_healthcheck role refuses an OS its meta/main.yml does not list, as the roles with a
validate action do (plugins/plugin_utils/platforms.py): its tasks/platform.yml run by
ansible-playbook on this machine for each case at once, one local host per case with the
distribution facts of that OS."""

from __future__ import annotations

from tests.support.local_playbook import run_local

PLAYBOOK = """
- hosts: all
  gather_facts: false
  tasks:
    - name: Take this case's distribution facts
      ansible.builtin.set_fact:
        distribution: "{{ os[0] }}"
        distribution_version: "{{ os[1] }}"
        distribution_release: "{{ os[2] }}"
        distribution_major_version: "{{ os[1].split('.')[0] }}"
        cacheable: true
    - name: Refuse an unsupported OS as the role's validation does
      ansible.builtin.include_role:
        name: hostcheck.gpu_hosts.slurm_healthcheck
        tasks_from: platform
"""
CASES = {
    "debian12": (["Debian", "12", "bookworm"], ""),
    "debian13": (["Debian", "13", "trixie"], ""),
    "ubuntu2404": (["Ubuntu", "24.04", "noble"], ""),
    "rocky9": (["Rocky", "9.4", "Blue Onyx"], ""),
    "alma8": (["AlmaLinux", "8.10", "Cerulean Leopard"], ""),
    "ubuntu2004": (["Ubuntu", "20.04", "focal"], "Ubuntu 20.04 is not supported"),
    "centos7": (["CentOS", "7.9", "Core"], "CentOS 7.9 is not supported"),
    "plan9": (["Plan 9", "4", "4"], "Plan 9 4 is not supported"),
}


def test_only_the_platforms_of_meta_main_pass(tmp_path):
    hosts = {name: {"os": facts} for name, (facts, _) in CASES.items()}
    returncode, output = run_local(tmp_path, PLAYBOOK, hosts)
    results = output["plays"][0]["tasks"][-1]["hosts"]
    supported = "the role runs on Debian bookworm, trixie; Ubuntu jammy, noble; EL 8, 9"
    for name, (_, refused) in CASES.items():
        result = results[name]
        if refused:
            assert result.get("failed"), (name, result)
            assert result["msg"] == (
                f"slurm_healthcheck: {refused}; {supported} "
                "(set slurm_healthcheck_enabled: false for this host to leave it alone)"
            )
        else:
            assert not result.get("failed"), (name, result)
    assert returncode == 2  # the refused hosts failed
