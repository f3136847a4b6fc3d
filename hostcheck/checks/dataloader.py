"""The DataLoader settings file training code reads (hostcheck.dataloader): there, valid, and
measured on this host as it is now.

Reads one small JSON file (or finds none): it costs nothing next to the other checks, so the
quick profile runs it too.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from hostcheck import config as c
from hostcheck.checks.base import CheckContext, CheckSpec
from hostcheck.model import CheckResult, Finding, Status

if TYPE_CHECKING:
    from hostcheck import dataloader

SCHEMA = c.obj(
    {
        "path": c.nullable({"type": "string", "minLength": 1}),
        "max_age_days": c.nullable({"type": "number", "exclusiveMinimum": 0}),
    }
)
EXPECTED = "a valid settings file, measured on this host with the CPUs usable now"
FIX = (
    "set hostcheck_dataloader_enabled: true (role hostcheck) and run: "
    "ansible-playbook site.yml --tags hostcheck"
)


def _data(path: str, state: str, found: dataloader.SettingsFile | None = None) -> dict:
    """What the report (and the fleet) gets: the same keys whatever the state."""
    loader = found.dataloader if found else None
    return {
        "path": path,
        "state": state,
        "num_workers": loader.num_workers if loader else None,
        "pin_memory": loader.pin_memory if loader else None,
        "prefetch_factor": loader.prefetch_factor if loader else None,
        "persistent_workers": loader.persistent_workers if loader else None,
        "prefetcher": found.prefetcher if found else None,
        "ranks_per_node": found.workload.ranks_per_node if found else None,
        "measured_at": found.measured_at if found else None,
        "samples_per_s": found.measured.samples_per_s if found else None,
    }


def run(ctx: CheckContext) -> CheckResult:
    # here, not at the top: a run with this check off does not import the settings schema
    from hostcheck import dataloader
    from hostcheck.dataloader.freshness import ROLE_VARIABLE
    from hostcheck.dataloader.training import resolve

    cfg = ctx.config
    path, named = resolve(cfg["path"], ctx.system.env)
    max_age_days = cfg["max_age_days"]
    max_age_s = None if max_age_days is None else max_age_days * 86400
    try:
        found = dataloader.read(ctx.system.path(path), required=named, max_age_s=max_age_s)
    except dataloader.SettingsFileError as exc:
        finding = Finding(
            "settings file",
            Status.FAIL,
            exc.state,
            EXPECTED,
            str(exc),
            path,
            f"measure again on this host: hostcheck loop --sweep --write {path}; or {FIX}",
        )
        return CheckResult.from_findings(
            "dataloader", [finding], _data(path, exc.state), expected=EXPECTED
        )
    if found is None:
        return CheckResult.skipped(
            "dataloader",
            f"no DataLoader settings file at {path} (role variable {ROLE_VARIABLE} writes one)",
            _data(path, "absent"),
        )
    kwargs = ", ".join(f"{k}={v}" for k, v in found.dataloader.kwargs().items())
    extra = ", with a prefetcher" if found.prefetcher else ""
    shown = (
        f"DataLoader({kwargs}){extra} for {found.workload.ranks_per_node} rank(s) per node: "
        f"{found.measured.samples_per_s:.0f} samples/s, measured {found.measured_at}"
    )
    finding = Finding("num_workers", Status.PASS, found.dataloader.num_workers, "", shown, path)
    return CheckResult.from_findings(
        "dataloader", [finding], _data(path, "ok", found), summary=shown, expected=EXPECTED
    )


SPEC = CheckSpec(
    id="dataloader",
    title="DataLoader settings file for training code",
    explain=(
        "Reads the DataLoader settings file that `hostcheck loop --sweep --write` writes and "
        "training code reads through hostcheck.dataloader.settings() (dataloader.path; "
        "null: $HOSTCHECK_DATALOADER, else /etc/hostcheck/dataloader.json). It skips when "
        "there is none, passes when it is valid and was measured on this host with the "
        "CPUs usable now (and, with dataloader.max_age_days, recently), and shows the "
        "num_workers, pin_memory, prefetch_factor and persistent_workers it recommends. It "
        "fails when the file is malformed or stale, because training code would then stop "
        "with that same error instead of loading data with the setting this host feeds "
        "best: a file copied from another host or measured before the CPUs changed "
        "recommends workers the host cannot feed."
    ),
    run=run,
    schema=SCHEMA,
    roles=("hostcheck",),
)
