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
"""

from __future__ import annotations

import re

from ansible_collections.hostcheck.gpu_hosts.plugins.plugin_utils.role_action import Invalid

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
