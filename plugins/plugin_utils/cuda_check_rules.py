"""The decision of the cuda_check role: can this host's NVIDIA driver run the torch build of the
training venv, and does the host have the driver, CUDA, toolkit and cuDNN versions asked for?
The cuda_check_verify action decides with it.

cuda_check_facts(reading)
    reading: the JSON that roles/cuda_check/files/cuda_facts.py prints on the host, numbers and
    PCI classes as the host gives them. Returns the facts: the same with NVML's and
    CUDART_VERSION's CUDA numbers and torch's cuDNN number as versions (module_utils/cuda_compat:
    12040 -> "12.4", 90100 -> "9.1.0"), and pci_gpus, how many of the NVIDIA PCI functions are
    GPUs (module_utils/pci), in place of the functions.

cuda_check_decide(facts, settings)
    facts: what cuda_check_facts returns;
    settings: {variable name: value} of the role's variables (cuda_check_venv,
    cuda_check_without_driver, cuda_check_min_driver_version, ...).
    Returns {status: pass | skip | fail, reason, problems, warnings, table, message}:
    problems and warnings one line each (a problem names the variable that asks for it),
    table the versions side by side, message all of it as the text a failure shows.

Versions are compared number by number (535.104.05 is newer than 535.54.03), never as strings.

cuda_check_values(variables) checks the role's variables (each bad one named) and Validation is
the validate action (the verify action's base); decided(facts, settings) is what verify says.
"""

from __future__ import annotations

import json
import re

from ansible.plugins.filter.core import to_json
from ansible_collections.hostcheck.gpu_hosts.plugins.module_utils import cuda_compat
from ansible_collections.hostcheck.gpu_hosts.plugins.module_utils.cuda_compat import (
    at_least,
    cuda_from_int,
    cudnn_from_int,
    format_version,
    parse_version,
)
from ansible_collections.hostcheck.gpu_hosts.plugins.module_utils.pci import (
    GPU,
    nvidia_kind,
    parse_hex,
)
from ansible_collections.hostcheck.gpu_hosts.plugins.plugin_utils.role_action import (
    Invalid,
    RoleAction,
)

SETTINGS = (
    "cuda_check_venv",
    "cuda_check_without_driver",
    "cuda_check_min_driver_version",
    "cuda_check_min_cuda_version",
    "cuda_check_toolkit_version",
    "cuda_check_cudnn_version",
    "cuda_check_torch_cuda_version",
    "cuda_check_require_torch_cuda",
)


def _cuda_text(number: int | None) -> str | None:
    return format_version(cuda_from_int(number)) if isinstance(number, int) else None


def cuda_check_facts(reading: dict) -> dict:
    nvml = reading["nvml"]
    torch = reading["torch"]
    cudnn = torch.get("cudnn")
    facts = {key: value for key, value in reading.items() if key != "pci_functions"}
    facts["nvml"] = {**nvml, "cuda_driver_version": _cuda_text(nvml.get("cuda_driver_version"))}
    facts["pci_gpus"] = sum(
        nvidia_kind(parse_hex(function["vendor"]), parse_hex(function["class"])) == GPU
        for function in reading["pci_functions"]
    )
    facts["toolkits"] = [
        {
            "path": toolkit["path"],
            "real_path": toolkit["real_path"],
            "version": toolkit["version"] or _cuda_text(toolkit["cudart_version"]),
            "source": toolkit["source"],
        }
        for toolkit in reading["toolkits"]
    ]
    facts["torch"] = {
        **torch,
        "cudnn": format_version(cudnn_from_int(cudnn))
        if isinstance(cudnn, int) and cudnn > 0
        else None,
    }
    return facts


def _reaches(have: object, want: str) -> bool:
    """have is a version and at least want (an unknown version reaches nothing)."""
    have_parts = parse_version(have)
    return have_parts is not None and at_least(have_parts, parse_version(want) or ())


def matches(have: object, want: str) -> bool:
    """'12.4.1' is a 12.4 and a 12; '12' is not a 12.4."""
    have_parts, want_parts = parse_version(have), parse_version(want)
    return bool(have_parts and want_parts) and have_parts[: len(want_parts)] == want_parts


def _or(value: object, missing: str = "none found") -> str:
    return str(value) if value not in (None, "") else missing


def _table(facts: dict, venv: str) -> list[str]:
    nvml = facts.get("nvml") or {}
    module = facts.get("kernel_module") or {}
    torch = facts.get("torch") or {}
    cudnn = facts.get("cudnn") or {}
    if nvml.get("loaded"):
        driver = (
            f"{_or(nvml.get('driver_version'), 'unknown')} (NVML; {nvml.get('gpu_count')} GPU(s))"
        )
    elif module.get("loaded"):
        driver = f"kernel module {_or(module.get('version'), '?')}; NVML: {nvml.get('error')}"
    else:
        driver = f"none (NVML: {nvml.get('error')})"
    toolkits = [
        f"{_or(t.get('version'), 'unknown version')} {t['path']}"
        + (f" -> {t['real_path']}" if t.get("real_path") not in (None, t["path"]) else "")
        for t in facts.get("toolkits") or []
    ]
    headers = [f"{_or(h.get('version'), '?')} {h['path']}" for h in cudnn.get("headers") or []]
    libraries = [
        f"{_or(lib.get('version'), '?')} {lib['path']}" for lib in cudnn.get("libraries") or []
    ]
    if torch.get("error") and not torch.get("version"):
        torch_line = f"not importable ({torch['error']})"
    else:
        torch_line = f"{torch.get('version')} in {venv}"
    build = "CPU-only build" if torch.get("version") else "-"
    if torch.get("hip"):
        build = f"ROCm {torch['hip']} build"
    rows = [
        ("NVIDIA driver", driver),
        ("driver CUDA", _or(nvml.get("cuda_driver_version"), "unknown")),
        ("NVIDIA GPUs on PCI", str(facts.get("pci_gpus", "?"))),
        ("CUDA toolkits", "; ".join(toolkits) or "none found"),
        ("cuDNN header", "; ".join(headers) or "none found"),
        ("cuDNN library", "; ".join(libraries) or "none found"),
        ("torch", torch_line),
        ("torch CUDA", _or(torch.get("cuda"), build)),
        ("torch cuDNN", _or(torch.get("cudnn"), torch.get("cudnn_error") or "-")),
    ]
    width = max(len(label) for label, dummy in rows)
    return [f"{label.ljust(width)}  {value}" for label, value in rows]


def _torch_vs_driver(
    torch: dict, driver: str | None, driver_cuda: str | None, venv: str
) -> tuple[str | None, str | None]:
    """(problem, warning) of torch's CUDA build against the driver (module_utils/cuda_compat)."""
    verdict, minimum = cuda_compat.torch_on_driver(torch.get("cuda"), driver_cuda, driver)
    where = (
        f"cuda_check_venv: torch {torch.get('version')} in {venv} is built for CUDA "
        f"{torch.get('cuda')}"
    )
    if verdict == cuda_compat.UNKNOWN:
        return f"{where}; the driver's CUDA version is {_or(driver_cuda, 'unknown')}", None
    if verdict == cuda_compat.RUNS:
        return None, None
    if verdict == cuda_compat.MINOR:
        return None, (
            f"driver {driver} supports CUDA {driver_cuda}, torch is built for CUDA "
            f"{torch.get('cuda')}: runs through CUDA minor version compatibility (driver >= "
            f"{minimum}); PTX JIT of code newer than CUDA {driver_cuda} is not available"
        )
    wanted = cuda_compat.parse_version(torch.get("cuda")) or ()
    compatible = (
        f", or a {wanted[0]}.x driver >= {minimum} (minor version compatibility)" if minimum else ""
    )
    return (
        f"{where}; driver {driver} supports CUDA {driver_cuda} only "
        f"(needs driver CUDA >= {'.'.join(map(str, wanted[:2]))}{compatible})",
        None,
    )


def _requested(facts: dict, settings: dict, driver_loaded: bool) -> list[str]:
    """One problem per requested version the host does not have."""
    problems = []
    nvml = facts.get("nvml") or {}
    torch = facts.get("torch") or {}
    cudnn = facts.get("cudnn") or {}
    driver, driver_cuda = nvml.get("driver_version"), nvml.get("cuda_driver_version")
    minimum = settings["cuda_check_min_driver_version"]
    if minimum and driver_loaded and not _reaches(driver, minimum):
        problems.append(
            f"cuda_check_min_driver_version: driver {_or(driver, 'unknown')} is older than "
            f"{minimum}"
        )
    minimum = settings["cuda_check_min_cuda_version"]
    if minimum and driver_loaded and not _reaches(driver_cuda, minimum):
        problems.append(
            f"cuda_check_min_cuda_version: driver {_or(driver, 'unknown')} supports CUDA "
            f"{_or(driver_cuda, 'unknown')}, not {minimum}"
        )
    wanted = settings["cuda_check_toolkit_version"]
    toolkits = facts.get("toolkits") or []
    if wanted and not any(matches(t.get("version"), wanted) for t in toolkits):
        found = ", ".join(f"{_or(t.get('version'), '?')} ({t['path']})" for t in toolkits)
        problems.append(
            f"cuda_check_toolkit_version: no CUDA {wanted} toolkit under "
            f"cuda_check_toolkit_paths (found: {found or 'none'})"
        )
    wanted = settings["cuda_check_cudnn_version"]
    if wanted:
        libraries, headers = cudnn.get("libraries") or [], cudnn.get("headers") or []
        if not any(matches(lib.get("version"), wanted) for lib in libraries):
            found = ", ".join(
                f"{_or(lib.get('version'), '?')} ({lib['path']})" for lib in libraries
            )
            problems.append(
                f"cuda_check_cudnn_version: no cuDNN {wanted} library (libcudnn.so.*) in "
                f"cuda_check_cudnn_library_paths (found: {found or 'none'})"
            )
        other = [h for h in headers if not matches(h.get("version"), wanted)]
        if other:
            problems.append(
                f"cuda_check_cudnn_version: cuDNN header(s) of another version than {wanted}: "
                + ", ".join(f"{_or(h.get('version'), '?')} ({h['path']})" for h in other)
            )
    wanted = settings["cuda_check_torch_cuda_version"]
    if wanted and not matches(torch.get("cuda"), wanted):
        problems.append(
            f"cuda_check_torch_cuda_version: torch {_or(torch.get('version'), '(not importable)')} "
            f"in {settings['cuda_check_venv']} is built for CUDA "
            f"{_or(torch.get('cuda'), 'nothing (no CUDA build)')}, not {wanted}"
        )
    return problems


def cuda_check_decide(facts: object, settings: object) -> dict:
    if not isinstance(facts, dict) or not isinstance(settings, dict):
        raise TypeError("cuda_check_decide: expected the facts and the settings as mappings")
    missing = [name for name in SETTINGS if name not in settings]
    if missing:
        raise ValueError(f"cuda_check_decide: settings lack {', '.join(missing)}")
    venv = settings["cuda_check_venv"]
    nvml = facts.get("nvml") or {}
    module = facts.get("kernel_module") or {}
    torch = facts.get("torch") or {}
    table = _table(facts, venv)
    problems: list[str] = []
    warnings: list[str] = []
    driver, driver_cuda = nvml.get("driver_version"), nvml.get("cuda_driver_version")
    driver_loaded = bool(nvml.get("loaded"))

    if not driver_loaded and not module.get("loaded"):
        reason = f"no NVIDIA driver (NVML: {nvml.get('error')})"
        gpus = facts.get("pci_gpus") or 0
        if gpus:
            reason += f"; {gpus} NVIDIA GPU(s) on the PCI bus"
        if settings["cuda_check_without_driver"] == "fail":
            problems.append(f"cuda_check_without_driver: fail: {reason}")
            return _result("fail", reason, problems, warnings, table)
        return _result("skip", reason, problems, warnings, table)

    if not driver_loaded:
        problems.append(
            f"the NVIDIA kernel module {_or(module.get('version'), '?')} is loaded, but NVML does "
            f"not answer ({nvml.get('error')}): a driver/library version mismatch (reboot after a "
            "driver update) or nvidia-ml-py missing from cuda_check_venv"
        )
    else:
        problems += [f"NVML: {problem}" for problem in nvml.get("problems") or []]
    problems += _requested(facts, settings, driver_loaded)

    if driver_loaded:
        if torch.get("cuda"):
            problem, warning = _torch_vs_driver(torch, driver, driver_cuda, venv)
            problems += [problem] if problem else []
            warnings += [warning] if warning else []
        else:
            if torch.get("error") and not torch.get("version"):
                what = f"torch cannot be imported from {venv} ({torch['error']})"
            else:
                build = f"ROCm {torch['hip']}" if torch.get("hip") else "CPU-only"
                what = f"torch {torch.get('version')} in {venv} is a {build} build"
            if settings["cuda_check_require_torch_cuda"]:
                problems.append(f"cuda_check_require_torch_cuda: {what}, on a host with a driver")
            else:
                warnings.append(f"{what} (allowed: cuda_check_require_torch_cuda is false)")

    torch_cudnn = parse_version(torch.get("cudnn"))
    host_majors = sorted(
        {
            parse_version(lib.get("version"))[0]
            for lib in (facts.get("cudnn") or {}).get("libraries") or []
            if parse_version(lib.get("version"))
        }
    )
    if torch_cudnn and host_majors and torch_cudnn[0] not in host_majors:
        warnings.append(
            f"torch uses cuDNN {torch.get('cudnn')} (its own, from the venv); the host's cuDNN "
            f"major is {', '.join(map(str, host_majors))}: builds against the host's cuDNN differ "
            "from what torch runs (informational)"
        )

    if problems:
        return _result("fail", f"{len(problems)} problem(s)", problems, warnings, table)
    summary = (
        f"driver {driver} (CUDA {driver_cuda}) can run torch {torch.get('version')}"
        if torch.get("cuda")
        else f"driver {driver} (CUDA {driver_cuda})"
    )
    return _result("pass", summary, problems, warnings, table)


def _result(status: str, reason: str, problems: list, warnings: list, table: list) -> dict:
    lines = [f"cuda_check: {status}: {reason}", *table]
    lines += [f"problem: {p}" for p in problems] + [f"warning: {w}" for w in warnings]
    return {
        "status": status,
        "reason": reason,
        "problems": problems,
        "warnings": warnings,
        "table": table,
        "message": "\n".join(lines),
    }


# Each "" or dotted digits.
VERSION_VARIABLES = [
    "cuda_check_min_driver_version",
    "cuda_check_min_cuda_version",
    "cuda_check_toolkit_version",
    "cuda_check_cudnn_version",
    "cuda_check_torch_cuda_version",
]


# Each a list of absolute paths.
PATH_VARIABLES = [
    "cuda_check_toolkit_paths",
    "cuda_check_cudnn_include_paths",
    "cuda_check_cudnn_library_paths",
]


VERSION = re.compile(r"^([0-9]+(\.[0-9]+)*)?$")


VARIABLES = [
    "cuda_check_enabled",
    "cuda_check_venv",
    "cuda_check_without_driver",
    *VERSION_VARIABLES,
    *PATH_VARIABLES,
    "cuda_check_require_torch_cuda",
]


def _is_version(value: object) -> bool:
    # a string, or a whole number (not a bool, not a float: YAML reads 12.10 as 12.1)
    if isinstance(value, str):
        text = value
    elif isinstance(value, int) and not isinstance(value, bool):
        text = str(value)
    else:
        return False
    return VERSION.match(text) is not None


def cuda_check_values(variables: dict) -> dict:
    """The variables checked (Invalid names the first bad one), and the settings the decision
    takes."""
    for name in VERSION_VARIABLES:
        value = variables[name]
        if not _is_version(value):
            raise Invalid(
                f'{name}: "" or a version of dotted digits such as "12.4" or "550.54.15", '
                f"quoted (unquoted, YAML reads 12.10 as the number 12.1); got {to_json(value)}"
            )
    venv = variables["cuda_check_venv"]
    if not venv.startswith("/") or re.search(r"\s", venv):
        raise Invalid(
            "cuda_check_venv: the absolute path of the training venv, without blanks; got "
            f"{to_json(venv)}"
        )
    for name in PATH_VARIABLES:
        value = variables[name]
        if not all(path.startswith("/") for path in value):
            raise Invalid(f"{name}: a list of absolute paths; got {to_json(value)}")
    settings = {name: variables[name] for name in SETTINGS}
    settings.update({name: str(variables[name]) for name in VERSION_VARIABLES})
    return {"settings": settings}


class Validation(RoleAction):
    """The cuda_check_validate action (and the base of cuda_check_verify): the variables
    checked, no host read."""

    ROLE = "cuda_check"
    SWITCHED_OFF = "driver, CUDA, cuDNN and torch versions not checked"

    def validate(self) -> dict:
        return cuda_check_values({name: self.arg(name) for name in VARIABLES})


# Runs the script on stdin with the venv's python ($1), else the OS's; says which first.
RUN_SCRIPT = """python=$1; shift
if [ -x "$python" ]; then
  echo venv
else
  echo os
  python=$(command -v python3 || echo /usr/libexec/platform-python)
fi
exec "$python" - "$@"
"""


def script_args(toolkit_paths: list, include_paths: list, library_paths: list) -> list[str]:
    return [
        *(f"--toolkit-path={path}" for path in toolkit_paths),
        *(f"--cudnn-include-path={path}" for path in include_paths),
        *(f"--cudnn-library-path={path}" for path in library_paths),
    ]


def os_paths(given: list, os_vars: dict, key: str, facts: dict) -> list[str]:
    """The folders given, or the OS's usual ones (vars/<os>.yml, {architecture} filled in)."""
    return list(given) or [path.format(**facts) for path in os_vars.get(key, [])]


def parse_read(stdout: str) -> tuple[bool, dict]:
    """(whether the venv's python read, what the script read): the JSON is the last line (an
    import may print before it), after the line RUN_SCRIPT says which python it ran."""
    lines = stdout.strip().splitlines()
    return lines[0] == "venv", json.loads(lines[-1])


def verdict(decision: dict) -> str:
    said = f"{decision['status']}: {decision['reason']}"
    if decision["status"] == "skip":
        said += " (cuda_check_without_driver: skip)"
    return said


def decided(facts: dict, settings: dict) -> tuple[str, list[str]]:
    """(the verdict, the versions side by side), or Invalid with the whole message."""
    decision = cuda_check_decide(facts, settings)
    if decision["status"] not in ("pass", "skip"):
        raise Invalid(decision["message"])
    return verdict(decision), decision["message"].split("\n")
