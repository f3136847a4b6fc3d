"""NVIDIA DCGM's own verdict on the host: `dcgmi diag -r 1 -j`, parsed from its JSON.

Where DCGM is installed (`dcgmi` on PATH, or `dcgm.command`), the check runs its diagnostic at
the profile's level and turns each failing (test, GPU) pair into a finding; where it is not, the
check skips and says so. The output's shape differs between DCGM releases (docs/gpu-faults.md,
"DCGM's diagnostic"); this module reads all of them:

- 4.x: root "DCGM Diagnostic", "metadata" {"version", "Driver Version Detected"}; results per
  entity {"entity_group": "GPU", "entity_id": N, "status", "warnings": [{"warning": msg, ...}]};
  level 1 is one test ("software") whose messages start with the sub-check's name
  ("Persistence Mode: ...").
- 3.3.x: root "DCGM GPU Diagnostic" beside "version" and "Driver Version Detected"; one test per
  sub-check ("Persistence Mode"), results {"status", "gpu_id", "warnings": [{"warnings": msg}]}
  (3.3.1 keeps the status in the first result only).
- 3.0-3.2: results {"status", "gpu_ids": "0", "warnings": "<text>"}.
- A run that could not start: {"<root>": {"version": ..., "runtime_error": "Error: ..."}}.

No real DCGM can be had where this was written: it is tested on outputs reconstructed from
DCGM's source (tests/unit/hostcheck/checks/dcgm_outputs/), so only a recorded output of a real
`dcgmi` can confirm it.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from typing import Any

from hostcheck import config as c
from hostcheck.checks.base import CheckContext, CheckSpec
from hostcheck.checks.gpu import DRIVER_FIX, DRIVER_TAGS, HARDWARE, PERSISTENCE_FIX
from hostcheck.gpu import xid
from hostcheck.model import CheckResult, Finding, Status

ROOTS = ("DCGM Diagnostic", "DCGM GPU Diagnostic")  # 4.x, 3.x
LEVELS = (1, 2)
# dcgmi's exit codes (DCGM return codes as an unsigned byte)
EXIT_PASS = 0
EXIT_TEST_FAILED = 226  # DCGM_ST_NVVS_ERROR: a test failed
EXIT_ISOLATE = 205  # DCGM_ST_NVVS_ISOLATE_ERROR: a failure that asks for the GPU to be isolated

SCHEMA = c.obj(
    {
        "command": {"type": "string", "minLength": 1},
        "level": {"enum": list(LEVELS)},
        "timeout_seconds": {"type": "number", "exclusiveMinimum": 0, "maximum": 3600},
    }
)

_STATUSES = {
    "pass": Status.PASS,
    "fail": Status.FAIL,
    "skip": Status.SKIP,
    "not run": Status.SKIP,
}
ISOLATE = "DCGM asks for the GPU to be isolated (dcgmi exit 205)"
ISOLATE_FIX = HARDWARE + "drain the node and " + xid.REPLACE_REMEDY
NOT_RUNNING = (
    "start DCGM's host engine (systemctl enable --now nvidia-dcgm, or nv-hostengine) and run "
    "dcgmi diag -r 1 by hand"
)

# Level 1's sub-checks, by the name DCGM gives them (a 3.x test's name, the start of a 4.x
# message): the finding's name and the remedy. Any other test keeps its own (DCGM's) name.
SUB_CHECKS: dict[str, tuple[str, str]] = {
    "denylist": (
        "denylist",
        "a denylisted kernel module (nouveau) is loaded: set nvidia_driver_blacklist_nouveau: "
        f"true (role nvidia_driver) and run: {DRIVER_TAGS}, then reboot",
    ),
    "blacklist": (
        "denylist",
        "a denylisted kernel module (nouveau) is loaded: set nvidia_driver_blacklist_nouveau: "
        f"true (role nvidia_driver) and run: {DRIVER_TAGS}, then reboot",
    ),
    "nvml library": ("nvml library", DRIVER_FIX),
    "cuda main library": ("cuda main library", DRIVER_FIX),
    "cuda toolkit libraries": (
        "cuda toolkit libraries",
        "install the CUDA toolkit libraries the message names, or ignore: training wheels "
        "bring their own",
    ),
    "permissions and os blocks": (
        "permissions",
        "run hostcheck as root; check the modes of /dev/nvidia* and that no cgroup or "
        "container rule blocks the GPU",
    ),
    "permissions and os-related blocks": (
        "permissions",
        "run hostcheck as root; check the modes of /dev/nvidia* and that no cgroup or "
        "container rule blocks the GPU",
    ),
    "persistence mode": ("persistence mode", PERSISTENCE_FIX),
    "environment variables": (
        "environment variables",
        "unset the variable the message names (CUDA_* or __NV* settings that change the "
        "driver's behaviour) in the environment hostcheck and the jobs start with",
    ),
    "page retirement/row remap": ("row remap", HARDWARE + xid.RESET_REMEDY),
    "graphics processes": (
        "graphics processes",
        "stop the graphics processes (X, a display manager) running on the GPU",
    ),
    "inforom": (
        "inforom",
        HARDWARE + "the GPU's InfoROM is corrupt or unreadable: " + xid.REPLACE_REMEDY,
    ),
    "fabric manager": (
        "fabric manager",
        f"set nvidia_driver_fabric_manager: true (role nvidia_driver) and run: {DRIVER_TAGS}",
    ),
}


class Unreadable(ValueError):
    """dcgmi's output is not a DCGM diagnostic document; the message says what it is."""


@dataclass
class Outcome:
    """One (test, entity) pair's verdict, merged over the results that name it."""

    test: str  # the finding's test part: a SUB_CHECKS name or DCGM's test name
    entity: str  # "gpu0", "" when the result names none
    status: Status
    messages: list[str] = field(default_factory=list)
    error_ids: list[int] = field(default_factory=list)
    remedy: str = ""

    @property
    def name(self) -> str:
        return f"{self.entity} {self.test}".strip()


@dataclass
class Diagnostic:
    version: str | None = None
    driver: str | None = None
    runtime_error: str | None = None
    outcomes: dict[tuple[str, str], Outcome] = field(default_factory=dict)


# ---------------------------------------------------------------- parsing


def _slug(text: str) -> str:
    """A test name as a finding name: lower case, DCGM's words only, bounded."""
    words = re.sub(r"[^a-z0-9/+._-]+", " ", text.lower()).split()
    return " ".join(words)[:40].strip() or "test"


def _document(stdout: str) -> dict:
    start, end = stdout.find("{"), stdout.rfind("}")
    if start < 0 or end < start:
        raise Unreadable("no JSON object in dcgmi's output")
    try:
        document = json.loads(stdout[start : end + 1])
    except ValueError as exc:
        raise Unreadable(f"dcgmi's output is not valid JSON ({exc})") from exc
    if not isinstance(document, dict):
        raise Unreadable("dcgmi's JSON is not an object")
    return document


def _text(value: Any) -> str | None:
    return value.strip() if isinstance(value, str) and value.strip() else None


def _messages(value: Any) -> list[tuple[str, int | None]]:
    """The (message, error id) pairs of a "warnings" value: a plain string (3.0-3.2) or a
    list of objects whose message is "warning" (4.x) or "warnings" (3.3.x)."""
    if isinstance(value, str):
        return [(value.strip(), None)] if value.strip() else []
    found = []
    for item in value if isinstance(value, list) else []:
        if isinstance(item, str):
            text, error_id = item, None
        elif isinstance(item, dict):
            text = item.get("warning") or item.get("warnings")
            error_id = item.get("error_id")
        else:
            continue
        if _text(text):
            found.append((text.strip(), error_id if isinstance(error_id, int) else None))
    return found


def _entities(item: dict) -> list[str]:
    """The GPUs (or other entities) a result names: entity_id (4.x), gpu_id (3.3),
    gpu_ids "0" or "0,1" (3.0-3.2)."""
    if isinstance(item.get("entity_id"), int):
        group = item.get("entity_group")
        prefix = "gpu" if group in (None, "GPU") else _slug(str(group)).replace(" ", "")
        return [f"{prefix}{item['entity_id']}"]
    if isinstance(item.get("gpu_id"), int):
        return [f"gpu{item['gpu_id']}"]
    ids = item.get("gpu_ids")
    if isinstance(ids, int):
        return [f"gpu{ids}"]
    if isinstance(ids, str):
        return [f"gpu{part.strip()}" for part in ids.split(",") if part.strip().isdigit()]
    return [""]


def _sub_check(test: str, message: str | None) -> tuple[str, str]:
    """The finding's test part and its remedy: from DCGM's test name, else (4.x's one
    "software" test) from the message's leading "Sub-check name:"."""
    known = SUB_CHECKS.get(test.strip().lower())
    if known:
        return known
    if message and ":" in message:
        known = SUB_CHECKS.get(message.split(":", 1)[0].strip().lower())
        if known:
            return known
    return _slug(test), ""


def _status(value: Any) -> Status | None:
    return _STATUSES.get(value.strip().lower()) if isinstance(value, str) else None


def parse(stdout: str) -> Diagnostic:
    """The diagnostic dcgmi's standard output holds (anything before its JSON is ignored)."""
    document = _document(stdout)
    root_name = next((name for name in ROOTS if name in document), None)
    if root_name is None:
        keys = ", ".join(sorted(document)[:5]) or "none"
        raise Unreadable(f"no {' or '.join(repr(r) for r in ROOTS)} key (keys: {keys})")
    root = document[root_name]
    if not isinstance(root, dict):
        raise Unreadable(f"{root_name!r} is not an object")
    metadata = document.get("metadata") if isinstance(document.get("metadata"), dict) else {}
    diag = Diagnostic(
        version=_text(metadata.get("version"))
        or _text(document.get("version"))
        or _text(root.get("version")),
        driver=_text(metadata.get("Driver Version Detected"))
        or _text(document.get("Driver Version Detected"))
        or _text(root.get("Driver Version Detected")),
        runtime_error=_text(root.get("runtime_error")),
    )
    if diag.runtime_error:
        return diag
    categories = root.get("test_categories")
    if not isinstance(categories, list):
        raise Unreadable(f"{root_name!r} has neither test_categories nor runtime_error")
    for category in categories:
        tests = category.get("tests") if isinstance(category, dict) else None
        for test in tests if isinstance(tests, list) else []:
            if isinstance(test, dict):
                _take_test(diag, test)
    return diag


def _take_test(diag: Diagnostic, test: dict) -> None:
    name = _text(test.get("name")) or "test"
    results = [r for r in test.get("results") or [] if isinstance(r, dict)]
    # 3.3.1 writes the status in the first result only; 4.x also sums a test up
    summary = test.get("test_summary") if isinstance(test.get("test_summary"), dict) else {}
    inherited = _status(results[0].get("status")) if results else None
    inherited = inherited or _status(summary.get("status"))
    for item in results:
        status = _status(item.get("status"))
        unknown = item.get("status") if status is None and "status" in item else None
        status = status or inherited or Status.SKIP
        messages = _messages(item.get("warnings"))
        if isinstance(item.get("warnings"), str) and isinstance(item.get("error_id"), int):
            messages = [(text, item["error_id"]) for text, _ in messages]  # 3.3.1
        if unknown is not None:
            status = Status.WARN
            messages.append((f"status {str(unknown)[:40]!r} not understood", None))
        for entity in _entities(item):
            for message, error_id in messages or [(None, None)]:
                test_part, remedy = _sub_check(name, message)
                key = (entity, test_part)
                outcome = diag.outcomes.get(key)
                if outcome is None:
                    outcome = diag.outcomes[key] = Outcome(test_part, entity, status)
                elif status.rank > outcome.status.rank:
                    outcome.status = status
                if message and message not in outcome.messages:
                    outcome.messages.append(message)
                if error_id is not None and error_id not in outcome.error_ids:
                    outcome.error_ids.append(error_id)
                outcome.remedy = outcome.remedy or remedy


# ---------------------------------------------------------------- the check


def _last_line(*texts: str) -> str:
    for text in texts:
        lines = [line.strip() for line in (text or "").splitlines() if line.strip()]
        if lines:
            return lines[-1][:300]
    return "no output"


def _error(argv_text: str, shown: str, data: dict, remedy: str = "") -> CheckResult:
    finding = Finding("diag", Status.ERROR, None, "", shown, argv_text, remedy)
    return CheckResult.from_findings("dcgm", [finding], data, summary=shown)


def _of(diag: Diagnostic) -> str:
    parts = [
        f"DCGM {diag.version}" if diag.version else "",
        f"driver {diag.driver}" if diag.driver else "",
    ]
    return ", ".join(p for p in parts if p)


def run(ctx: CheckContext) -> CheckResult:
    cfg = ctx.config
    command, level, timeout = cfg["command"], cfg["level"], cfg["timeout_seconds"]
    argv = [command, "diag", "-r", str(level), "-j"]
    argv_text = " ".join(argv)
    shown_command = f"dcgmi diag -r {level}"
    data: dict[str, Any] = {"command": argv, "level": level}
    if ctx.system.which(command) is None:
        return CheckResult.skipped(
            "dcgm", f"{command} not found: DCGM is not installed (dcgm.command)", data
        )
    done = ctx.system.run(argv, timeout=timeout)
    if done is None:
        return CheckResult.skipped(
            "dcgm", f"{command} not found: DCGM is not installed (dcgm.command)", data
        )
    data["exit_code"] = done.returncode
    if done.returncode == -1 and "timed out" in done.stderr:
        return _error(
            argv_text,
            f"{shown_command} did not finish within {timeout:g} s (dcgm.timeout_seconds)",
            data,
            f"raise dcgm.timeout_seconds, or run {shown_command} by hand to see where it hangs",
        )
    try:
        diag = parse(done.stdout)
    except Unreadable as exc:
        data["output"] = done.stdout[:300]
        if done.returncode not in (EXIT_PASS, EXIT_TEST_FAILED, EXIT_ISOLATE):
            line = _last_line(done.stderr, done.stdout)
            remedy = NOT_RUNNING if "connect" in line.lower() else ""
            return _error(argv_text, f"{command} exited {done.returncode}: {line}", data, remedy)
        return _error(argv_text, f"cannot read {shown_command}'s output: {exc}", data)
    data.update(
        version=diag.version,
        driver=diag.driver,
        runtime_error=diag.runtime_error,
        results=[
            {
                "entity": o.entity,
                "test": o.test,
                "status": o.status.value,
                "messages": o.messages,
                "error_ids": o.error_ids,
            }
            for o in diag.outcomes.values()
        ],
    )
    if diag.runtime_error:
        remedy = NOT_RUNNING if "connect" in diag.runtime_error.lower() else ""
        return _error(
            argv_text, f"{shown_command} could not run: {diag.runtime_error}", data, remedy
        )
    return _verdict(diag, done.returncode, done.stderr, argv_text, shown_command, data)


def _verdict(
    diag: Diagnostic, code: int, stderr: str, source: str, shown_command: str, data: dict
) -> CheckResult:
    isolate = code == EXIT_ISOLATE
    findings = []
    for outcome in diag.outcomes.values():
        if outcome.status not in (Status.FAIL, Status.WARN):
            continue
        text = "; ".join(outcome.messages) or f"DCGM says {outcome.status.value}, without a message"
        remedy = outcome.remedy or f"see {shown_command} on the host"
        # exit 205 names no test: it goes to the failures no role variable fixes
        if isolate and outcome.status == Status.FAIL and remedy.startswith((HARDWARE, "see ")):
            text += f"; {ISOLATE}"
            remedy = ISOLATE_FIX
        findings.append(
            Finding(
                outcome.name,
                outcome.status,
                {"status": outcome.status.value, "error_ids": outcome.error_ids},
                "pass",
                text,
                source,
                remedy,
            )
        )
    failed = any(f.status == Status.FAIL for f in findings)
    isolated = any(f.remedy == ISOLATE_FIX for f in findings)
    if isolate and failed and not isolated:
        findings.append(
            _diag(code, Status.FAIL, f"{ISOLATE}, without saying which failure asks for it",
                  source, ISOLATE_FIX)
        )  # fmt: skip
    elif not failed and code in (EXIT_TEST_FAILED, EXIT_ISOLATE):
        what = ISOLATE if isolate else "a test failed (dcgmi exit 226)"
        remedy = ISOLATE_FIX if isolate else f"see {shown_command} on the host"
        findings.append(
            _diag(code, Status.FAIL, f"{what}, but its JSON names no failing test", source, remedy)
        )
    elif not failed and code != EXIT_PASS:
        findings.append(
            _diag(code, Status.ERROR, f"dcgmi exited {code}: {_last_line(stderr)}", source)
        )
    if findings:
        return CheckResult.from_findings("dcgm", findings, data)
    passed = _passed(diag, shown_command, source)
    return CheckResult.from_findings("dcgm", [passed], data, summary=passed.display)


def _diag(code: int, status: Status, shown: str, source: str, remedy: str = "") -> Finding:
    """The diagnostic as a whole, where dcgmi's exit code says more than its JSON."""
    measured = {"status": status.value, "exit_code": code}
    return Finding("diag", status, measured, "pass", shown, source, remedy)


def _passed(diag: Diagnostic, shown_command: str, source: str) -> Finding:
    outcomes = list(diag.outcomes.values())
    passed = {o.test for o in outcomes if o.status == Status.PASS}
    skipped = {o.test for o in outcomes if o.status == Status.SKIP} - passed
    gpus = {o.entity for o in outcomes if o.entity.startswith("gpu")}
    shown = f"{shown_command}: {len(passed)} test{'s' * (len(passed) != 1)} passed"
    if gpus:
        shown += f" on {len(gpus)} GPU{'s' * (len(gpus) != 1)}"
    if skipped:
        shown += f", {len(skipped)} skipped ({', '.join(sorted(skipped))})"
    if _of(diag):
        shown += f" ({_of(diag)})"
    status = Status.PASS if passed else Status.SKIP
    return Finding("diag", status, {"status": status.value}, "pass", shown, source)


SPEC = CheckSpec(
    id="dcgm",
    title="NVIDIA DCGM's diagnostic (dcgmi diag -r 1)",
    explain=(
        "Where NVIDIA DCGM is installed (dcgm.command, dcgmi, on PATH), runs its diagnostic "
        "at dcgm.level (1: the software deployment checks, seconds, safe beside jobs; 2: also "
        "short hardware tests that load the GPUs, minutes) as dcgmi diag -r 1 -j and takes its "
        "verdict from the JSON: each failing test on each GPU is a finding with DCGM's own "
        "message (persistence mode off, a denylisted nouveau, an NVML or CUDA library that "
        "does not load, a pending row remap, a corrupt InfoROM ...), and exit 205 says the "
        "GPU must be isolated. Without dcgmi it skips; an output it cannot read, a run error "
        "(the host engine not running) or a timeout is an error, not a failure. It is a "
        "measurement: the Slurm health check takes it from the last full report. Parsed from "
        "DCGM 3.0 to 4.x's JSON, tested on outputs reconstructed from DCGM's source."
    ),
    run=run,
    schema=SCHEMA,
    roles=("nvidia_driver",),
)
