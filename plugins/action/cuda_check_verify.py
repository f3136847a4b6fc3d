"""Checks the driver, CUDA, cuDNN and torch versions of a host, in one task and one read of the
host: roles/cuda_check/files/cuda_facts.py run by the training venv's python (or, when the venv
has none yet, the OS's python3), then plugins/plugin_utils/cuda_check_rules.py: what the readings
mean (cuda_check_facts) and the decision.
main.yml runs it (registered as __cuda_check_checked) and verify.yml again: there it returns the
check main.yml made in the same run, given as `checked`, and reads the host only when verify.yml
runs alone.

    - hostcheck.gpu_hosts.cuda_check_verify:   # the arguments of cuda_check_validate, and
        checked: "{{ __cuda_check_checked | default(omit) }}"
      register: __cuda_check_checked

Besides msg (the verdict) the result has versions: the versions side by side, one line each, and
one line per problem and warning (a failure's message is the same text). The validation comes
first (the Validation of plugins/plugin_utils/cuda_check_rules.py; reused when the run
validated already).
Documented in plugins/modules/cuda_check_verify.py.
"""

from __future__ import annotations

from typing import ClassVar

from ansible_collections.hostcheck.gpu_hosts.plugins.plugin_utils.cuda_check_rules import (
    RUN_SCRIPT,
    Validation,
    cuda_check_facts,
    decided,
    os_paths,
    parse_read,
    script_args,
)
from ansible_collections.hostcheck.gpu_hosts.plugins.plugin_utils.role_action import Invalid


class ActionModule(Validation):
    VERIFIES = True
    # this action's registered result from main.yml earlier in the run
    INTERNAL: ClassVar[dict] = {"checked": {"type": "dict", "default": {}}}
    READING = ("checked",)

    def run(self, tmp=None, task_vars=None):
        self.versions: list[str] = []
        result = super().run(tmp, task_vars)
        if self.versions:
            result["versions"] = self.versions
            result["_ansible_verbose_always"] = True
        return result

    def switched_off(self) -> str:
        return self.SWITCHED_OFF

    def verify(self, values: dict) -> list[str]:
        earlier = self.reading["checked"]
        if earlier.get("versions") and not earlier.get("failed"):
            self.versions = list(earlier["versions"])
            return [f"checked earlier in this run: {earlier['msg']}"]
        settings = values["settings"]
        by_venv, facts = self.read_versions(settings["cuda_check_venv"])
        said = []
        if not by_venv:
            said.append(
                f"cuda_check_venv: {settings['cuda_check_venv']} has no bin/python on "
                f"{self.host}; the versions are read with "
                f"{facts.get('python')}, which may lack pynvml and torch"
            )
        try:
            line, self.versions = decided(facts, settings)
        except Invalid as failure:
            self.versions = str(failure).split("\n")
            raise
        return [*said, line]

    def read_versions(self, venv: str) -> tuple[bool, dict]:
        """(whether the venv's python read, the facts cuda_check_decide takes)."""
        facts = self.facts()
        os_vars = self.os_vars()
        args = script_args(
            self.arg("cuda_check_toolkit_paths"),
            os_paths(
                self.arg("cuda_check_cudnn_include_paths"),
                os_vars,
                "__cuda_check_os_cudnn_include_paths",
                facts,
            ),
            os_paths(
                self.arg("cuda_check_cudnn_library_paths"),
                os_vars,
                "__cuda_check_os_cudnn_library_paths",
                facts,
            ),
        )
        python = f"{venv.rstrip('/')}/bin/python"
        read = self.host_command(
            ["/bin/sh", "-c", RUN_SCRIPT, "sh", python, *args],
            stdin=self.role_file("cuda_facts.py"),
        )
        if read.get("rc") != 0:
            raise Invalid(
                f"cuda_check: reading the versions on the host failed (rc {read.get('rc')}): "
                f"{(read.get('stderr') or read.get('msg') or '').strip()}"
            )
        by_venv, reading = parse_read(read["stdout"])
        return by_venv, cuda_check_facts(reading)
