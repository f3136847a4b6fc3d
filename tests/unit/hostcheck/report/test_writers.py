"""Report formats rendered from one real run of the shm check on a fixture host."""

import io
import json
import math
import xml.etree.ElementTree as ET
from importlib import resources

import jsonschema
import pytest
from prometheus_client.parser import text_string_to_metric_families
from rich.console import Console

from hostcheck.checks import shm
from hostcheck.checks.base import RunOptions
from hostcheck.config import Profile
from hostcheck.model import CheckResult, Finding, Status
from hostcheck.report.document import build_document, os_release
from hostcheck.report.table import render_table
from hostcheck.report.writers import (
    parse_report_spec,
    render_json,
    render_junit,
    render_prom,
    write_atomic,
)
from hostcheck.runner import RunOutcome, run_one

MiB = 2**20
SCHEMA = json.loads(resources.files("hostcheck.report").joinpath("report-v1.json").read_text())


@pytest.fixture
def document(fake_host):
    fake_host.file(
        "/proc/self/mountinfo",
        "40 24 0:45 / /dev/shm rw,nosuid,nodev - tmpfs shm rw,size=65536k\n",
    )
    fake_host.file("/proc/meminfo", "MemTotal: 1048576 kB\n")
    fake_host.filesystem("/dev/shm", size=64 * MiB, free=60 * MiB)
    section = {
        "min_size": "50%",
        "min_free": "1MiB",
        "loader": {"workers": None, "prefetch_factor": 2, "batch_bytes": None, "ranks": 1},
    }
    failing = run_one(shm.SPEC, fake_host.context(section))
    unlimited = CheckResult.from_findings(
        "ulimits",
        [Finding("memlock.soft", Status.PASS, math.inf, 65536, display="unlimited")],
    )
    skipped = CheckResult.skipped("gpu", 'no NVIDIA driver: "libnvidia-ml.so.1" not found')
    outcome = RunOutcome(
        results=[failing, unlimited, skipped],
        started_at=1_700_000_000.0,
        duration_s=0.25,
        profile=Profile("default", {"checks": {"shm": section}}, ["profile default"]),
        options=RunOptions(user="alice"),
        counts={"pass": 1, "warn": 0, "fail": 1, "skip": 1, "error": 0},
    )
    return build_document(outcome, outcome.exit_code(), 'ID=debian\nVERSION_ID="12"\n')


def test_json_matches_schema_and_keeps_values(document):
    data = json.loads(render_json(document))
    jsonschema.validate(data, SCHEMA)
    assert data["schema_version"] == 1
    assert data["verdict"] == "fail" and data["exit_code"] == 1
    assert data["started_at"] == "2023-11-14T22:13:20Z"
    assert data["host"]["os"]["id"] == "debian" and data["host"]["os"]["version_id"] == "12"
    shm_check = data["checks"][0]
    assert shm_check["data"]["size_bytes"] == 64 * MiB
    assert data["checks"][1]["findings"][0]["measured"] == "unlimited"


def test_schema_rejects_a_broken_report(document):
    data = json.loads(render_json(document))
    data["checks"][0]["status"] = "green"
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate(data, SCHEMA)
    del data["schema_version"]
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate(data, SCHEMA)


def test_junit_marks_failures_and_skips(document):
    suite = ET.fromstring(render_junit(document))
    assert suite.tag == "testsuite"
    assert (suite.get("tests"), suite.get("failures"), suite.get("skipped")) == ("3", "1", "1")
    cases = {case.get("name"): case for case in suite.iter("testcase")}
    assert cases["shm"].find("failure") is not None
    assert "shm_size" in cases["shm"].find("failure").get("message")
    assert cases["gpu"].find("skipped") is not None
    assert cases["ulimits"].find("failure") is None


def test_prometheus_textfile_parses_with_the_reference_parser(document):
    families = {f.name: f for f in text_string_to_metric_families(render_prom(document))}
    status = {
        (s.labels["check"], s.labels["status"]): s.value
        for s in families["hostcheck_check_status"].samples
    }
    assert status[("shm", "fail")] == 1 and status[("shm", "pass")] == 0
    assert status[("gpu", "skip")] == 1
    values = {
        (s.labels["check"], s.labels["finding"]): s.value
        for s in families["hostcheck_finding_value"].samples
    }
    assert values[("shm", "size")] == 64 * MiB
    assert values[("ulimits", "memlock.soft")] == math.inf
    units = {
        (s.labels["check"], s.labels["finding"]): s.labels.get("unit")
        for s in families["hostcheck_finding_value"].samples
    }
    assert units[("shm", "size")] == units[("shm", "free")] == "bytes"
    assert units[("ulimits", "memlock.soft")] is None  # made here without a unit
    assert families["hostcheck_exit_code"].samples[0].value == 1
    assert families["hostcheck_last_run_timestamp_seconds"].samples[0].value == 1_700_000_000


def series(text: str) -> set[tuple[str, tuple]]:
    return {
        (sample.name, tuple(sorted(sample.labels.items())))
        for family in text_string_to_metric_families(text)
        for sample in family.samples
    }


def test_a_failing_check_is_named_by_finding_and_status_never_by_its_words(document):
    families = {f.name: f for f in text_string_to_metric_families(render_prom(document))}
    problems = {
        tuple(sorted(s.labels.items())) for s in families["hostcheck_check_problem_info"].samples
    }
    shm_bad = [f["name"] for f in document["checks"][0]["findings"] if f["status"] != "pass"]
    assert problems == {
        *((("check", "shm"), ("finding", name), ("status", "fail")) for name in shm_bad),
        (("check", "gpu"), ("finding", ""), ("status", "skip")),
    }
    assert shm_bad


def test_another_run_with_other_values_makes_no_new_series(document):
    """A summary in a label made a new series whenever a failing value changed."""
    later = json.loads(json.dumps(document))
    shm_check = later["checks"][0]
    shm_check["summary"] = "size 63.0 MiB (expected >= 512.0 MiB)"
    for finding in shm_check["findings"]:
        if isinstance(finding["measured"], int):
            finding["measured"] -= MiB
    later["started_at"] = "2023-11-14T22:20:00Z"
    assert series(render_prom(later)) == series(render_prom(document))


def test_gpu_faults_are_bounded_series_per_gpu_and_kind(document):
    gpu = {
        "id": "gpu",
        "status": "fail",
        "summary": "gpu2 row remapping ...",
        "expected": "",
        "remedy": "",
        "duration_s": 0.1,
        "findings": [],
        "data": {
            "gpus": [
                {
                    "index": i,
                    "bus_id": f"0000:{0x18 + i:02x}:00.0",
                    "memory_repair": {
                        "remapped_rows": {
                            "corrected": 0,
                            "uncorrected": int(i == 2),
                            "pending": i == 2,
                            "failed": False,
                        },
                        "retired_pages": None,
                    },
                    "nvlinks": [True] * 17 + [i != 3],
                }
                for i in range(4)
            ],
            "events": {
                "events": {
                    "xid:79:0000:1a:00.0": {
                        "kind": "xid",
                        "code": 79,
                        "bus_id": "0000:1a:00.0",
                        "count": 2,
                        "last_text": "pid=77, name=python, GPU has fallen off the bus.",
                    }
                }
            },
        },
    }
    document = {**document, "checks": [*document["checks"][:2], gpu]}
    values = {
        (s.name, tuple(sorted(s.labels.items()))): s.value
        for f in text_string_to_metric_families(render_prom(document))
        for s in f.samples
        if s.name.startswith("hostcheck_gpu_")
    }
    two = (("bus_id", "0000:1a:00.0"), ("gpu", "2"))
    assert values[("hostcheck_gpu_row_remap_pending", two)] == 1
    assert (
        values[("hostcheck_gpu_row_remap_pending", (("bus_id", "0000:18:00.0"), ("gpu", "0")))] == 0
    )
    assert (
        values[("hostcheck_gpu_remapped_rows", (*two[:1], ("cause", "uncorrected"), two[1]))] == 1
    )
    assert (
        values[("hostcheck_gpu_events", (*two[:1], ("code", "79"), two[1], ("kind", "xid")))] == 2
    )
    down3 = (("bus_id", "0000:1b:00.0"), ("gpu", "3"), ("state", "down"))
    assert values[("hostcheck_gpu_nvlinks", down3)] == 1
    assert len(values) == 4 * 2 + 4 * 2 + 4 * 2 + 1  # pending, failed; rows x2; links x2; one event
    labels = {name for _, pairs in values for name, _ in pairs}
    assert labels == {"gpu", "bus_id", "cause", "state", "code", "kind"}  # no free text


def test_report_spec_parsing():
    assert parse_report_spec("json:-") == ("json", "-")
    assert parse_report_spec("prom:/var/lib/node_exporter/hc.prom")[0] == "prom"
    for bad in ("json", "xml:out.xml", "json:"):
        with pytest.raises(ValueError, match="FORMAT:PATH"):
            parse_report_spec(bad)


def test_atomic_write_leaves_no_temporary_file(tmp_path):
    target = tmp_path / "r.json"
    write_atomic(str(target), "one")
    write_atomic(str(target), "two")
    assert target.read_text() == "two"
    assert [p.name for p in tmp_path.iterdir()] == ["r.json"]


def test_a_report_to_a_fifo_or_device_writes_into_it_and_leaves_it_as_it_was(tmp_path):
    """`--report json:/dev/null` once replaced this machine's /dev/null with a regular file:
    the rename of an atomic write put a file where the device was."""
    import os
    import stat
    import threading

    fifo = tmp_path / "pipe"
    os.mkfifo(fifo)
    read = []
    reader = threading.Thread(target=lambda: read.append(fifo.read_text()), daemon=True)
    reader.start()
    write_atomic(str(fifo), "through the pipe")
    reader.join(timeout=10)
    assert read == ["through the pipe"]
    assert stat.S_ISFIFO(os.stat(fifo).st_mode)
    assert [p.name for p in tmp_path.iterdir()] == ["pipe"]
    write_atomic("/dev/null", "nothing")
    assert stat.S_ISCHR(os.stat("/dev/null").st_mode)


def test_os_release_parsing():
    parsed = os_release('NAME="Rocky Linux"\nID="rocky"\nVERSION_ID="9.4"\nPRETTY_NAME="Rocky 9"\n')
    assert parsed == {"id": "rocky", "version_id": "9.4", "pretty_name": "Rocky 9"}
    assert os_release(None) == {"id": "", "version_id": "", "pretty_name": ""}


TITLE = f"{'hostcheck 0.1.0 on node1 (profile default)':80}"  # padded to the table's width
TABLE = """\
{title}
┏━━━━━━━━━┳━━━━━━━━┳━━━━━━━━━━━━━━━━━━━━━━━━━━━━━┳━━━━━━━━━━━━━━━━━━━━━━━━━━━━━┓
┃ check   ┃ status ┃ measured                    ┃ expected                    ┃
┡━━━━━━━━━╇━━━━━━━━╇━━━━━━━━━━━━━━━━━━━━━━━━━━━━━╇━━━━━━━━━━━━━━━━━━━━━━━━━━━━━┩
│ shm     │ FAIL   │ size 64.0 MiB               │ size >= 512.0 MiB (50% of   │
│         │        │                             │ RAM)                        │
{shm}\
│ ulimits │ PASS   │ memlock.soft unlimited      │ memlock.soft 65536          │
{ulimits}\
│ gpu     │ SKIP   │ no NVIDIA driver:           │                             │
│         │        │ "libnvidia-ml.so.1" not     │                             │
│         │        │ found                       │                             │
└─────────┴────────┴─────────────────────────────┴─────────────────────────────┘
to fix:
  shm: set shm_size (role shm) and run: ansible-playbook site.yml --tags shm (at
least 512.0 MiB)
verdict: FAIL  (1 pass, 0 warn, 1 fail, 1 skip, 0 error; 0.25 s; exit 1)
"""
SHM_FINDINGS = """\
│         │ pass   │ type: tmpfs                 │ tmpfs                       │
│         │        │ [/proc/self/mountinfo]      │                             │
│         │ fail   │ size: 64.0 MiB              │ >= 512.0 MiB (50% of RAM)   │
│         │        │ [statvfs(/dev/shm)]         │                             │
│         │ pass   │ free: 60.0 MiB              │ >= 1.0 MiB                  │
│         │        │ [statvfs(/dev/shm)]         │                             │
"""
ULIMITS_FINDINGS = """\
│         │ pass   │ memlock.soft: unlimited     │ 65536                       │
"""


def _table(document: dict, verbose: bool = False, **console) -> str:
    document["host"]["hostname"] = "node1"
    out = io.StringIO()
    render_table(document, Console(file=out, width=80, highlight=False, **console), verbose)
    return out.getvalue()


def test_table_text(document):
    assert _table(document) == TABLE.format(title=TITLE, shm="", ulimits="")
    verbose = TABLE.format(title=TITLE, shm=SHM_FINDINGS, ulimits=ULIMITS_FINDINGS)
    assert _table(document, verbose=True) == verbose


def test_a_remedy_two_checks_share_is_written_out_once(document):
    """hostcheck job's GPU check, when data loading starves the GPU, has the loader's remedy."""
    loader = {**document["checks"][0], "id": "job-loader1", "remedy": "raise num_workers"}
    gpu = {**loader, "id": "job-gpu"}
    other = {**loader, "id": "job-loader2", "remedy": "lower batch_size"}
    document["checks"] = [loader, gpu, other]
    lines = _table(document).splitlines()
    start = lines.index("to fix:")
    assert lines[start + 1 : start + 4] == [
        "  job-loader1: raise num_workers",
        "  job-gpu: as job-loader1 above",
        "  job-loader2: lower batch_size",
    ]


def test_table_header_is_bold_on_a_terminal(document):
    lines = _table(document, force_terminal=True, color_system="standard").splitlines()
    bold = "\x1b[1m \x1b[0m\x1b[1m{}\x1b[0m\x1b[1m \x1b[0m"
    cells = ("check  ", "status", f"{'measured':27}", f"{'expected':27}")
    assert lines[2] == "┃" + "┃".join(bold.format(cell) for cell in cells) + "┃"
    assert lines[4] == (
        "│ shm     │ \x1b[1;31mFAIL  \x1b[0m │ size 64.0 MiB               │ size >= 512.0 MiB "
        "(50% of   │"
    )
