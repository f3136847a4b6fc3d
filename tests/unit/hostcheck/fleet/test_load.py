"""Reports are untrusted input: every broken file is listed with its reason, never counted
as a pass, and never stops the others. Plus the command line and every output format."""

from __future__ import annotations

import copy
import json
import math
import os
import shutil
import subprocess
import sys
import tempfile
import xml.etree.ElementTree as ET
from importlib import resources
from pathlib import Path

import jsonschema
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from prometheus_client.parser import text_string_to_metric_families

from hostcheck.cli import main
from hostcheck.commands.common import profile_schema
from hostcheck.config import load_profile
from hostcheck.fleet.analyze import analyze
from hostcheck.fleet.load import read_entry, read_folders
from hostcheck.fleet.render import RENDERERS
from hostcheck.fleet.settings import FleetSettings
from tests.paths import CHECKOUT
from tests.support.fleet_reports import host, marker, write

NOBODY = ["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups"]
FLEET_SCHEMA = json.loads(resources.files("hostcheck.fleet").joinpath("fleet-v1.json").read_text())


def fleet_json(capsys, *args) -> tuple[int, dict]:
    code = main(["fleet", *map(str, args), "--format", "json"])
    return code, json.loads(capsys.readouterr().out)


def reasons(doc: dict) -> dict[str, tuple[str, str]]:
    return {h["host"]: (h["verdict"], h["reason"]) for h in doc["hosts"]}


def test_broken_files_are_listed_with_their_reason(tmp_path, capsys, real_report):
    good = host(real_report, "good")
    write(tmp_path, "good", good)
    write(tmp_path, "empty", "")
    write(tmp_path, "blank", "\n  \n")
    write(tmp_path, "truncated", json.dumps(good)[:5000])
    write(tmp_path, "foreign", {"name": "some other tool", "ok": True})
    write(tmp_path, "alist", [1, 2])
    newer = copy.deepcopy(good)
    newer["schema_version"] = 2
    write(tmp_path, "newer", newer)
    invalid = copy.deepcopy(good)
    invalid["checks"][1]["status"] = "green"
    write(tmp_path, "invalid", invalid)
    (tmp_path / "binary.json").write_bytes(b"\x89PNG\r\n\x1a\n\x00\xff\xfe")
    (tmp_path / "adir.json").mkdir()
    os.mkfifo(tmp_path / "fifo.json")  # must not block
    write(tmp_path, "badmarker", {"kind": "hostcheck-audit-marker", "state": "asleep"})
    (tmp_path / "notes.txt").write_text("not an input")
    (tmp_path / ".node9.json.x1.tmp").write_text("{")
    code, doc = fleet_json(capsys, tmp_path)
    found = reasons(doc)
    assert code == 1
    assert found["good"] == ("pass", "")
    assert found["empty"] == ("unreadable", "empty file")
    assert found["blank"] == ("unreadable", "empty file (only white space)")
    assert found["truncated"] == ("unreadable", "truncated JSON: ends after 5000 bytes")
    assert found["foreign"] == (
        "unreadable",
        "foreign: a JSON object without schema_version, not a hostcheck report",
    )
    assert found["alist"] == ("unreadable", "foreign: a list, not a hostcheck report")
    assert found["newer"][1].startswith("newer schema: report schema version 2, this hostcheck")
    assert found["invalid"] == (
        "unreadable",
        "schema-invalid: checks[1].status 'green' is not one of pass, warn, fail, skip, error",
    )
    assert found["binary"] == ("unreadable", "not UTF-8 text (binary?): byte 0")
    assert found["adir"] == ("unreadable", "a directory, not a file")
    assert found["fifo"] == ("unreadable", "not a regular file")
    assert found["badmarker"][1].startswith("audit marker: state 'asleep' is not one of")
    assert doc["verdicts"]["unreadable"] == 11 and doc["verdicts"]["pass"] == 1
    assert doc["ignored"] == [".node9.json.x1.tmp", "notes.txt"]
    jsonschema.validate(doc, FLEET_SCHEMA)


def test_a_file_that_cannot_be_opened_is_unreadable(tmp_path, real_report):
    folder = Path(tempfile.mkdtemp(prefix="fleet-perm-"))  # pytest's tmp is 0700: not for nobody
    try:
        folder.chmod(0o755)
        write(folder, "good", host(real_report, "good"))
        secret = write(folder, "secret", host(real_report, "secret"))
        secret.chmod(0o000)
        if os.geteuid() == 0:  # root reads anything: be nobody
            if shutil.which("setpriv") is None:
                pytest.skip("root, and no setpriv to drop privileges")
            code = (
                "from hostcheck.fleet.load import read_entry; import sys; "
                "e = read_entry(sys.argv[1], 'secret.json'); print(e.state, e.reason)"
            )
            done = subprocess.run(
                [*NOBODY, sys.executable, "-c", code, str(folder)],
                capture_output=True,
                text=True,
                check=False,
                cwd="/",
                env={**os.environ, "PYTHONPATH": str(CHECKOUT)},
            )
            assert done.stdout.strip() == "unreadable cannot read: Permission denied", done.stderr
        else:
            found = read_entry(str(folder), "secret.json")
            assert (found.state, found.reason) == ("unreadable", "cannot read: Permission denied")
    finally:
        shutil.rmtree(folder)


def test_markers_count_as_failed_and_keep_their_reason(tmp_path, capsys, real_report):
    write(tmp_path, "a", host(real_report, "a"))
    write(tmp_path, "b", marker("b", "no-report", "hostcheck: command not found"))
    code, doc = fleet_json(capsys, tmp_path)
    assert code == 1
    assert reasons(doc)["b"] == ("no-report", "hostcheck: command not found")


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["/nonexistent"], "/nonexistent: not a directory"),
        (["{dir}", "--set", "fleet.outliers.z=0"], "fleet.outliers.z: 0 is less than or equal"),
        (["{dir}", "--set", "fleet.drift.colour=1"], "fleet.drift.colour: unknown key"),
        (["{dir}", "--baseline", "/nonexistent.json"], "--baseline /nonexistent.json: no such"),
        (["{dir}", "--baseline", "{dir}/a.txt"], "--baseline {dir}/a.txt: foreign: a string"),
        (["{dir}", "--report", "xml:x.xml"], "--report xml:x.xml: expected FORMAT:PATH"),
        (["{dir}", "--format", "json", "--report", "prom:-"], "both want stdout"),
        (["{dir}/empty"], "{dir}/empty: no reports (<host>.json) in it"),
        (["{dir}", "--baseline", "{dir}", "--no-baseline"], "not allowed with argument"),
    ],
)
def test_usage_and_configuration_errors_exit_two_with_one_line(
    tmp_path, real_report, args, message
):
    write(tmp_path, "a", host(real_report, "a"))
    (tmp_path / "a.txt").write_text('"just a string"')
    (tmp_path / "empty").mkdir()
    argv = [a.replace("{dir}", str(tmp_path)) for a in args]
    done = subprocess.run(
        [sys.executable, "-m", "hostcheck", "fleet", *argv],
        capture_output=True,
        text=True,
        check=False,
    )
    assert done.returncode == 2
    assert message.replace("{dir}", str(tmp_path)) in done.stderr
    assert done.stderr.count("\n") == 1, done.stderr


def test_bad_fleet_value_in_a_config_file_names_file_and_key(tmp_path, real_report):
    write(tmp_path / "audit", "a", host(real_report, "a"))
    config = tmp_path / "site.yaml"
    config.write_text("fleet:\n  drift:\n    tolerance: lots\n")
    done = subprocess.run(
        [sys.executable, "-m", "hostcheck", "fleet", str(tmp_path / "audit"), "--config", config],
        capture_output=True,
        text=True,
        check=False,
    )
    assert done.returncode == 2
    assert f"{config}: fleet.drift.tolerance: 'lots' is not of type 'number'" in done.stderr


def test_every_format_parses(tmp_path, capsys, real_report):
    audit = tmp_path / "20260102T000000Z"
    for i in range(5):
        write(audit, f"gpu{i}", host(real_report, f"gpu{i}", loop=(1000.0 + i, 0.01)))
    write(audit, "gpu5", host(real_report, "gpu5", loop=(10.0, 0.01), fail=["shm"]))
    write(audit, 'bad"host\\', "{")
    write(audit, "gone", marker("gone"))
    write(tmp_path / "20260101T000000Z", "gpu0", host(real_report, "gpu0"))
    out = {kind: tmp_path / f"fleet.{kind}" for kind in RENDERERS}
    args = [a for kind, path in out.items() for a in ("--report", f"{kind}:{path}")]
    assert main(["fleet", str(audit), *args]) == 1
    table = capsys.readouterr().out
    assert "gpu5" in table and "UNREACHABLE" in table and "fleet: 8 hosts" in table
    doc = json.loads(out["json"].read_text())
    jsonschema.validate(doc, FLEET_SCHEMA)
    lines = [json.loads(line) for line in out["jsonl"].read_text().splitlines()]
    assert [x["host"] for x in lines if x["type"] == "host"] == [h["host"] for h in doc["hosts"]]
    assert lines[-1]["type"] == "summary" and lines[-1]["exit_code"] == 1
    assert {x["type"] for x in lines} == {"host", "check", "outlier", "drift", "summary"}
    suites = ET.fromstring(out["junit"].read_text())
    assert suites.get("tests") == str(sum(int(s.get("tests")) for s in suites))
    named = {s.get("name"): s for s in suites}
    assert named["gpu5"].find("testcase[@name='shm']/failure") is not None
    assert named["gone"].find("testcase/failure").get("message").startswith("unreachable: ")
    assert named['bad"host\\'].find("testcase/error") is not None
    families = {f.name: f for f in text_string_to_metric_families(out["prom"].read_text())}
    hosts = {s.labels["verdict"]: s.value for s in families["hostcheck_fleet_hosts"].samples}
    assert (hosts["pass"], hosts["fail"], hosts["unreachable"], hosts["unreadable"]) == (5, 1, 1, 1)
    verdict = {
        (s.labels["host"], s.labels["verdict"]): s.value
        for s in families["hostcheck_fleet_host_verdict"].samples
    }
    assert verdict[('bad"host\\', "unreadable")] == 1
    z = {s.labels["host"]: s.value for s in families["hostcheck_fleet_outlier_z"].samples}
    assert z["gpu5"] < -3.5
    assert families["hostcheck_fleet_exit_code"].samples[0].value == 1
    assert out["html"].read_text().startswith("<!DOCTYPE html>")
    assert sorted(p.name for p in tmp_path.iterdir() if p.is_file()) == sorted(
        p.name for p in out.values()
    )


# ---------------------------------------------------------------- property test

JSON_LEAF = (
    st.none()
    | st.booleans()
    | st.integers(min_value=-(10**30), max_value=10**30)
    | st.floats(allow_nan=True, allow_infinity=True)
    | st.text(max_size=20)
)
JSON_ANY = st.recursive(
    JSON_LEAF,
    lambda inner: (
        st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner, max_size=4)
    ),
    max_leaves=12,
)


def _paths(doc, prefix=()):
    """Every (container, key) pair of a JSON document."""
    if isinstance(doc, dict):
        for key, value in doc.items():
            yield doc, key
            yield from _paths(value, (*prefix, key))
    elif isinstance(doc, list):
        for index, value in enumerate(doc):
            yield doc, index
            yield from _paths(value, (*prefix, index))


@st.composite
def mutated_reports(draw, base):
    doc = copy.deepcopy(base)
    places = list(_paths(doc))
    for _ in range(draw(st.integers(min_value=1, max_value=4))):
        container, key = places[draw(st.integers(min_value=0, max_value=len(places) - 1))]
        try:
            if draw(st.booleans()) and isinstance(container, dict):
                container.pop(key, None)
            else:
                container[key] = draw(JSON_ANY)
        except (IndexError, KeyError):
            pass
    text = json.dumps(doc)  # allow_nan: NaN and Infinity as Python writes them
    cut = draw(st.sampled_from([None, None, None, "cut", "junk"]))
    if cut == "cut":
        text = text[: draw(st.integers(min_value=0, max_value=len(text)))]
    elif cut == "junk":
        text = draw(st.text(max_size=50)) + text
    return text


@pytest.fixture(scope="module")
def fleet_settings():
    return FleetSettings.from_profile(load_profile("default", profile_schema()).values)


def test_malformed_reports_never_crash(tmp_path_factory, real_report, fleet_settings):
    base = host(real_report, "base")

    @settings(
        max_examples=150,
        deadline=None,
        suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
    )
    @given(
        st.lists(mutated_reports(base), min_size=1, max_size=6), st.text(min_size=1, max_size=12)
    )
    def check(texts, name):
        folder = tmp_path_factory.mktemp("fuzz")
        name = name.replace("/", "_").replace("\x00", "_")
        name = "_" + name[1:] if name.startswith(".") else name  # hidden files are not inputs
        names = []
        for index, text in enumerate(texts):
            stem = f"{name}{index}"
            (folder / f"{stem}.json").write_text(text, errors="surrogatepass")
            names.append(stem)
        previous = read_folders([str(folder)])[0].entries
        (current,) = read_folders([str(folder)])
        from hostcheck.fleet.analyze import Baseline

        report = analyze(
            str(folder), current.entries, fleet_settings, Baseline("b", "folder", previous)
        )
        assert sorted(e.host for e in report.entries) == sorted(names)
        for entry in report.entries:
            assert entry.verdict != "pass" or entry.state == "report"
        for render in RENDERERS.values():
            text = render(report)
            text.encode("utf-8")
        doc = json.loads(RENDERERS["json"](report))
        assert all(not isinstance(v, float) or math.isfinite(v) for v in _leaves(doc))
        ET.fromstring(RENDERERS["junit"](report))
        list(text_string_to_metric_families(RENDERERS["prom"](report)))
        shutil.rmtree(folder)

    check()


def _leaves(doc):
    if isinstance(doc, dict):
        for value in doc.values():
            yield from _leaves(value)
    elif isinstance(doc, list):
        for value in doc:
            yield from _leaves(value)
    else:
        yield doc


def test_host_names_sort_naturally_by_ascii_digits_only():
    from hostcheck.report.entry import natural_key

    names = ["node10", "node2", "node²", "node1", "node١"]
    assert sorted(names, key=natural_key) == ["node1", "node2", "node10", "node²", "node١"]
