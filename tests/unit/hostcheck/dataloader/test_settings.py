"""The DataLoader settings file: `hostcheck loop --sweep --write`, hostcheck.dataloader
(load, settings, fallback, the ranks rule, strict validation with one-line errors, atomic
writes) and the dataloader check of `hostcheck run`."""

from __future__ import annotations

import copy
import dataclasses
import datetime
import json
import os
import stat
import subprocess
import sys
import time
from pathlib import Path

import jsonschema
import pytest

from hostcheck import dataloader
from hostcheck.checks.base import CheckContext, RunOptions
from hostcheck.cli import main
from hostcheck.commands.common import profile_schema
from hostcheck.config import load_profile
from hostcheck.dataloader import freshness, schema, training, writing
from hostcheck.model import Status
from hostcheck.registry import CHECKS
from hostcheck.runner import run_checks
from hostcheck.system import System
from tests.paths import CHECKOUT as REPO

SCHEMA = json.loads((REPO / "hostcheck" / "dataloader" / "dataloader-v1.json").read_text())
HOSTNAME = os.uname().nodename
CPUS = os.cpu_count()  # what the file records and staleness compares
USABLE = len(os.sched_getaffinity(0))  # what the fallback shares out
DATA_KEYS = [
    "path",
    "state",
    "num_workers",
    "pin_memory",
    "prefetch_factor",
    "persistent_workers",
    "prefetcher",
    "ranks_per_node",
    "measured_at",
    "samples_per_s",
]
# A file as `hostcheck loop --sweep --write` writes it on this machine, for 1 rank per node.
DOCUMENT = {
    "schema_version": 1,
    "kind": "hostcheck-dataloader-settings",
    "hostcheck_version": "0.1.0",
    "measured_at": "2026-11-25T06:00:00Z",
    "host": {
        "hostname": HOSTNAME,
        "cpus": CPUS,
        "physical_cores": 2,
        "memory_bytes": 16 * 2**30,
        "device": "cpu",
    },
    "workload": {
        "sample": "jpeg",
        "sample_cost_us": None,
        "image_size": 224,
        "batch_size": 64,
        "step_time_s": 0.16,
        "ranks_per_node": 1,
        "dataset_path": None,
        "max_workers": 2,
    },
    "dataloader": {
        "num_workers": 1,
        "pin_memory": True,
        "prefetch_factor": 2,
        "persistent_workers": True,
    },
    "prefetcher": True,
    "measured": {
        "samples_per_s": 400.25,
        "best_samples_per_s": 410.0,
        "data_wait_fraction": 0.01,
        "shm_bytes_per_rank": 19_267_584,
        "tolerance": 0.05,
    },
}


def document(**sections) -> dict:
    """DOCUMENT with some sections' keys changed: document(host={"cpus": 3})."""
    changed = copy.deepcopy(DOCUMENT)
    for name, value in sections.items():
        if isinstance(value, dict) and isinstance(changed.get(name), dict):
            changed[name].update(value)
        else:
            changed[name] = value
    return changed


def without(section: str, key: str) -> dict:
    changed = copy.deepcopy(DOCUMENT)
    del changed[section][key]
    return changed


def put(path: Path, content: dict | str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(content if isinstance(content, str) else json.dumps(content, indent=2))
    return path


@pytest.fixture
def no_file(tmp_path, monkeypatch):
    """No settings file anywhere: the default path is absent and nothing is named."""
    monkeypatch.setattr(training, "DEFAULT_PATH", str(tmp_path / "etc" / "dataloader.json"))
    monkeypatch.delenv(dataloader.ENV_VAR, raising=False)
    monkeypatch.delenv("LOCAL_WORLD_SIZE", raising=False)
    return tmp_path


# ---------------------------------------------------------------- the sweep writes it


def test_a_real_sweep_writes_a_file_that_settings_reads_back(tmp_path, no_file, capsys):
    path = tmp_path / "new" / "dataloader.json"
    argv = ["loop", "--sweep", "--sample", "sleep", "--sample-cost-us", "500"]
    argv += ["--batch-size", "8", "--step-ms", "5", "--seconds", "0.3", "--max-workers", "1"]
    argv += ["--set", "loop.max_data_wait=1", "--write", str(path)]
    assert main(argv) == 0
    out = capsys.readouterr().out
    assert f"settings: {path}" in out
    written = json.loads(path.read_text())
    jsonschema.validate(written, SCHEMA)
    assert stat.S_IMODE(path.stat().st_mode) == 0o644
    assert os.listdir(path.parent) == ["dataloader.json"]  # no temporary file left
    assert written["host"] == {
        "hostname": HOSTNAME,
        "cpus": CPUS,
        "physical_cores": written["host"]["physical_cores"],
        "memory_bytes": System().total_memory(),
        "device": "cpu",
    }
    assert written["workload"] == {
        "sample": "sleep",
        "sample_cost_us": 500.0,
        "image_size": 224,
        "batch_size": 8,
        "step_time_s": 0.005,
        "ranks_per_node": 1,
        "dataset_path": None,
        "max_workers": 1,
    }
    loader = written["dataloader"]
    assert loader["num_workers"] in (0, 1)
    assert loader["pin_memory"] is True  # not measurable without CUDA: recommended on
    assert loader["prefetch_factor"] in ((None,) if loader["num_workers"] == 0 else (1, 2, 4))
    assert loader["persistent_workers"] is (loader["num_workers"] == 1)
    assert written["measured"]["tolerance"] == 0.05
    assert 0 < written["measured"]["samples_per_s"] <= written["measured"]["best_samples_per_s"]
    assert written["measured_at"].endswith("Z")
    assert f"settings: {path}: DataLoader(num_workers={loader['num_workers']}," in out
    kwargs = {k: v for k, v in loader.items() if v is not None}
    if not loader["num_workers"]:
        kwargs.pop("persistent_workers")
    assert dataloader.settings(path=path, cuda=True) == kwargs
    assert dataloader.load(path).workload.max_workers == 1


def sweep_row(workers: int, prefetcher: bool, samples_per_s: float) -> dict:
    from hostcheck.loop.sweep import Row

    return Row(
        num_workers=workers,
        pin_memory=True,
        prefetcher=prefetcher,
        prefetch_factor=2,
        samples_per_s=samples_per_s,
        data_wait_fraction=0.1,
        step_s=0.01,
        worker_cpu_cores=0.5,
        shm_peak_bytes=0,
        batch_bytes=1000,
        startup_s={},
    ).to_dict()


def test_the_file_holds_the_best_setting_without_a_prefetcher():
    """Training code gets DataLoader arguments, and a DataLoader alone does not prefetch: when
    the sweep's best used the prefetcher with 0 workers (2 ranks on 2 cores, measured), the file
    takes the best plain row (1 worker) and says a prefetcher would gain more."""
    from hostcheck.commands.loop_runs import plain_loader_recommendation
    from hostcheck.loop.sweep import Row, recommend

    rows = [sweep_row(0, False, 128), sweep_row(0, True, 250), sweep_row(1, False, 191)]
    rows += [sweep_row(1, True, 252)]
    overall = recommend([Row(**r) for r in rows], 0.05, False).to_dict()
    assert (overall["num_workers"], overall["prefetcher"]) == (0, True)
    plain = plain_loader_recommendation(rows, overall, 0.05, False)
    assert (plain["num_workers"], plain["samples_per_s"], plain["prefetcher"]) == (1, 191, True)
    # the prefetcher within 5 % of the plain best: not said
    rows[1], rows[3] = sweep_row(0, True, 195), sweep_row(1, True, 196)
    overall = recommend([Row(**r) for r in rows], 0.05, False).to_dict()
    assert plain_loader_recommendation(rows, overall, 0.05, False)["prefetcher"] is False


def test_ranks_sets_the_recorded_ranks_and_the_default_max_workers(tmp_path, capsys):
    path = tmp_path / "dataloader.json"
    argv = ["loop", "--sweep", "--sample", "sleep", "--sample-cost-us", "200", "--ranks", "4"]
    argv += ["--batch-size", "4", "--step-ms", "2", "--seconds", "0.2"]
    argv += ["--set", "loop.max_data_wait=1", "--write", str(path)]
    assert main(argv) == 0
    written = json.loads(path.read_text())
    # 2 physical cores here (or however many) // 4 ranks, at least 1
    cores = written["host"]["physical_cores"]
    assert written["workload"]["ranks_per_node"] == 4
    assert written["workload"]["max_workers"] == max(1, cores // 4)
    assert f"settings: {path}" in capsys.readouterr().out


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--write", "{tmp}/x.json"], "--write needs --sweep"),
        (["--sweep", "--write", "{tmp}"], "--write {tmp}: is a directory"),
        (["--sweep", "--write", "{tmp}/file/x.json"], "--write {tmp}/file/x.json: {tmp}/file "
         "is not a directory"),
        (["--sweep", "--ranks", "0", "--write", "{tmp}/x.json"], "--ranks must be 1 or more"),
    ],
)  # fmt: skip
def test_write_usage_errors(args, message, tmp_path, capsys):
    (tmp_path / "file").write_text("")
    assert main(["loop", *(a.format(tmp=tmp_path) for a in args)]) == 2
    err = capsys.readouterr().err
    assert err == f"hostcheck: error: {message.format(tmp=tmp_path)}\n"
    assert sorted(os.listdir(tmp_path)) == ["file"]


def test_an_unwritable_folder_is_refused_before_the_sweep(tmp_path, capsys, monkeypatch):
    monkeypatch.setattr(os, "access", lambda path, mode: False)  # as for a user, also as root
    target = tmp_path / "new" / "d.json"
    assert main(["loop", "--sweep", "--write", str(target)]) == 2
    err = capsys.readouterr().err
    assert err == f"hostcheck: error: --write {target}: directory {tmp_path} is not writable\n"


def test_a_failed_write_is_exit_two_after_the_recommendation(tmp_path, monkeypatch, capsys):
    def full(path, found):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(writing, "write", full)
    path = tmp_path / "dataloader.json"
    argv = ["loop", "--sweep", "--sample", "sleep", "--sample-cost-us", "200", "--batch-size"]
    argv += ["4", "--step-ms", "2", "--seconds", "0.2", "--max-workers", "0", "--write", str(path)]
    assert main(argv) == 2
    captured = capsys.readouterr()
    assert "recommendation: DataLoader(num_workers=0" in captured.out
    assert captured.err == f"hostcheck: error: --write {path}: No space left on device\n"
    assert os.listdir(tmp_path) == []


def test_no_recommendation_writes_no_file(tmp_path):
    from hostcheck.commands import loop_runs
    from hostcheck.loop.settings import LoopSettings
    from hostcheck.model import CheckResult

    check = CheckResult("loop", Status.FAIL, "", data={"sweep": {"recommendation": None}})
    path = tmp_path / "d.json"
    line = loop_runs.write_settings(str(path), check, LoopSettings(), System())
    assert line == f"settings: not written to {path}: no recommendation"
    assert not path.exists()


# ---------------------------------------------------------------- reading it


def test_settings_from_the_file_named_by_the_environment(tmp_path, no_file, monkeypatch):
    path = put(tmp_path / "site" / "dl.json", DOCUMENT)
    monkeypatch.setenv(dataloader.ENV_VAR, str(path))
    assert dataloader.settings() == {
        "num_workers": 1,
        "pin_memory": True,
        "prefetch_factor": 2,
        "persistent_workers": True,
    }
    assert dataloader.settings(cuda=False)["pin_memory"] is False
    found = dataloader.load()
    assert found.path == str(path)
    assert found.prefetcher is True
    assert found.host.hostname == HOSTNAME
    assert found.measured.samples_per_s == 400.25
    assert found.to_dict() == DOCUMENT


def test_the_default_path_is_read_when_nothing_is_named(no_file):
    put(Path(training.DEFAULT_PATH), DOCUMENT)
    assert dataloader.load().path == training.DEFAULT_PATH
    assert dataloader.settings(cuda=True)["num_workers"] == 1


def test_an_argument_wins_over_the_environment(tmp_path, no_file, monkeypatch):
    monkeypatch.setenv(dataloader.ENV_VAR, str(tmp_path / "missing.json"))
    path = put(tmp_path / "dl.json", DOCUMENT)
    assert dataloader.settings(path=path, cuda=True)["num_workers"] == 1
    with pytest.raises(dataloader.SettingsFileError) as caught:
        dataloader.settings()
    assert caught.value.state == "absent"
    assert str(caught.value).startswith(f"{tmp_path / 'missing.json'}: no such file: ")


def test_without_a_file_settings_falls_back(no_file):
    assert dataloader.load() is None
    assert dataloader.settings(cuda=False) == dataloader.fallback(USABLE, 1, False)
    assert dataloader.settings(2, cuda=True) == dataloader.fallback(USABLE, 2, True)
    torch = pytest.importorskip("torch")
    assert dataloader.settings()["pin_memory"] is torch.cuda.is_available()


def test_without_torch_cuda_is_taken_as_absent(no_file, monkeypatch):
    monkeypatch.setitem(sys.modules, "torch", None)  # import torch raises ImportError
    assert dataloader.settings()["pin_memory"] is False


def test_local_world_size_gives_the_ranks(tmp_path, no_file, monkeypatch):
    monkeypatch.setenv("LOCAL_WORLD_SIZE", "4")
    assert dataloader.settings(cuda=False) == dataloader.fallback(USABLE, 4, False)
    assert dataloader.settings(1, cuda=False) == dataloader.fallback(USABLE, 1, False)
    monkeypatch.setenv("LOCAL_WORLD_SIZE", "four")
    with pytest.raises(ValueError, match=r"^LOCAL_WORLD_SIZE='four': expected an integer >= 1"):
        dataloader.settings()
    with pytest.raises(ValueError, match="ranks_per_node: expected an integer >= 1, got 0"):
        dataloader.settings(0)


@pytest.mark.parametrize(
    ("cpus", "ranks", "workers"),
    [(1, 1, 0), (2, 1, 1), (3, 1, 2), (9, 1, 8), (64, 1, 8), (64, 8, 7), (16, 8, 1), (8, 8, 0)],
)
def test_fallback_rule(cpus, ranks, workers):
    kwargs = dataloader.fallback(cpus, ranks, cuda=True)
    if workers:
        assert kwargs == {
            "num_workers": workers,
            "pin_memory": True,
            "prefetch_factor": 2,
            "persistent_workers": True,
        }
    else:
        assert kwargs == {"num_workers": 0, "pin_memory": True}
    assert dataloader.fallback(cpus, ranks, cuda=False)["pin_memory"] is False


@pytest.mark.parametrize(
    ("recorded_workers", "recorded_ranks", "cpus", "ranks", "expected"),
    [
        (6, 2, 32, 2, {"num_workers": 6, "prefetch_factor": 4, "persistent_workers": True}),
        (6, 2, 32, 1, {"num_workers": 12, "prefetch_factor": 4, "persistent_workers": True}),
        (6, 2, 32, 4, {"num_workers": 3, "prefetch_factor": 4, "persistent_workers": True}),
        (6, 2, 32, 5, {"num_workers": 2, "prefetch_factor": 4, "persistent_workers": True}),
        (6, 2, 8, 1, {"num_workers": 8, "prefetch_factor": 4, "persistent_workers": True}),
        (6, 2, 32, 16, {"num_workers": 0}),
        (1, 1, 32, 2, {"num_workers": 0}),
        (0, 1, 32, 1, {"num_workers": 0}),
    ],
)
def test_other_rank_counts_share_the_recorded_worker_budget(
    recorded_workers, recorded_ranks, cpus, ranks, expected
):
    loader = {
        "num_workers": recorded_workers,
        "pin_memory": False,
        "prefetch_factor": 4 if recorded_workers else None,
        "persistent_workers": recorded_workers > 0,
    }
    found = schema.from_document(
        document(
            host={"cpus": cpus}, workload={"ranks_per_node": recorded_ranks}, dataloader=loader
        ),
        "f.json",
    )
    assert found.kwargs_for(ranks) == {"pin_memory": False, **expected}


@pytest.mark.filterwarnings("ignore:This DataLoader will create")
def test_every_kind_of_kwargs_builds_a_dataloader():
    torch = pytest.importorskip("torch")
    data = torch.utils.data.TensorDataset(torch.arange(8))
    cases = [dataloader.fallback(c, r, False) for c in (1, 4) for r in (1, 8)]
    found = schema.from_document(DOCUMENT, "f.json")
    cases += [found.kwargs_for(r) for r in (1, 2, 64)]
    for kwargs in cases:
        loader = torch.utils.data.DataLoader(data, batch_size=4, **kwargs)
        assert loader.num_workers == kwargs["num_workers"]


def test_importing_it_is_light():
    probe = (
        "import json, sys; import hostcheck.dataloader\n"
        "print(json.dumps(sorted(m for m in ('torch', 'jsonschema', 'yaml', 'rich', "
        "'hostcheck.report.writers') if m in sys.modules)))"
    )
    done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True)
    assert json.loads(done.stdout) == [], done.stderr


# ---------------------------------------------------------------- bad files

STALE = "measure again with hostcheck loop --sweep --write {path} (role variable "
STALE += "hostcheck_dataloader_enabled)"
BAD = [
    ("malformed JSON", '{"schema_version": 1,\n  "kind": }', "not valid JSON: Expecting value "
     "at line 2 column 11"),
    ("not an object", "[1, 2]", "expected a JSON object, got an array"),
    ("duplicate key", '{"schema_version": 1, "schema_version": 1}', 'key "schema_version" '
     "appears twice in one object"),
    ("unknown key", document(host={"gpus": 8}), "host.gpus: unknown key"),
    ("unknown top key", document(comment="x"), "comment: unknown key"),
    ("missing key", {k: v for k, v in DOCUMENT.items() if k != "measured"}, "measured: missing"),
    ("missing nested key", without("measured", "tolerance"), "measured.tolerance: missing"),
    ("wrong type", document(dataloader={"num_workers": "4"}),
     'dataloader.num_workers: expected an integer >= 0, got "4"'),
    ("boolean for a number", document(host={"cpus": True}),
     "host.cpus: expected an integer >= 1, got true"),
    ("fraction out of range", document(measured={"data_wait_fraction": 1.5}),
     "measured.data_wait_fraction: expected a number from 0 to 1, got 1.5"),
    ("not finite", json.dumps(document(measured={"samples_per_s": float("nan")})),
     "measured.samples_per_s: expected a number >= 0, got NaN"),
    ("unknown sample", document(workload={"sample": "png"}),
     'workload.sample: expected one of jpeg, busy, sleep, got "png"'),
    ("bad time", document(measured_at="2026-13-01T00:00:00Z"),
     'measured_at: expected a UTC time like 2026-11-25T06:00:00Z, got "2026-13-01T00:00:00Z"'),
    ("no time zone", document(measured_at="2026-11-25T06:00:00"),
     'measured_at: expected a UTC time like 2026-11-25T06:00:00Z, got "2026-11-25T06:00:00"'),
    ("section not an object", document(host=[1]), "host: expected an object, got an array"),
    ("wrong schema_version", document(schema_version=2),
     "schema_version 2 is not supported (this hostcheck reads version 1)"),
    ("no schema_version", {k: v for k, v in DOCUMENT.items() if k != "schema_version"},
     "schema_version: missing"),
    ("wrong kind", document(kind="hostcheck-report"),
     'kind: expected "hostcheck-dataloader-settings", got "hostcheck-report"'),
    ("prefetch_factor without workers",
     document(dataloader={"num_workers": 0, "persistent_workers": False}),
     "dataloader.prefetch_factor: expected null when num_workers is 0, got 2"),
    ("persistent without workers",
     document(dataloader={"num_workers": 0, "prefetch_factor": None}),
     "dataloader.persistent_workers: expected false when num_workers is 0, got true"),
    ("no prefetch_factor with workers", document(dataloader={"prefetch_factor": None}),
     "dataloader.prefetch_factor: expected an integer >= 1 when num_workers is 1, got null"),
]  # fmt: skip


@pytest.mark.parametrize(("content", "problem"), [b[1:] for b in BAD], ids=[b[0] for b in BAD])
def test_a_bad_file_is_one_line_naming_the_file_and_the_problem(tmp_path, content, problem):
    path = put(tmp_path / "dl.json", content)
    with pytest.raises(dataloader.SettingsFileError) as caught:
        dataloader.settings(path=path)
    assert str(caught.value) == f"{path}: {problem}"
    assert "\n" not in str(caught.value)
    assert caught.value.state == "malformed" and caught.value.path == str(path)
    if not isinstance(content, str):  # the published schema refuses it too
        with pytest.raises(jsonschema.ValidationError):
            jsonschema.validate(json.loads(path.read_text()), SCHEMA)


def test_an_unreadable_file_is_malformed(tmp_path):
    with pytest.raises(dataloader.SettingsFileError) as caught:
        dataloader.load(tmp_path)
    assert str(caught.value) == f"{tmp_path}: cannot read: Is a directory"
    assert caught.value.state == "malformed"
    put(tmp_path / "bin.json", "")
    (tmp_path / "bin.json").write_bytes(b"\xff\xfe{}")
    with pytest.raises(dataloader.SettingsFileError, match="not valid JSON: not UTF-8 text"):
        dataloader.load(tmp_path / "bin.json")


@pytest.mark.parametrize(
    ("changes", "then"),
    [
        ({"host": {"hostname": "gpu-a01"}}, f"gpu-a01 with {CPUS} CPUs"),
        ({"host": {"cpus": CPUS + 6}}, f"{HOSTNAME} with {CPUS + 6} CPUs"),
    ],
)
def test_another_host_or_cpu_count_is_stale(tmp_path, changes, then):
    path = put(tmp_path / "dl.json", document(**changes))
    with pytest.raises(dataloader.SettingsFileError) as caught:
        dataloader.settings(path=path)
    assert str(caught.value) == (
        f"{path}: stale: measured on {then}, this is {HOSTNAME} with {CPUS} CPUs: "
        + STALE.format(path=path)
    )
    assert caught.value.state == "stale"


def test_an_old_file_is_stale_only_with_max_age(tmp_path):
    path = put(tmp_path / "dl.json", document(measured_at="2020-01-01T00:00:00Z"))
    assert dataloader.load(path).age_s() > 5 * 365 * 86400
    assert dataloader.settings(path=path, cuda=True)["num_workers"] == 1
    with pytest.raises(dataloader.SettingsFileError) as caught:
        dataloader.settings(path=path, max_age_s=30 * 86400)
    message = str(caught.value)
    assert message.startswith(f"{path}: stale: measured at 2020-01-01T00:00:00Z, ")
    assert message.endswith(f" ago, more than the 30.0 days allowed: {STALE.format(path=path)}")
    assert caught.value.state == "stale"
    assert dataloader.load(path, max_age_s=100 * 365 * 86400) is not None


def test_staleness_is_judged_for_the_host_given():
    """The rule the hostcheck role asks the venv's hostcheck for: for a host and a time given,
    not only this process's."""
    found = schema.from_document(document(measured_at="2026-01-01T00:00:00Z"), "f.json")
    now = datetime.datetime(2026, 1, 4, tzinfo=datetime.timezone.utc).timestamp()  # 3 days on
    assert freshness.stale_problem(found, HOSTNAME, CPUS, None, now) == ""
    assert freshness.stale_problem(found, HOSTNAME, CPUS, 3 * 86400, now) == ""
    assert freshness.stale_problem(found, "node9", CPUS, None, now) == (
        f"stale: measured on {HOSTNAME} with {CPUS} CPUs, this is node9 with {CPUS} CPUs: "
        + STALE.format(path="f.json")
    )
    assert freshness.stale_problem(found, HOSTNAME, CPUS + 1, None, now).startswith(
        f"stale: measured on {HOSTNAME} with {CPUS} CPUs, this is {HOSTNAME} with {CPUS + 1} "
    )
    assert freshness.stale_problem(found, HOSTNAME, CPUS, 2 * 86400, now) == (
        "stale: measured at 2026-01-01T00:00:00Z, 3.0 days ago, more than the 2.0 days "
        f"allowed: {STALE.format(path='f.json')}"
    )


def test_the_published_schema_and_the_validation_agree():
    jsonschema.Draft202012Validator.check_schema(SCHEMA)
    jsonschema.validate(DOCUMENT, SCHEMA)
    properties = SCHEMA["properties"]
    assert list(properties) == list(schema.KEYS) == SCHEMA["required"]
    for name, (cls, rules) in schema.SECTIONS.items():
        names = list(cls._fields)
        assert list(properties[name]["properties"]) == names == list(rules), name
        assert properties[name]["required"] == names
        for key, rule in properties[name]["properties"].items():
            assert rule.get("description"), f"{name}.{key}"
    for zero in (
        document(
            dataloader={"num_workers": 0, "prefetch_factor": None, "persistent_workers": False}
        ),
        document(workload={"sample": "busy", "sample_cost_us": 2000, "dataset_path": "/data"}),
    ):
        jsonschema.validate(zero, SCHEMA)
        assert schema.from_document(zero, "f.json").to_dict() == zero


# ---------------------------------------------------------------- writing it


def written_file(path: Path, num_workers: int = 1) -> dataloader.SettingsFile:
    recommendation = {
        "num_workers": num_workers,
        "pin_memory": True,
        "prefetcher": False,
        "prefetch_factor": 2,
        "persistent_workers": num_workers > 0,
        "samples_per_s": 100.0,
        "best_samples_per_s": 101,
        "data_wait_fraction": 0.0,
        "shm_bytes": 1024,
    }
    workload = dataloader.Workload("busy", 2000.0, 224, 64, 0.1, 1, None, 2)
    host = writing.this_host(2, 2**30, "cpu")
    return dataloader.record(recommendation, workload, host, 0.05, path=str(path))


def test_write_makes_the_folder_and_a_readable_file(tmp_path):
    path = tmp_path / "etc" / "hostcheck" / "dataloader.json"
    written = dataloader.write(path, written_file(path))
    assert dataloader.load(path) == written
    assert stat.S_IMODE(path.stat().st_mode) == 0o644
    assert os.listdir(path.parent) == ["dataloader.json"]
    assert written.measured.best_samples_per_s == 101.0
    assert written.host == dataloader.Host(HOSTNAME, CPUS, 2, 2**30, "cpu")
    zero = dataloader.write(path, written_file(path, num_workers=0))
    assert zero.dataloader == dataloader.Loader(0, True, None, False)


@pytest.mark.parametrize("failing", ["fsync", "replace"])
@pytest.mark.parametrize("error", [OSError(28, "No space left on device"), KeyboardInterrupt()])
def test_an_interrupted_write_leaves_the_old_file(tmp_path, monkeypatch, failing, error):
    path = tmp_path / "dataloader.json"
    dataloader.write(path, written_file(path, num_workers=1))
    before = path.read_bytes()

    def broken(*args):
        raise error

    monkeypatch.setattr(os, failing, broken)
    with pytest.raises(type(error)):
        dataloader.write(path, written_file(path, num_workers=2))
    monkeypatch.undo()
    assert path.read_bytes() == before
    assert os.listdir(tmp_path) == ["dataloader.json"]


def test_write_refuses_what_load_would_refuse(tmp_path):
    path = tmp_path / "dl.json"
    bad = dataclasses.replace(written_file(path), measured_at="yesterday")
    with pytest.raises(dataloader.SettingsFileError, match="measured_at: expected a UTC time"):
        dataloader.write(path, bad)
    assert not path.exists()


# ---------------------------------------------------------------- the dataloader check


def run_check(tmp_path, sets=(), env=None):
    profile = load_profile("default", profile_schema(), assignments=list(sets))
    system = System(root=tmp_path / "root", env=env or {})
    (result,) = run_checks(profile, RunOptions(), system, only=["dataloader"]).results
    assert list(result.data) == DATA_KEYS
    return result


def test_the_check_runs_after_loop_and_in_the_quick_profile():
    ids = list(CHECKS)
    assert ids.index("dataloader") == ids.index("loop") + 1
    quick = load_profile("quick", profile_schema())
    assert quick.enabled("dataloader") is True
    assert quick.section("dataloader") == {
        "enabled": True,
        "severity": "fail",
        "path": None,
        "max_age_days": None,
    }


def test_the_check_skips_without_a_file(tmp_path):
    result = run_check(tmp_path)
    assert result.status == Status.SKIP
    assert result.summary == (
        "no DataLoader settings file at /etc/hostcheck/dataloader.json (role variable "
        "hostcheck_dataloader_enabled writes one)"
    )
    assert result.data == dict.fromkeys(DATA_KEYS) | {
        "path": "/etc/hostcheck/dataloader.json",
        "state": "absent",
    }


def test_the_check_passes_with_a_valid_file_at_the_default_path(tmp_path):
    put(tmp_path / "root" / "etc" / "hostcheck" / "dataloader.json", DOCUMENT)
    result = run_check(tmp_path)
    assert result.status == Status.PASS
    assert result.summary == (
        "DataLoader(num_workers=1, pin_memory=True, prefetch_factor=2, persistent_workers=True)"
        ", with a prefetcher for 1 rank(s) per node: 400 samples/s, measured "
        "2026-11-25T06:00:00Z"
    )
    (finding,) = result.findings
    assert (finding.name, finding.measured, finding.source) == (
        "num_workers",
        1,
        "/etc/hostcheck/dataloader.json",
    )
    assert result.data == {
        "path": "/etc/hostcheck/dataloader.json",
        "state": "ok",
        "num_workers": 1,
        "pin_memory": True,
        "prefetch_factor": 2,
        "persistent_workers": True,
        "prefetcher": True,
        "ranks_per_node": 1,
        "measured_at": "2026-11-25T06:00:00Z",
        "samples_per_s": 400.25,
    }


def test_the_check_reads_the_environment_and_the_profile_path(tmp_path):
    put(tmp_path / "root" / "site" / "env.json", document(dataloader={"num_workers": 2}))
    put(tmp_path / "root" / "site" / "profile.json", document(dataloader={"num_workers": 3}))
    by_env = run_check(tmp_path, env={dataloader.ENV_VAR: "/site/env.json"})
    assert (by_env.data["path"], by_env.data["num_workers"]) == ("/site/env.json", 2)
    by_profile = run_check(
        tmp_path, ["dataloader.path=/site/profile.json"], {dataloader.ENV_VAR: "/site/env.json"}
    )
    assert (by_profile.data["path"], by_profile.data["num_workers"]) == ("/site/profile.json", 3)


@pytest.mark.parametrize(
    ("content", "state", "problem"),
    [
        ('{"schema_version": 1', "malformed", "not valid JSON: Expecting ',' delimiter"),
        (document(host={"gpus": 1}), "malformed", "host.gpus: unknown key"),
        (document(host={"hostname": "elsewhere"}), "stale", "stale: measured on elsewhere"),
        (document(measured_at="2020-01-01T00:00:00Z"), "stale", "stale: measured at 2020"),
    ],
)
def test_the_check_fails_on_a_bad_or_stale_file(tmp_path, content, state, problem):
    real = put(tmp_path / "root" / "etc" / "hostcheck" / "dataloader.json", content)
    result = run_check(tmp_path, ["dataloader.max_age_days=30"])
    assert result.status == Status.FAIL
    assert result.summary.startswith(f"settings file {real}: {problem}")
    assert "\n" not in result.summary
    assert result.remedy == (
        "measure again on this host: hostcheck loop --sweep --write "
        "/etc/hostcheck/dataloader.json; or set hostcheck_dataloader_enabled: true (role "
        "hostcheck) and run: ansible-playbook site.yml --tags hostcheck"
    )
    assert result.data == dict.fromkeys(DATA_KEYS) | {
        "path": "/etc/hostcheck/dataloader.json",
        "state": state,
    }


def test_the_check_fails_when_a_named_file_is_missing(tmp_path):
    result = run_check(tmp_path, env={dataloader.ENV_VAR: "/site/none.json"})
    assert result.status == Status.FAIL
    assert result.data["state"] == "absent" and result.data["path"] == "/site/none.json"
    assert "no such file: measure again with hostcheck loop --sweep --write" in result.summary


def test_the_check_costs_nothing(tmp_path):
    from hostcheck.checks import dataloader as check

    put(tmp_path / "root" / "etc" / "hostcheck" / "dataloader.json", DOCUMENT)
    ctx = CheckContext(System(root=tmp_path / "root", env={}), {"path": None, "max_age_days": None})
    start = time.perf_counter()
    for _ in range(100):
        assert check.run(ctx).status == Status.PASS
    assert (time.perf_counter() - start) / 100 < 0.005


def test_explain_names_the_file_and_the_role(capsys):
    assert main(["explain", "dataloader"]) == 0
    out = capsys.readouterr().out
    assert "/etc/hostcheck/dataloader.json" in out and "dataloader.max_age_days = null" in out
    assert "Fixed by the role(s): hostcheck" in out
