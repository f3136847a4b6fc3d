"""The hostcheck timer's units as the role renders them (ansible-playbook on this machine): the
quick profile into the textfile folder, and systemd-analyze verify."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from ansible_collections.hostcheck.gpu_hosts.plugins.plugin_utils.systemd_quoting import (
    systemd_split,
)

from tests.paths import BIN
from tests.paths import CHECKOUT as REPO
from tests.support.systemd_units import verify_unit

RENDER = """
- hosts: localhost
  gather_facts: false
  vars:
    hostcheck_timer_enabled: true
    hostcheck_extra_args: [--dataset-path, /data/image net]
    hostcheck_config: {checks: {shm: {min_size: 50%}}}
  roles:
    - role: hostcheck
      tags: [never]
  tasks:
    - name: Render the units
      ansible.builtin.template:
        src: "@ROLE@/templates/{{ item }}.j2"
        dest: "@OUT@/{{ item }}"
        mode: "0644"
      loop: [hostcheck.service, hostcheck.timer]
"""


@pytest.fixture(scope="module")
def units(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("units")
    book = out / "render.yml"
    book.write_text(
        RENDER.replace("@ROLE@", str(REPO / "roles" / "hostcheck")).replace("@OUT@", str(out))
    )
    env = {
        **os.environ,
        "ANSIBLE_CONFIG": str(REPO / "ansible.cfg"),
        "ANSIBLE_ROLES_PATH": str(REPO / "roles"),
        "PATH": f"{BIN}:{os.environ['PATH']}",
    }
    done = subprocess.run(
        [
            str(BIN / "ansible-playbook"),
            *("-i", "localhost,", "-c", "local", str(book)),
            *("-e", f"ansible_python_interpreter={sys.executable}"),
        ],
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
        check=False,
    )
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    return out


def test_rendered_units_run_the_quick_profile_into_the_textfile_folder(units):
    service = (units / "hostcheck.service").read_text()
    (line,) = [x for x in service.splitlines() if x.startswith("ExecStart=")]
    assert systemd_split(line.removeprefix("ExecStart=")) == [
        "/opt/venvs/train/bin/hostcheck", "run", "--profile", "quick", "--fail-on", "fail",
        "--config", "/etc/hostcheck/config.yaml", "--schedule", "*:0/15",
        "--report", "prom:/var/lib/node_exporter/textfile_collector/hostcheck.prom",
        "--report", "json:/var/lib/hostcheck/timer.json",
        "--dataset-path", "/data/image net",
    ]  # fmt: skip
    assert "SuccessExitStatus=1" in service and "Type=oneshot" in service
    timer = (units / "hostcheck.timer").read_text()
    assert "OnCalendar=*:0/15" in timer and "RandomizedDelaySec=120" in timer


@pytest.mark.skipif(shutil.which("systemd-analyze") is None, reason="no systemd-analyze here")
def test_rendered_units_pass_systemd_analyze_verify(units):
    # the command is not installed on this machine: that is the only complaint allowed
    allowed = ("/opt/venvs/train/bin/hostcheck",)
    problems = verify_unit(units / "hostcheck.timer", allowed=allowed)
    assert problems == []
