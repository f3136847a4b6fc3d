"""hostcheck fleet and the dataloader check: each host's recommended DataLoader settings in the
host table (column "workers"), the JSON and HTML outputs, and drift when a recommended setting
changed or the settings file became absent, stale or malformed since the baseline."""

from __future__ import annotations

import copy
import json
import re
from importlib import resources

import jsonschema
import pytest

from hostcheck.cli import main
from hostcheck.report.extract import dataloader_of
from tests.support.fleet_reports import check, host, marker, write

AUDIT = "20260102T000000Z"
EARLIER = "20260101T000000Z"
FLEET_SCHEMA = json.loads(resources.files("hostcheck.fleet").joinpath("fleet-v1.json").read_text())
# What `hostcheck loop --sweep --write` recommends on a 2-core host without CUDA.
TWO = {"num_workers": 2, "pin_memory": False, "prefetch_factor": 2, "persistent_workers": True}
STATUS_OF = {"ok": "pass", "absent": "skip", "stale": "fail", "malformed": "fail"}


def dataloader(doc: dict, state: str = "ok", prefetcher: bool = False, **settings) -> dict:
    """The report with its dataloader check in this state (added, shaped as the shm check,
    when the report has none): the data hostcheck run's dataloader check gives."""
    if not any(c["id"] == "dataloader" for c in doc["checks"]):
        added = copy.deepcopy(check(doc, "shm"))
        added.update(id="dataloader", findings=[], summary="", remedy="")
        doc["checks"].append(added)
    target = check(doc, "dataloader")
    ok = state == "ok"
    given = {**TWO, **settings}
    target["status"] = STATUS_OF[state]
    target["summary"] = "" if ok else f"/etc/hostcheck/dataloader.json is {state}"
    # the findings hostcheck/checks/dataloader.py gives: num_workers, or what is wrong
    shape = copy.deepcopy(check(doc, "shm")["findings"][0])
    if ok:
        shape.update(name="num_workers", status="pass", measured=given["num_workers"])
    else:
        shape.update(name="settings file", status="fail", measured=state)
    target["findings"] = [] if state == "absent" else [shape]
    target["data"] = {
        "path": "/etc/hostcheck/dataloader.json",
        "state": state,
        **{key: value if ok else None for key, value in given.items()},
        "prefetcher": prefetcher if ok else None,
        "ranks_per_node": 1 if ok else None,
        "measured_at": "2026-01-01T10:00:00Z" if ok else None,
        "samples_per_s": 812.5 if ok else None,
    }
    return doc


def without_dataloader(doc: dict) -> dict:
    doc["checks"] = [c for c in doc["checks"] if c["id"] != "dataloader"]
    return doc


def fleet(capsys, *args: str) -> tuple[int, dict]:
    code = main(["fleet", *map(str, args), "--format", "json"])
    return code, json.loads(capsys.readouterr().out)


def table_rows(capsys, *args: str) -> dict[str, list[str]]:
    """The host table's cells by host, cut where the header's columns start."""
    main(["fleet", *map(str, args), "--format", "table"])
    lines = capsys.readouterr().out.split("\n\n")[0].splitlines()
    header = lines[1]
    assert header.split() == ["host", "verdict", "os", "workers", "reasons"]
    starts = [m.start() for m in re.finditer(r"\S+", header)] + [None]
    return {
        line.split()[0]: [line[a:b].strip() for a, b in zip(starts, starts[1:])]
        for line in lines[2:]
    }


def drift(doc: dict, name: str) -> dict[str, dict]:
    return {f"{c['kind']} {c['key']}".strip(): c for c in doc["drift"] if c["host"] == name}


@pytest.fixture
def audit(tmp_path, real_report):
    """An audit of hosts in each state of the settings file, plus one whose report has no
    dataloader check (an older hostcheck) and one that was not reached."""
    folder = tmp_path / AUDIT
    base = without_dataloader(copy.deepcopy(real_report))
    write(folder, "fed", dataloader(host(base, "fed"), prefetcher=True, num_workers=4))
    write(folder, "inline", dataloader(host(base, "inline"), num_workers=0, pin_memory=True))
    write(folder, "unset", dataloader(host(base, "unset"), "absent"))
    write(folder, "moved", dataloader(host(base, "moved"), "stale"))
    write(folder, "edited", dataloader(host(base, "edited"), "malformed"))
    write(folder, "older", host(base, "older"))
    write(folder, "off", marker("off"))
    return folder


def test_the_host_table_shows_each_hosts_recommended_workers(audit, capsys):
    rows = table_rows(capsys, audit, "--no-baseline")
    workers = {name: cells[3] for name, cells in rows.items()}
    assert workers == {
        "edited": "malformed",
        "fed": "4, no pin, prefetch 2, prefetcher",
        "inline": "0, pin",
        "moved": "stale",
        "older": "-",
        "unset": "-",
        "off": "",  # not assessed: no report to read it from
    }
    assert rows["off"][1:] == ["UNREACHABLE", "", "", "ssh: No route to host"]
    assert rows["moved"][-1] == "dataloader (fail)"


def test_the_json_output_has_each_hosts_settings_and_passes_the_schema(audit, capsys):
    _, doc = fleet(capsys, audit, "--no-baseline")
    jsonschema.validate(doc, FLEET_SCHEMA)
    hosts = {h["host"]: h for h in doc["hosts"]}
    fed = {"state": "ok", **TWO, "num_workers": 4, "prefetcher": True}
    assert hosts["fed"]["dataloader"] == fed
    nothing = dict.fromkeys(TWO, None) | {"prefetcher": None}
    assert hosts["unset"]["dataloader"] == {"state": "absent", **nothing}
    assert hosts["moved"]["dataloader"] == {"state": "stale", **nothing}
    assert hosts["older"]["dataloader"] == {} and hosts["off"]["dataloader"] == {}
    assert hosts["moved"]["checks"]["dataloader"] == "fail"


def test_the_html_page_has_a_workers_column(audit, tmp_path, capsys):
    page = tmp_path / "fleet.html"
    main(["fleet", str(audit), "--no-baseline", "--report", f"html:{page}"])
    capsys.readouterr()
    text = page.read_text()
    assert "<th>workers</th><th>reasons</th>" in text
    assert '<td class="reason">4, no pin, prefetch 2, prefetcher</td>' in text
    assert '<td class="reason">stale</td>' in text


@pytest.fixture
def two_audits(tmp_path, real_report):
    """The baseline audit, then this one: one host each way its settings can drift."""
    base = without_dataloader(copy.deepcopy(real_report))
    before, after = tmp_path / EARLIER, tmp_path / AUDIT
    cases = {
        # host: (baseline, now); None: no dataloader check in that report
        "same": (dict(num_workers=4), dict(num_workers=4)),
        "fewer": (dict(num_workers=4), dict(num_workers=2, pin_memory=True)),
        "factor": (dict(prefetch_factor=2), dict(prefetch_factor=4, persistent_workers=False)),
        "removed": (dict(), dict(state="absent")),
        "stale": (dict(), dict(state="stale")),
        "measured": (dict(state="absent"), dict(num_workers=3)),
        "upgraded": (None, dict(num_workers=3)),
        "stays-absent": (dict(state="absent"), dict(state="absent")),
    }
    for name, (then, now) in cases.items():
        for folder, given in ((before, then), (after, now)):
            doc = host(base, name)
            write(folder, name, doc if given is None else dataloader(doc, **given))
    return before, after


def test_drift_names_changed_settings_and_a_file_gone_stale_or_measured(two_audits, capsys):
    _, after = two_audits
    _, doc = fleet(capsys, after)
    loader = {
        (c["host"], c["key"]): (c["before"], c["after"], c["note"])
        for c in doc["drift"]
        if c["kind"] == "dataloader"
    }
    assert loader == {
        ("fewer", "num_workers"): (4, 2, "recommended num_workers"),
        ("fewer", "pin_memory"): (False, True, "recommended pin_memory"),
        ("factor", "prefetch_factor"): (2, 4, "recommended prefetch_factor"),
        ("factor", "persistent_workers"): (True, False, "recommended persistent_workers"),
        ("removed", "state"): ("ok", "absent", "DataLoader settings file gone"),
        ("stale", "state"): (
            "ok",
            "stale",
            "DataLoader settings file stale: measured on another host name or CPU count",
        ),
        ("measured", "state"): (
            "absent",
            "ok",
            "DataLoader settings file measured: 3, no pin, prefetch 2",
        ),
    }
    # the check's own status changes are there too; an upgrade to a hostcheck with the check
    # is a new check, not a changed recommendation
    assert drift(doc, "stale")["check dataloader"]["note"].startswith("started failing: ")
    assert set(drift(doc, "upgraded")) == {"check dataloader"}
    assert drift(doc, "same") == {} and drift(doc, "stays-absent") == {}
    # the check's findings are not compared again as values
    assert not [c for c in doc["drift"] if c["key"].startswith("dataloader.")]
    jsonschema.validate(doc, FLEET_SCHEMA)


def test_the_drift_table_and_html_show_the_dataloader_items(two_audits, tmp_path, capsys):
    _, after = two_audits
    page = tmp_path / "fleet.html"
    main(["fleet", str(after), "--report", f"html:{page}"])
    lines = capsys.readouterr().out.splitlines()
    fewer = [re.split(r" {2,}", line) for line in lines if line.startswith("fewer ")]
    assert ["fewer", "dataloader num_workers", "4", "2", "recommended num_workers"] in fewer
    text = page.read_text()
    assert "<td>dataloader num_workers</td><td>4</td><td>2</td>" in text


def test_a_saved_fleet_output_as_baseline_keeps_the_settings(two_audits, tmp_path, capsys):
    before, after = two_audits
    saved = tmp_path / "before.json"
    main(["fleet", str(before), "--no-baseline", "--report", f"json:{saved}"])
    capsys.readouterr()
    _, from_reports = fleet(capsys, after, "--baseline", before)
    _, from_saved = fleet(capsys, after, "--baseline", saved)
    assert from_saved["baseline"]["kind"] == "fleet"
    assert from_saved["drift"] == from_reports["drift"]
    assert drift(from_saved, "fewer")["dataloader num_workers"]["before"] == 4


@pytest.mark.parametrize(
    ("data", "kept"),
    [
        (None, {}),
        ("ok", {}),
        ({"state": "lost"}, {}),
        (
            {"state": "ok", "num_workers": True, "pin_memory": 1, "prefetch_factor": 0},
            {"state": "ok", **dict.fromkeys(TWO, None), "prefetcher": None},
        ),
        (
            {"state": "ok", "num_workers": -1, "prefetch_factor": "2", "prefetcher": "yes"},
            {"state": "ok", **dict.fromkeys(TWO, None), "prefetcher": None},
        ),
        (
            {"state": "stale", "num_workers": 4, "pin_memory": True},
            {"state": "stale", **dict.fromkeys(TWO, None), "prefetcher": None},
        ),
    ],
)
def test_untrusted_dataloader_data_keeps_only_what_fits(data, kept):
    assert dataloader_of(data) == kept
