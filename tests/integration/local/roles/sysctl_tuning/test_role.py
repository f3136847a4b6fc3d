"""The sysctl_tuning role's boot files as the template module writes them, rendered by
ansible-playbook on this machine for each OS family."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from ansible import constants
from ansible_collections.hostcheck.gpu_hosts.plugins.plugin_utils.sysctl_tuning_rules import (
    Tuning,
    expected_boot_files,
)

from tests.paths import CHECKOUT as REPO

ROLE = REPO / "roles" / "sysctl_tuning"
OWN = "/etc/sysctl.d/90-hostcheck-training.conf"


def defaults() -> dict:
    return yaml.safe_load((ROLE / "defaults" / "main.yml").read_text())


RENDER_PLAYBOOK = """
- hosts: localhost
  gather_facts: false
  connection: local
  tasks:
    - name: Write the boot files as the role's tasks do
      ansible.builtin.template:
        src: "{{ templates }}/{{ item }}.j2"
        dest: "{{ out }}/{{ item }}"
        mode: "0644"
      loop: [hostcheck-cpu-governor.service, hostcheck-thp.service, tuned.conf]
"""


@pytest.mark.parametrize("family", ["Debian", "Ubuntu", "RedHat"])
def test_the_validation_renders_the_boot_files_as_the_template_module_writes_them(family, tmp_path):
    """The validation finds nothing to change only where a file equals what the template
    module would write: both render the same text from the same variables."""
    variables = {
        **defaults(),
        **yaml.safe_load((ROLE / "vars" / f"{family}.yml").read_text()),
        "__sysctl_tuning_thp_dir": "/sys/kernel/mm/transparent_hugepage",
    }
    extra = tmp_path / "vars.yml"
    extra.write_text(
        yaml.safe_dump({**variables, "templates": str(ROLE / "templates"), "out": str(tmp_path)})
    )
    (tmp_path / "render.yml").write_text(RENDER_PLAYBOOK)
    done = subprocess.run(
        [str(Path(sys.executable).parent / "ansible-playbook"), "render.yml", "-e", f"@{extra}"],
        cwd=tmp_path,
        env={**os.environ, "ANSIBLE_CONFIG": str(REPO / "ansible.cfg")},
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    method = "tuned" if family == "RedHat" else "systemd"
    tuning = Tuning(
        wanted={},
        governor=variables["sysctl_tuning_cpu_governor"],
        thp_modes={
            "enabled": variables["sysctl_tuning_thp_enabled"],
            "defrag": variables["sysctl_tuning_thp_defrag"],
        },
        sysctl_file=OWN,
        boot_method=method,
    )
    kernel = {"cpufreq": {"present": True}, "thp": {"present": True}}
    managed = constants.config.get_config_value("DEFAULT_MANAGED_STR")
    expected = expected_boot_files(
        tuning, kernel, str(ROLE / "templates"), {**variables, "ansible_managed": managed}
    )
    assert len(expected) == (1 if method == "tuned" else 2)
    for path, text in expected.items():
        assert (tmp_path / Path(path).name).read_text() == text, path
