"""The nvidia_driver role's decisions that its actions take, as pure functions of what the probe
read on the host and the role's variables, so each field lesson is a table row in tests/unit.
The filters the role's YAML uses are in plugins/filter/nvidia_driver.py.

nvidia_driver_settings(settings, os)       the variables (their choices checked by the role's
    argument spec) checked together (conflicts, the OS's support), normalised: {branch, source,
    modules, build, ...}; Invalid names the variable
nvidia_driver_packages(os, settings, kernel)  {driver, headers, fabric_manager, hold, stream,
    repository} this OS would install, from the per-OS table
nvidia_driver_installed_branches(probe)    branch -> where the host has it
nvidia_driver_reboot(probe, settings, local)  {needed, reboot, why, message}
nvidia_driver_fabric_manager(probe, settings)  true where Fabric Manager belongs
nvidia_driver_upstream('550.54.15-1ubuntu1')   '550.54.15' (no epoch, no packaging)
nvidia_driver_version_mismatches(probe, names)  names not at the driver's version
nvidia_driver_values(variables, os_vars, facts)  {wanted, plan, os, os_vars}: what validate returns
driver_verified(probe, values, checks)     what verify says holds, or Invalid naming each problem
Validation                                 the validate action (the verify action's base): the
    variables checked, then the host read once (hostcheck.gpu_hosts.nvidia_driver_probe)
"""

from __future__ import annotations

import re
from typing import ClassVar

from ansible_collections.hostcheck.gpu_hosts.plugins.plugin_utils.role_action import (
    Invalid,
    RoleAction,
)

_BRANCH = re.compile(r"^[0-9]{3}$")
_UPSTREAM = re.compile(r"^(?:[0-9]+:)?([0-9]{3}(?:\.[0-9]+){1,2})")


def _fail(variable: str, message: str) -> None:
    raise Invalid(f"{variable}: {message}")


def nvidia_driver_upstream(version: str | None) -> str | None:
    """The driver version in a package version ('1:550.54.15-0ubuntu1' -> '550.54.15')."""
    match = _UPSTREAM.match(str(version or "").strip())
    return match.group(1) if match else None


def _branch_of(version: str | None) -> str | None:
    upstream = nvidia_driver_upstream(version)
    return upstream.split(".")[0] if upstream else None


def nvidia_driver_settings(settings: dict, os: dict) -> dict:
    """The role's variables checked against each other and the OS's table."""
    branch = str(settings.get("branch", "")).strip()
    if isinstance(settings.get("branch"), bool) or not _BRANCH.match(branch):
        _fail(
            "nvidia_driver_branch",
            "a driver branch: its three-digit major version, e.g. '570'; "
            f"got {settings.get('branch')!r}",
        )
    source, modules, build = settings["source"], settings["modules"], settings["build"]
    key, cert = settings.get("mok_key") or "", settings.get("mok_cert") or ""
    for variable, path in (("nvidia_driver_mok_key", key), ("nvidia_driver_mok_cert", cert)):
        if path and not str(path).startswith("/"):
            _fail(variable, f"an absolute path on the host, or empty; got {path!r}")
    if bool(key) != bool(cert):
        _fail(
            "nvidia_driver_mok_key" if not key else "nvidia_driver_mok_cert",
            "nvidia_driver_mok_key and nvidia_driver_mok_cert go together (DKMS signs with the "
            "key; the certificate is what mokutil enrolls)",
        )
    if source == "auto":
        source = os["default_source"]
    table = os["table"].get(source)
    if not table:
        _fail(
            "nvidia_driver_source",
            f"{source} is not available on {os['name']}: use one of "
            f"{', '.join(sorted(os['table']))}",
        )
    flavour = table["flavours"].get(f"{modules}-{build}")
    if flavour is None:
        offered = ", ".join(sorted(table["flavours"]))
        _fail(
            "nvidia_driver_module_build"
            if build == "precompiled"
            else "nvidia_driver_kernel_modules",
            f"{modules} {build} modules are not packaged by the {source} source on {os['name']}; "
            f"it offers {offered} (nvidia_driver_kernel_modules-nvidia_driver_module_build)",
        )
    if key and build == "precompiled":
        _fail(
            "nvidia_driver_mok_key",
            "precompiled modules come signed by their packager; a MOK key signs only DKMS builds: "
            "leave it empty or use nvidia_driver_module_build: dkms",
        )
    return {
        "branch": branch,
        "source": source,
        "modules": modules,
        "build": build,
        "fabric_manager": settings["fabric_manager"],
        "mok_key": key,
        "mok_cert": cert,
        "allow_branch_change": bool(settings.get("allow_branch_change")),
        "modules_signed": bool(settings.get("modules_signed")),
        "reboot_ok": bool(settings.get("reboot_ok")),
        "fail_if_reboot_required": bool(settings.get("fail_if_reboot_required")),
        "packages": list(settings.get("packages") or []),
    }


def _fill(names: list[str], values: dict) -> list[str]:
    return [name.format(**values) for name in names]


def nvidia_driver_packages(os: dict, settings: dict, kernel: str) -> dict:
    """What this OS installs for these settings: package names, module stream, repository."""
    table = os["table"][settings["source"]]
    flavour = table["flavours"][f"{settings['modules']}-{settings['build']}"]
    values = {"branch": settings["branch"], "kernel": kernel}
    driver = settings["packages"] or _fill(flavour.get("packages", []), values)
    stream = flavour.get("stream", "").format(**values)
    headers = _fill(os["headers"], values) if settings["build"] == "dkms" else []
    fabric = _fill(table.get("fabric_manager", []), values)
    repository = None
    if settings["source"] == "cuda":
        repository = {
            "name": "nvidia-cuda",
            "url": os["repository_url"],
            "key_url": os["repository_key_url"],
        }
    pin = _fill(table.get("pin", []), values)
    return {
        "driver": driver,
        "stream": stream,
        "module": f"@nvidia-driver:{stream}" if stream else "",
        "headers": headers,
        "fabric_manager": fabric,
        "pin": pin,
        # apt holds name packages; dnf versionlock takes the specs of the table
        "hold": _fill(table["hold"], values) if "hold" in table else [*pin, *driver],
        "repository": repository,
        "signed": bool(flavour.get("signed")),
    }


def nvidia_driver_installed_branches(probe: dict) -> dict[str, list[str]]:
    """branch -> where it was seen: driver packages, the module built for the running kernel,
    the loaded module, the enabled dnf module stream."""
    seen: dict[str, list[str]] = {}
    for name, version in sorted((probe.get("packages") or {}).items()):
        branch = _branch_of(version)
        if branch:
            seen.setdefault(branch, []).append(f"package {name} {version}")
    for label, key in (
        ("module built for the running kernel", "built_version"),
        ("loaded module", "loaded_version"),
    ):
        branch = _branch_of(probe.get(key))
        if branch:
            seen.setdefault(branch, []).append(f"{label} {probe[key]}")
    stream = probe.get("dnf_stream") or ""
    match = re.match(r"^([0-9]{3})", stream)
    if match:
        seen.setdefault(match.group(1), []).append(f"dnf module stream nvidia-driver:{stream}")
    return seen


def nvidia_driver_fabric_manager(probe: dict, settings: dict) -> bool:
    """Fabric Manager runs the NVSwitch fabric: installed with NVSwitches only (auto)."""
    if settings["fabric_manager"] == "auto":
        return bool(probe.get("nvswitches"))
    return bool(settings["fabric_manager"])


def nvidia_driver_version_mismatches(probe: dict, names: list[str]) -> list[str]:
    """'nvidia-fabricmanager-550 550.54.14-1' for each of names installed at another version
    than the driver's, or missing."""
    driver = probe.get("driver_version")
    found = probe.get("packages") or {}
    return [
        f"{name} {found.get(name, 'not installed')}"
        for name in names
        if nvidia_driver_upstream(found.get(name)) != driver
    ]


def nvidia_driver_reboot(probe: dict, settings: dict, local: bool) -> dict:
    """Whether the installed driver needs a reboot to load, and whether the role reboots."""
    loaded = nvidia_driver_upstream(probe.get("loaded_version"))
    installed = nvidia_driver_upstream(probe.get("built_version")) or nvidia_driver_upstream(
        probe.get("driver_version")
    )
    needed, why = False, ""
    if installed and loaded and loaded != installed:
        needed, why = True, f"the loaded module is {loaded}, the installed driver {installed}"
    elif installed and not loaded and probe.get("nouveau_loaded"):
        needed, why = True, f"nouveau is loaded and holds the GPUs; driver {installed} is installed"
    reboot = needed and settings["reboot_ok"] and not local
    if not needed:
        message = (
            f"no reboot needed: loaded {loaded or 'nothing'}, installed {installed or 'nothing'}"
        )
    elif reboot:
        message = f"rebooting: {why}"
    elif settings["reboot_ok"]:
        message = (
            f"a reboot is needed ({why}), but this host is reached over a local connection: "
            "the role never reboots the machine it runs on; reboot it yourself"
        )
    else:
        message = (
            f"a reboot is needed ({why}); set nvidia_driver_reboot_ok: true to let the role "
            "reboot, or reboot the host yourself"
        )
    return {
        "needed": needed,
        "reboot": reboot,
        "load": bool(installed and not loaded and not probe.get("nouveau_loaded")),
        "fail": needed and not reboot and settings["fail_if_reboot_required"],
        "message": message,
    }


# nvidia_driver_settings' keys and the variables they come from.
GIVEN = {
    "branch": "nvidia_driver_branch",
    "source": "nvidia_driver_source",
    "modules": "nvidia_driver_kernel_modules",
    "build": "nvidia_driver_module_build",
    "fabric_manager": "nvidia_driver_fabric_manager",
    "mok_key": "nvidia_driver_mok_key",
    "mok_cert": "nvidia_driver_mok_cert",
    "allow_branch_change": "nvidia_driver_allow_branch_change",
    "modules_signed": "nvidia_driver_modules_signed",
    "reboot_ok": "nvidia_driver_reboot_ok",
    "fail_if_reboot_required": "nvidia_driver_fail_if_reboot_required",
    "packages": "nvidia_driver_packages",
}


CUDA_REPOS = "https://developer.download.nvidia.com/compute/cuda/repos/"


# NVIDIA's repository names the architecture its own way (arm64 servers: sbsa).
CUDA_ARCHES = {"x86_64": "x86_64", "aarch64": "sbsa"}


PROBE = "hostcheck.gpu_hosts.nvidia_driver_probe"


def cuda_repo_os(os_vars: dict) -> str:
    """NVIDIA's name of this OS in its CUDA repository: vars/<OS>.yml's
    __nvidia_driver_cuda_repo_os (its {fact} fields filled in) without dots, as ubuntu2204 for
    ubuntu{distribution_version}."""
    return os_vars["__nvidia_driver_cuda_repo_os"].replace(".", "")


def nvidia_driver_os(os_vars: dict, facts: dict, repo_url: object, repo_key_url: object) -> dict:
    """This OS as nvidia_driver_rules sees it, from the per-OS variables ({fact} fields
    filled in) and nvidia_driver_cuda_repo_url / nvidia_driver_cuda_repo_key_url ("" or none:
    NVIDIA's)."""
    arch = facts.get("architecture")
    repository = str(
        repo_url or f"{CUDA_REPOS}{cuda_repo_os(os_vars)}/{CUDA_ARCHES.get(arch, arch)}"
    ).strip()
    key_url = repo_key_url or f"{repository}/{os_vars['__nvidia_driver_cuda_repo_key_file']}"
    return {
        "name": f"{facts.get('distribution')} {facts.get('distribution_version')}",
        "default_source": os_vars["__nvidia_driver_default_source"],
        "table": os_vars["__nvidia_driver_table"],
        "headers": os_vars["__nvidia_driver_headers"],
        "repository_url": repository,
        "repository_key_url": key_url,
    }


def nvidia_driver_values(variables: dict, os_vars: dict, facts: dict) -> dict:
    """The variables checked together and against this OS: wanted, plan, os, os_vars."""
    os_vars = {**os_vars, "__nvidia_driver_cuda_repo_os": cuda_repo_os(os_vars)}
    os = nvidia_driver_os(
        os_vars,
        facts,
        variables.get("nvidia_driver_cuda_repo_url"),
        variables.get("nvidia_driver_cuda_repo_key_url"),
    )
    wanted = nvidia_driver_settings({key: variables.get(name) for key, name in GIVEN.items()}, os)
    plan = nvidia_driver_packages(os, wanted, facts["kernel"])
    return {"wanted": wanted, "plan": plan, "os": os, "os_vars": os_vars}


def installs_here(probe: dict, skip_without_gpu: bool) -> bool:
    return bool(probe["gpus"]) or not skip_without_gpu


class Validation(RoleAction):
    """The nvidia_driver_validate action (and the base of nvidia_driver_verify): the variables
    checked together and against this OS's package table, then the host read once."""

    ROLE = "nvidia_driver"
    INTERNAL: ClassVar[dict] = {
        "number_ranges": {"type": "dict", "required": True},
        "nouveau_file": {"type": "path", "required": True},
    }
    SWITCHED_OFF = "the NVIDIA driver is left as it is"
    CHECKS_WHEN_OFF = False
    # what read_driver_state() read in this task (the verify action compares it when it
    # validated now)
    probed: dict | None = None

    def validate(self) -> dict:
        variables = {
            name: self.arg(name)
            for name in [
                *GIVEN.values(),
                "nvidia_driver_cuda_repo_url",
                "nvidia_driver_cuda_repo_key_url",
            ]
        }
        values = nvidia_driver_values(variables, self.os_vars(required=True), self.facts())
        values["probe"] = self.read_driver_state(values["wanted"])
        values["install"] = installs_here(
            values["probe"], self.arg("nvidia_driver_skip_without_gpu")
        )
        if not values["install"]:
            self.note(
                f"{self.host}: no NVIDIA GPU on the PCI bus (no vendor 0x10de display controller "
                "in /sys/bus/pci/devices): the NVIDIA driver is not installed here "
                "(nvidia_driver_skip_without_gpu: false installs it anyway)"
            )
        return values

    def read_driver_state(self, wanted: dict) -> dict:
        args = {
            "mok_key": wanted["mok_key"],
            "mok_cert": wanted["mok_cert"],
            "nouveau_file": self.arg("nouveau_file"),
        }
        read = self.on_host(PROBE, args)
        self.probed = {key: value for key, value in read.items() if not key.startswith("_ansible")}
        return self.probed


def driver_problems(probe: dict, values: dict, checks: dict) -> list[str]:
    """What differs from the validated values, one line each. checks: hold, blacklist_nouveau
    (the variables' booleans) and nouveau_file."""
    wanted, plan = values["wanted"], values["plan"]
    problems = []
    branches = list(nvidia_driver_installed_branches(probe))
    if branches != [wanted["branch"]]:
        problems.append(
            f"installed branches {', '.join(branches) or 'none'}, wanted only {wanted['branch']}"
        )
    if probe["built_version"] is None:
        problems.append(
            f"no nvidia module for the running kernel {probe['kernel']} (modinfo): the DKMS "
            "build failed or the headers are missing; see dkms status"
        )
    if values["os_vars"]["__nvidia_driver_package_manager"] == "apt" and checks["hold"]:
        unheld = [
            name for name in plan["hold"] if name in probe["packages"] and name not in probe["held"]
        ]
        if unheld:
            problems.append(f"not held: {', '.join(unheld)}")
    if checks["blacklist_nouveau"] and not probe["nouveau_blacklisted"]:
        problems.append(f"{checks['nouveau_file']} does not blacklist nouveau")
    if nvidia_driver_fabric_manager(probe, wanted):
        mismatches = nvidia_driver_version_mismatches(probe, plan["fabric_manager"])
        if mismatches:
            problems.append(f"Fabric Manager not at the driver version: {', '.join(mismatches)}")
    reboot = nvidia_driver_reboot(probe, wanted, True)
    if reboot["needed"] and wanted["fail_if_reboot_required"]:
        problems.append(reboot["message"])
    return problems


def driver_verified(probe: dict, values: dict, checks: dict) -> str:
    """What holds, or Invalid naming every problem."""
    problems = driver_problems(probe, values, checks)
    if problems:
        raise Invalid(" | ".join(problems))
    return (
        f"driver {probe['driver_version']} (branch {values['wanted']['branch']}), module for "
        f"{probe['kernel']}: {probe['built_version']}, loaded: "
        f"{probe['loaded_version'] or 'nothing'}"
    )
