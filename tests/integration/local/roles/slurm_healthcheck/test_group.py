"""The slurm_healthcheck role's one task on every host (tasks/group.yml, in the play that
validates every role): the hosts it is on for join slurm_healthcheck_on, whose plays validate,
install and verify it; plainly off joins slurm_healthcheck_off; a value that is not plainly off
counts as on, and the validation there refuses what is not a boolean. Run by ansible-playbook
on this machine, one local host per value."""

from __future__ import annotations

from tests.paths import CHECKOUT as REPO
from tests.support.local_playbook import run_local

PLAYBOOK = """
- hosts: all
  gather_facts: false
  tasks:
    - name: Group the hosts by whether the Slurm health check is on
      ansible.builtin.import_role:
        name: hostcheck.gpu_hosts.slurm_healthcheck
        tasks_from: group

- hosts: "{{ groups['slurm_healthcheck_on'] | default([]) }}"
  gather_facts: false
  tasks:
    - name: Validate its argument spec where it is on
      ansible.builtin.validate_argument_spec:
        argument_spec: "{{ (lookup('file', spec) | from_yaml).argument_specs.validate.options }}"
      vars:
        spec: "{{ playbook_dir }}/argument_specs.yml"
"""
OFF = {"default": None, "false": False, "string_no": "no", "string_off": "off", "zero": 0}
ON = {"true": True, "string_yes": "yes", "one": 1, "maybe": "maybe"}


def test_on_hosts_join_their_group_and_the_rest_cost_one_task(tmp_path):
    hosts = {
        name: {} if value is None else {"slurm_healthcheck_enabled": value}
        for name, value in {**OFF, **ON}.items()
    }
    specs = REPO / "roles" / "slurm_healthcheck" / "meta" / "argument_specs.yml"
    (tmp_path / "argument_specs.yml").write_text(specs.read_text())
    returncode, output = run_local(tmp_path, PLAYBOOK, hosts)
    grouped, validated = output["plays"]
    for name in OFF:
        assert grouped["tasks"][0]["hosts"][name]["add_group"] == "slurm_healthcheck_off"
        assert output["stats"][name] == {**output["stats"][name], "ok": 1, "skipped": 0}
    for name in ON:
        assert grouped["tasks"][0]["hosts"][name]["add_group"] == "slurm_healthcheck_on"
        assert not grouped["tasks"][0]["hosts"][name].get("changed")
    assert sorted(validated["tasks"][-1]["hosts"]) == sorted(ON)
    assert not validated["tasks"][-1]["hosts"]["true"].get("failed")
    refused = validated["tasks"][-1]["hosts"]["maybe"]
    assert refused.get("failed") and "slurm_healthcheck_enabled" in refused["msg"], refused
    assert returncode == 2  # "maybe" refused where it is on
