"""Measurements carried over from an earlier report of this host when nothing they depend on
changed: `hostcheck run --reuse-measurements REPORT`.

The measurements (the training loop, the Pillow benchmarks, the storage read test, DCGM's
diagnostic) take seconds; everything else takes milliseconds. So the run first checks the
settings with the measurements left out, and compares what it saw with the basis the earlier
report recorded: every check's status, every finding the fleet compares (with the fleet's drift
tolerances), the facts (hostcheck, torch, driver, Pillow flavour ...), the profile, the options
and the boot. Unchanged: the earlier results of the measuring checks stand, each saying when it
was measured. Changed, absent or failed before: they are measured again.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field

from hostcheck import __version__
from hostcheck.checks.base import CheckSpec, RunOptions
from hostcheck.config import Profile, merge
from hostcheck.fleet.drift import compare_hosts
from hostcheck.fleet.settings import FleetSettings
from hostcheck.gpu.torch_probe import read_torch
from hostcheck.model import CheckResult
from hostcheck.report.entry import HostEntry
from hostcheck.report.extract import Unusable, comparable, from_report
from hostcheck.runner import RunOutcome, outcome_of, run_checks
from hostcheck.system import System

# check id -> the part of its profile section that leaves its measurement out
MEASURING = {
    "loop": {"enabled": False},
    "dcgm": {"enabled": False},
    "pillow": {"benchmark_seconds": 0},
    "storage": {"read_test": {"enabled": False}},
}
# A measurement that failed is taken again: the cause may have been passing (load, a cold cache).
KEPT_STATUSES = ("pass", "warn", "skip")
BOOT_ID = "/proc/sys/kernel/random/boot_id"


@dataclass
class Reuse:
    """What a run with --reuse-measurements did, for the report and the console."""

    basis: dict
    kept: dict[str, str] = field(default_factory=dict)  # check id -> measured at
    measured: list[str] = field(default_factory=list)
    why: str = ""  # why the earlier measurements could not stand

    def lines(self) -> list[str]:
        out = []
        if self.kept:
            at = sorted(set(self.kept.values()))
            out.append(
                f"measurements kept from {', '.join(at)}: {', '.join(self.kept)} (nothing "
                "they depend on changed; without --reuse-measurements they are taken again)"
            )
        if self.measured:
            out.append(f"measured: {', '.join(self.measured)} ({self.why})")
        return out


def settings_profile(profile: Profile) -> Profile:
    """The profile with every measurement left out."""
    checks = {c: part for c, part in MEASURING.items() if c in profile.values["checks"]}
    values = merge(profile.values, {"checks": checks})
    return Profile(name=profile.name, values=values, sources=profile.sources)


def basis_of(outcome: RunOutcome, system: System, document: dict) -> dict:
    """What the measurements depend on, from the settings-only run's report document."""
    entry = from_report(document, "this host", "")
    return {
        "boot_id": (system.read(BOOT_ID) or "").strip(),
        "torch": read_torch(system, None).version,
        "profile": json.loads(json.dumps(outcome.profile.values)),
        "options": document["options"],
        "checks": entry.checks,
        "facts": entry.facts,
        "values": entry.values,
    }


def _entry(basis: dict) -> HostEntry:
    return HostEntry(
        host="this host",
        file="",
        checks=dict(basis.get("checks") or {}),
        facts=dict(basis.get("facts") or {}),
        values={
            k: comparable(v)
            for k, v in (basis.get("values") or {}).items()
            if comparable(v) is not None
        },
    )


def differences(before: dict, after: dict, settings: FleetSettings) -> list[str]:
    """What changed between two bases, as short phrases; empty when nothing did."""
    said = []
    if before.get("boot_id") != after["boot_id"]:
        said.append("the host rebooted")
    for key, label in (("torch", "torch"), ("profile", "the profile"), ("options", "the options")):
        if before.get(key) != after[key]:
            said.append(f"{label} changed")
    for change in compare_hosts(_entry(before), _entry(after), settings):
        if change.kind == "verdict":
            continue
        said.append(f"{change.key}: {change.note or f'{change.before} -> {change.after}'}")
    return said


def read_earlier(path: str) -> tuple[dict | None, str]:
    """The earlier report with a basis, or None and why it cannot be used."""
    try:
        with open(path, encoding="utf-8") as handle:
            document = json.load(handle)
    except FileNotFoundError:
        return None, f"no earlier report at {path}"
    except (OSError, ValueError) as exc:
        return None, f"earlier report {path} unreadable: {exc}"
    if not isinstance(document, dict) or document.get("schema_version") != 1:
        return None, f"{path} is not a hostcheck report of schema 1"
    if (document.get("tool") or {}).get("version") != __version__:
        return None, f"{path} was written by another hostcheck version"
    if not isinstance(document.get("measurement_basis"), dict):
        return None, f"{path} records no measurement basis"
    if not isinstance(document.get("checks"), list):
        return None, f"{path} has no checks"
    return document, ""


def kept_result(check: dict, measured_at: str) -> CheckResult:
    """An earlier report's result of a measuring check, saying when it was measured."""
    result = CheckResult.from_dict(check)
    result.data["measured_at"] = measured_at
    note = f"(measured {measured_at}, nothing it depends on changed since)"
    if not result.summary.endswith(note):
        result.summary = f"{result.summary} {note}".strip()
    result.duration_s = 0.0
    return result


def light_run(
    profile: Profile,
    options: RunOptions,
    system: System,
    os_release_text: str | None,
    only: list[str] | None = None,
    checks: Mapping[str, CheckSpec] | None = None,
) -> tuple[RunOutcome, dict]:
    """The run with every measurement left out, and the basis it gives (what the
    measurements depend on)."""
    from hostcheck.report.document import build_document

    light = run_checks(settings_profile(profile), options, system, only=only, checks=checks)
    document = build_document(light, light.exit_code(), os_release_text)
    try:
        return light, basis_of(light, system, document)
    except Unusable as exc:  # our own document: a bug, not the host's fault
        raise RuntimeError(f"measurement basis: {exc}") from exc


def measuring_ids(light: RunOutcome, profile: Profile, only: list[str] | None = None) -> list[str]:
    """The measuring checks this profile runs."""
    return [
        r.id
        for r in light.results
        if r.id in MEASURING and profile.enabled(r.id) and (only is None or r.id in only)
    ]


def standing_measurements(
    earlier_path: str, basis: dict, profile: Profile
) -> tuple[dict[str, dict], str]:
    """The earlier report's checks by id while its measurements still stand for this basis
    (nothing they depend on changed), else {} and why they do not."""
    earlier, why = read_earlier(earlier_path)
    if earlier is None:
        return {}, why
    changed = differences(
        earlier["measurement_basis"], basis, FleetSettings.from_profile(profile.values)
    )
    if changed:
        more = f" and {len(changed) - 3} more" if len(changed) > 3 else ""
        return {}, "; ".join(changed[:3]) + more
    by_id = {}
    for check in earlier["checks"]:
        if isinstance(check, dict) and check.get("id") in MEASURING:
            check = dict(check)
            check.setdefault("data", {})
            at = (check["data"] or {}).get("measured_at") or earlier.get("started_at", "")
            by_id[check["id"]] = {**check, "data": {**check["data"], "measured_at": at}}
    return by_id, ""


def run_reusing(
    profile: Profile,
    options: RunOptions,
    system: System,
    earlier_path: str | None,
    os_release_text: str | None,
    only: list[str] | None = None,
    checks: Mapping[str, CheckSpec] | None = None,
) -> tuple[RunOutcome, Reuse]:
    """The run keeping the earlier report's measurements while they stand; earlier_path None:
    measured anew, with the basis recorded all the same."""
    light, basis = light_run(profile, options, system, os_release_text, only, checks)
    reuse = Reuse(basis=basis)
    measuring = measuring_ids(light, profile, only)
    if earlier_path is None:
        standing, reuse.why = {}, "asked to measure anew"
    else:
        standing, reuse.why = standing_measurements(earlier_path, basis, profile)
    kept: dict[str, CheckResult] = {}
    if not reuse.why:  # the earlier measurements stand
        failed = []
        for check_id in measuring:
            check = standing.get(check_id)
            if check is None:
                continue
            if check.get("status") not in KEPT_STATUSES:
                failed.append(check_id)
                continue
            at = check["data"]["measured_at"]
            kept[check_id] = kept_result(check, at)
            reuse.kept[check_id] = at
        reuse.why = (
            f"{', '.join(failed)} did not pass last time" if failed else "not in the earlier report"
        )
    reuse.measured = [c for c in measuring if c not in kept]
    results = {r.id: r for r in light.results}
    results.update(kept)
    if reuse.measured:
        fresh = run_checks(profile, options, system, only=reuse.measured, checks=checks)
        results.update({r.id: r for r in fresh.results})
    ordered = [results[r.id] for r in light.results]
    return outcome_of(ordered, light.started_at, profile, options), reuse
