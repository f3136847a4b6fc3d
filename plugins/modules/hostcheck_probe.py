#!/usr/bin/python
# ruff: noqa: E402  (an Ansible module: its documentation comes before its imports)
"""Read-only probe of what the hostcheck role needs to know about a host, in one round trip;
asked (record), it keeps the host state a passing report was made for beside that report."""

from __future__ import annotations

DOCUMENTATION = r"""
module: hostcheck_probe
short_description: Read what the hostcheck role must change and whether its report still stands
description:
  - Reads, and never changes, the training venv's distributions (hostcheck's version, RECORD
    and requirements among them), the config file hostcheck runs with, the latest report,
    the hostcheck systemd units and the timer's state.
  - Asks the hostcheck in the venv for the host state a run of O(read.command) depends on,
    one digest per part (C(parts), `hostcheck run ... --host-state`, which runs no check);
    the parts are the command line, the profile as it resolves, hostcheck's installation,
    and what its checks read of the host (mounts, /etc/fstab, limits, PAM, sysctl files and
    values, CPU governors, memory, the NVIDIA driver, the DataLoader settings file). Reading
    it costs a fraction of a second, where hostcheck's checks cost seconds.
  - With O(read.dataloader_path), reads the DataLoader settings file `hostcheck loop --sweep
    --write` keeps there, asks the hostcheck in the venv whether it is valid and stands for
    this host (the rules training code reads it by), and reads what the workload is judged by
    (the physical cores and the NVIDIA GPUs on the PCI bus).
  - With O(record), after hostcheck passed, writes these parts and the report's digest to
    C(report.host-state.json) beside the report (the only thing it ever writes); the role
    then runs hostcheck again only when the report or a part changed.
options:
  read:
    description: What to read; the hostcheck role builds it once (C(__hostcheck_probe)).
    type: dict
    required: true
    suboptions:
      venv:
        description: The training venv hostcheck is installed into.
        type: path
        required: true
      command:
        description: >-
          The hostcheck command line whose report is kept (its executable first); run with
          --host-state to read the host state.
        type: list
        elements: str
        required: true
      config_file:
        description: The config file hostcheck runs with (hostcheck_config_file).
        type: path
        required: true
      report_dir:
        description: The folder of report.json and report.host-state.json.
        type: path
        required: true
      unit_dir:
        description: Where hostcheck.service and hostcheck.timer are written.
        type: path
        required: true
      textfile_dir:
        description: The folder the timer writes its Prometheus textfile to.
        type: path
        required: true
      dataloader_path:
        description: >-
          The DataLoader settings file (hostcheck_dataloader_path), read and a part of the
          state; not read when omitted.
        type: path
      dataloader_dataset:
        description: >-
          The folder the DataLoader sweep reads samples from (hostcheck_dataloader_dataset_path);
          whether it is a folder is read.
        type: str
        default: ""
  record:
    description: >-
      Write report.host-state.json for the current report.json (which must have passed,
      exit_code 0); nothing is written in check mode.
    type: bool
    default: false
author: hostcheck maintainers (@hostcheck)
"""

EXAMPLES = r"""
- name: Read what hostcheck needs on the host and record the state its report was made for
  hostcheck.gpu_hosts.hostcheck_probe:
    read: "{{ __hostcheck_probe }}"
    record: true
"""

RETURN = r"""
venv:
  description: >-
    {python (bin/python exists), distributions (canonical name to version), hostcheck
    (null when not installed, else {version, record (its RECORD lines with a sha256),
    requires (Requires-Dist)})}.
  type: dict
  returned: always
config:
  description: "{text, mode (octal string)} of the config file; null when it does not exist."
  type: dict
  returned: always
report:
  description: >-
    The latest report.json: {schema_version, tool_version, profile, started_at, exit_code,
    verdict, sha256}; {unreadable} when it is not JSON; null when there is none.
  type: dict
  returned: always
recorded:
  description: "report.host-state.json: {report: {sha256, started_at}, parts}; null when absent."
  type: dict
  returned: always
parts:
  description: >-
    The host state now, one digest per part (the same parts record keeps); null when the
    hostcheck in the venv cannot say (not installed yet, or it failed: see parts_unread).
  type: dict
  returned: always
parts_unread:
  description: Why parts is null; empty when it is not.
  type: str
  returned: always
units:
  description: "Per unit (hostcheck.service, hostcheck.timer): {text, mode, uid}, or null."
  type: dict
  returned: always
systemd:
  description: Whether systemd is the init system (/run/systemd/system exists).
  type: bool
  returned: always
timer:
  description: >-
    {UnitFileState, ActiveState, NeedDaemonReload} of hostcheck.timer (systemctl show);
    empty without systemd or without unit files.
  type: dict
  returned: always
dirs:
  description: Whether unit_dir, textfile_dir and report_dir exist, by path.
  type: dict
  returned: always
dataloader:
  description: >-
    {path, settings (the file's JSON object; null when absent; {malformed} when it is not
    JSON or not an object), verdict (null when absent, else what hostcheck.dataloader.read of
    the hostcheck in the venv says: {state (ok, malformed or stale), problem}; state
    unjudged where no hostcheck there can be imported), host ({physical_cores, gpus}, what
    the workload is judged by), dataset_is_dir}; null without read.dataloader_path.
  type: dict
  returned: always
"""

import glob
import hashlib
import json
import os
import stat
import sys

from ansible.module_utils.basic import AnsibleModule
from ansible_collections.hostcheck.gpu_hosts.plugins.module_utils.cpus import (
    core_keys,
    online_cpus,
    worker_cores,
)
from ansible_collections.hostcheck.gpu_hosts.plugins.module_utils.distributions import (
    header_values,
    normalize_name,
    parse_metadata,
)
from ansible_collections.hostcheck.gpu_hosts.plugins.module_utils.host_files import read_text
from ansible_collections.hostcheck.gpu_hosts.plugins.module_utils.pci import (
    GPU,
    nvidia_functions,
)

REPORT = "report.json"
RECORD = "report.host-state.json"
UNITS = ("hostcheck.service", "hostcheck.timer")
SETTINGS_MAX_BYTES = 2**20  # a DataLoader settings file is about 1 KB


def under(root: str, path: str) -> str:
    return os.path.join(root, path.lstrip("/"))


def site_packages(venv: str) -> list[str]:
    folders = glob.glob(f"{venv}/lib/python3*/site-packages")
    folders += glob.glob(f"{venv}/lib64/python3*/site-packages")
    unique: dict[str, str] = {}
    for folder in sorted(folders):
        unique.setdefault(os.path.realpath(folder), folder)
    return list(unique.values())


def read_venv(venv: str) -> dict:
    """The venv's python, its distributions (canonical name to version) and hostcheck's."""
    distributions: dict[str, str] = {}
    hostcheck = None
    for folder in site_packages(venv):
        for meta in sorted(glob.glob(f"{folder}/*.dist-info") + glob.glob(f"{folder}/*.egg-info")):
            metadata_file = "METADATA" if meta.endswith(".dist-info") else "PKG-INFO"
            text = read_text(os.path.join(meta, metadata_file))
            if text is None:
                continue
            headers = parse_metadata(text)
            name, version = headers.get("Name"), headers.get("Version")
            if not name or not version:
                continue
            distributions[normalize_name(name)] = version
            if normalize_name(name) == "hostcheck":
                lines = (read_text(os.path.join(meta, "RECORD")) or "").splitlines()
                hostcheck = {
                    "version": version,
                    "record": sorted(line for line in lines if ",sha256=" in line),
                    "requires": header_values(text, "Requires-Dist"),
                }
    return {
        "python": os.path.exists(f"{venv}/bin/python"),
        "distributions": distributions,
        "hostcheck": hostcheck,
    }


def file_state(path: str) -> dict | None:
    try:
        info = os.stat(path)
    except OSError:
        return None
    return {
        "text": read_text(path),
        "mode": f"{stat.S_IMODE(info.st_mode):04o}",
        "uid": info.st_uid,
    }


def read_report(path: str) -> dict | None:
    try:
        with open(path, "rb") as handle:
            raw = handle.read()
    except OSError:
        return None
    try:
        document = json.loads(raw)
        if not isinstance(document, dict):
            raise ValueError("not a JSON object")
    except ValueError as exc:
        return {"unreadable": str(exc)}
    return {
        "schema_version": document.get("schema_version"),
        "tool_version": (document.get("tool") or {}).get("version"),
        "profile": (document.get("profile") or {}).get("name"),
        "started_at": document.get("started_at"),
        "exit_code": document.get("exit_code"),
        "verdict": document.get("verdict"),
        "sha256": hashlib.sha256(raw).hexdigest(),
    }


def read_record(path: str) -> dict | None:
    text = read_text(path)
    if text is None:
        return None
    try:
        recorded = json.loads(text)
    except ValueError:
        return None
    return recorded if isinstance(recorded, dict) else None


def host_state(command: list[str], run) -> tuple[dict | None, str]:
    """The parts of the host state a report of this hostcheck command line stands for, as
    the hostcheck in the venv reads them (`--host-state`), and why they could not be read."""
    if not os.path.exists(command[0]):
        return None, f"{command[0]} does not exist"
    rc, out, err = run([*command, "--host-state"])
    if rc == 0:
        try:
            parts = json.loads(out)
        except ValueError:
            parts = None
        if isinstance(parts, dict):
            return parts, ""
        return None, f"{command[0]} run --host-state printed no JSON object"
    said = (err.strip().splitlines() or [f"exit status {rc}"])[-1]
    return None, f"{command[0]} run --host-state failed: {said}"


# ---------------------------------------------------------------- the DataLoader settings


def settings_rules(venv: str):
    """(hostcheck.dataloader of the hostcheck in the venv, '') where it can be imported here
    (standard library only), else (None, why not)."""
    for folder in site_packages(venv):
        if not os.path.isfile(os.path.join(folder, "hostcheck", "dataloader", "__init__.py")):
            continue
        # imported from the venv alone, whatever hostcheck this process had (none on a host)
        ours = [n for n in sys.modules if n == "hostcheck" or n.startswith("hostcheck.")]
        before = {name: sys.modules.pop(name) for name in ours}
        sys.path.insert(0, folder)
        try:
            from hostcheck import dataloader
        except Exception as exc:  # another Python, a broken install
            return None, f"hostcheck in {venv} cannot be imported here: {exc}"
        finally:
            sys.path.remove(folder)
            for name in [n for n in sys.modules if n == "hostcheck" or n.startswith("hostcheck.")]:
                del sys.modules[name]
            sys.modules.update(before)
        return dataloader, ""
    return None, f"hostcheck is not installed in {venv}"


def read_settings(path: str) -> dict | None:
    """The settings file's JSON object; None when absent, {malformed} when it is not one."""
    try:
        with open(path, "rb") as handle:
            raw = handle.read(SETTINGS_MAX_BYTES + 1)
    except FileNotFoundError:
        return None
    except OSError as exc:
        return {"malformed": f"cannot be read: {exc.strerror or exc}"}
    if len(raw) > SETTINGS_MAX_BYTES:
        return {"malformed": f"larger than {SETTINGS_MAX_BYTES} bytes"}
    try:
        document = json.loads(raw.decode("utf-8"))
    except (UnicodeDecodeError, ValueError) as exc:
        return {"malformed": f"not JSON: {str(exc).splitlines()[0]}"}
    if not isinstance(document, dict):
        return {"malformed": "not a JSON object"}
    return document


def settings_verdict(path: str, venv: str) -> dict:
    """What the hostcheck in the venv says of the settings file, by the call training code
    makes (hostcheck.dataloader.read): {state: ok, malformed or stale, problem}; state
    unjudged, and why, where no hostcheck there can be asked."""
    rules, why_not = settings_rules(venv)
    if rules is None:
        return {"state": "unjudged", "problem": why_not}
    try:
        rules.read(path)
    except rules.SettingsFileError as exc:
        return {"state": exc.state, "problem": exc.problem}
    return {"state": "ok", "problem": ""}


def physical_cores(root: str) -> int:
    """Cores (package, die, core) of the online CPUs, as hostcheck's cpu check counts them;
    the online CPUs (at least 1) where the topology is not readable."""

    def read(path: str) -> str | None:
        return read_text(under(root, path))

    def paths(pattern: str) -> list[str]:
        return glob.glob(under(root, pattern))

    return worker_cores(core_keys(read, online_cpus(read, paths)))


def nvidia_gpu_count(root: str) -> int:
    """NVIDIA GPUs on the PCI bus (no driver needed)."""
    functions = nvidia_functions(under(root, "/sys/bus/pci/devices"))
    return sum(kind == GPU for dummy, kind, dummy in functions)


def read_dataloader(spec: dict, root: str = "/") -> dict | None:
    path = spec.get("dataloader_path")
    if not path:
        return None
    dataset = spec.get("dataloader_dataset") or ""
    settings = read_settings(path)
    return {
        "path": path,
        "settings": settings,
        "verdict": None if settings is None else settings_verdict(path, spec["venv"]),
        "host": {
            "physical_cores": physical_cores(root),
            "gpus": nvidia_gpu_count(root),
        },
        "dataset_is_dir": os.path.isdir(dataset) if dataset else None,
    }


def timer_state(run) -> dict:
    rc, out, dummy = run(
        [
            "systemctl",
            "show",
            "hostcheck.timer",
            "--property=UnitFileState,ActiveState,NeedDaemonReload",
        ]
    )
    if rc != 0:
        return {}
    return dict(line.split("=", 1) for line in out.splitlines() if "=" in line)


def probe(spec: dict, run, root: str = "/") -> dict:
    venv = read_venv(spec["venv"])
    parts, parts_unread = host_state(spec["command"], run)
    units = {name: file_state(os.path.join(spec["unit_dir"], name)) for name in UNITS}
    systemd = os.path.isdir(under(root, "/run/systemd/system"))
    report_dir = spec["report_dir"]
    config = file_state(spec["config_file"])
    return {
        "venv": venv,
        "config": config and {"text": config["text"], "mode": config["mode"]},
        "report": read_report(os.path.join(report_dir, REPORT)),
        "recorded": read_record(os.path.join(report_dir, RECORD)),
        "parts": parts,
        "parts_unread": parts_unread,
        "units": units,
        "systemd": systemd,
        "timer": timer_state(run) if systemd and any(units.values()) else {},
        "dirs": {
            path: os.path.isdir(path)
            for path in (spec["unit_dir"], spec["textfile_dir"], report_dir)
        },
        "dataloader": read_dataloader(spec, root),
    }


def record_of(found: dict) -> dict | None:
    """What record keeps for the current report; None when it did not pass."""
    report = found["report"]
    if not report or report.get("unreadable") is not None or report.get("exit_code") != 0:
        return None
    return {
        "report": {"sha256": report["sha256"], "started_at": report["started_at"]},
        "parts": found["parts"],
    }


def write_record(recorded: dict, report_dir: str) -> None:
    path = os.path.join(report_dir, RECORD)
    partial = f"{path}.{os.getpid()}"
    with open(partial, "w", encoding="utf-8") as handle:
        json.dump(recorded, handle, indent=1, sort_keys=True)
        handle.write("\n")
    os.chmod(partial, 0o644)
    os.replace(partial, path)


def main() -> None:
    module = AnsibleModule(
        argument_spec={
            "read": {
                "type": "dict",
                "required": True,
                "options": {
                    "venv": {"type": "path", "required": True},
                    "command": {"type": "list", "elements": "str", "required": True},
                    "config_file": {"type": "path", "required": True},
                    "report_dir": {"type": "path", "required": True},
                    "unit_dir": {"type": "path", "required": True},
                    "textfile_dir": {"type": "path", "required": True},
                    "dataloader_path": {"type": "path"},
                    "dataloader_dataset": {"type": "str", "default": ""},
                },
            },
            "record": {"type": "bool", "default": False},
        },
        supports_check_mode=True,
    )
    spec = module.params["read"]
    found = probe(spec, module.run_command)
    changed = False
    if module.params["record"]:
        recorded = record_of(found)
        if recorded is None:
            report = os.path.join(spec["report_dir"], REPORT)
            module.fail_json(msg=f"{report}: no passing report to record the host state for")
        if found["parts"] is None:
            module.fail_json(msg=f"the host state cannot be read: {found['parts_unread']}")
        changed = recorded != found["recorded"]
        if changed and not module.check_mode:
            write_record(recorded, spec["report_dir"])
            found["recorded"] = recorded
    module.exit_json(changed=changed, **found)


if __name__ == "__main__":
    main()
