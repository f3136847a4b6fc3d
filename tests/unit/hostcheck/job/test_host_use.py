"""`hostcheck job` reports the host as the job met it: open files against each process's own
soft RLIMIT_NOFILE, DataLoader workers against the CPUs the processes may run on (ranks
sharing CPUs counted together), and what the loaders' workers read a second.

Each test runs a real DataLoader job under `python -m hostcheck job`; the job holds what is
to be seen for seconds, so the watcher's 0.25 s samples see it on a loaded machine.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from importlib import resources

import jsonschema
import pytest

pytest.importorskip("torch", reason="hostcheck job's tests run PyTorch jobs")

from hostcheck.job import host_use
from tests.support.job_runs import (
    JOB_RUN_COVERS,
    LOADER,
    checks_by_id,
    hostcheck_job,
    job_argv,
    loaders,
)

# Runs real DataLoader jobs (seconds each): out of the gate, chosen when what they cover
# changes (tests/selection.py)
COVERS = JOB_RUN_COVERS

LIMIT = 256


def finding(document: dict, name: str) -> dict:
    (found,) = [f for f in checks_by_id(document)["job"]["findings"] if f["name"] == name]
    return found


def test_open_files_near_the_limit_are_reported_with_the_remedy(tmp_path):
    """The job lowers its soft limit to 256 and leaks files up to 90 % of it; its worker
    (which inherits them) opens more until "Too many open files" and holds them 2 s. The
    training process is reported near its limit, the worker at it: the check fails and the
    remedy names the role variables and the DataLoader side."""
    code, document, err = hostcheck_job(
        tmp_path,
        f"""
        import resource
        soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
        resource.setrlimit(resource.RLIMIT_NOFILE, ({LIMIT}, hard))
        leaked = []
        while len(os.listdir("/proc/self/fd")) < {int(0.9 * LIMIT)}:
            leaked.append(open(__file__))
        open("own.txt", "w").write(str(len(os.listdir("/proc/self/fd"))))
        class Leaky(Slow):
            def __getitem__(self, i):
                if i == 0:
                    held = []
                    try:
                        while True:
                            held.append(open(__file__))
                    except OSError:
                        time.sleep(2.0)
                    for stream in held:
                        stream.close()
                return super().__getitem__(i)
        loader = DataLoader(Leaky(4 * 15, 0.001), batch_size=4, num_workers=1)
        for x, y in loader:
            time.sleep(0.2)
        """,
    )
    assert code == 1, err  # the job succeeded, a check failed
    (rank,) = document["job"]["ranks"]
    host = rank["host"]
    own = int((tmp_path / "own.txt").read_text())
    assert host["open_files_limit"] == LIMIT and host["workers_open_files_limit"] == LIMIT
    assert own <= host["open_files_peak"] < LIMIT
    assert host["workers_open_files_peak"] == LIMIT
    assert host["workers_open_files_pid"] == loaders(document)[0]["worker_pids"][0]
    found = finding(document, "open files")
    assert (found["status"], found["measured"]) == ("fail", LIMIT)
    assert f"{host['open_files_peak']} of {LIMIT}" in found["display"]
    for words in ("ulimits_nofile_soft", "ulimits_nofile_hard", "num_workers", "file_system"):
        assert words in found["remedy"]
    assert checks_by_id(document)["job"]["status"] == "fail"


def test_a_job_pinned_to_one_cpu_with_4_workers_is_flagged(tmp_path):
    """The job pins itself to one CPU (its workers inherit it) and starts 4 workers: more
    workers than the CPUs it may run on, as PyTorch warns; the remedy names num_workers
    and the CPU allocation."""
    code, document, err = hostcheck_job(
        tmp_path,
        """
        cpu = min(os.sched_getaffinity(0))
        os.sched_setaffinity(0, {cpu})
        open("cpu.txt", "w").write(str(cpu))
        loader = DataLoader(Slow(4 * 12, 0.001), batch_size=4, num_workers=4,
                            persistent_workers=True)
        for x, y in loader:
            time.sleep(0.15)
        """,
        isolated=True,  # its 4 workers share one CPU: busy tests elsewhere must not starve it
    )
    assert code == 0, err  # a warning does not fail the job
    cpu = int((tmp_path / "cpu.txt").read_text())
    (rank,) = document["job"]["ranks"]
    assert rank["host"]["cpu_affinity"] == [cpu]
    assert rank["host"]["workers_at_once"] == 4
    found = finding(document, "CPUs")
    assert (found["status"], found["measured"]) == ("warn", 4)
    assert found["display"] == f"1 ({cpu}) for 4 DataLoader workers at once"
    for words in ("DataLoader(num_workers=1)", "--cpus-per-task", "taskset"):
        assert words in found["remedy"]
    assert checks_by_id(document)["job"]["status"] == "warn"


def test_ranks_sharing_cpus_count_their_workers_together(tmp_path):
    """Two ranks, each with as many workers as the CPUs it may run on (alone, each would
    pass), share the same CPUs: twice as many workers as CPUs, one finding naming both.
    The ranks are started as torchrun does (RANK in their environment) by a launcher that
    does not import torch itself."""
    cpus = sorted(os.sched_getaffinity(0))
    rank = tmp_path / "rank.py"
    rank.write_text(
        LOADER
        + textwrap.dedent(
            f"""
            loader = DataLoader(Slow(4 * 12, 0.001), batch_size=4, num_workers={len(cpus)},
                                persistent_workers=True)
            for x, y in loader:
                time.sleep(0.15)
            """
        )
    )
    launcher = tmp_path / "launch.py"
    launcher.write_text(
        textwrap.dedent(
            f"""
            import os, subprocess, sys
            ranks = [
                subprocess.Popen([sys.executable, {str(rank)!r}],
                                 env={{**os.environ, "RANK": str(r), "WORLD_SIZE": "2"}})
                for r in range(2)
            ]
            sys.exit(max(rank.wait() for rank in ranks))
            """
        )
    )
    report = tmp_path / "report.json"
    completed = subprocess.run(
        [*job_argv(report), "--", sys.executable, str(launcher)],
        capture_output=True,
        text=True,
        timeout=300,
        cwd=tmp_path,
    )
    document = json.loads(report.read_text())
    assert document["job"]["exit_status"] == 0, completed.stderr
    assert [entry["rank"] for entry in document["job"]["ranks"]] == [0, 1]
    for entry in document["job"]["ranks"]:
        assert entry["host"]["cpu_affinity"] == cpus
        assert entry["host"]["workers_at_once"] == len(cpus)
    found = finding(document, "CPUs rank0, rank1")
    assert (found["status"], found["measured"]) == ("warn", 2 * len(cpus))
    assert found["display"] == (
        f"{len(cpus)} ({host_use.cpu_list(cpus)}) shared by {2 * len(cpus)} DataLoader "
        "workers at once"
    )
    assert f"DataLoader(num_workers={len(cpus) // 2})" in found["remedy"]


def test_workers_reading_a_file_report_what_they_read_a_second(tmp_path):
    """Workers read 256 KiB a sample from a file, 16 MiB in all: the report has at least
    that, and not much more (what a worker reads to run: a few hundred KiB), over the
    loader's active time, which the job also measures itself. Workers within the CPUs
    and files far from the limit pass."""
    workers = min(2, len(os.sched_getaffinity(0)))
    chunk, samples = 256 * 1024, 64
    _code, document, err = hostcheck_job(
        tmp_path,
        f"""
        import json
        with open("data.bin", "wb") as stream:
            stream.write(os.urandom(4 * {chunk}))
        class Reading(Slow):
            def __getitem__(self, i):
                with open("data.bin", "rb") as stream:
                    stream.seek((i % 4) * {chunk})
                    assert len(stream.read({chunk})) == {chunk}
                return super().__getitem__(i)
        loader = DataLoader(Reading({samples}, 0.002), batch_size=4, num_workers={workers})
        began = time.time()
        for x, y in loader:
            time.sleep(0.05)
            last = time.time()
        json.dump({{"active_s": last - began}}, open("times.json", "w"))
        """,
    )
    assert document["job"]["exit_status"] == 0, err  # the data-wait depends on the load
    read = chunk * samples
    (loader,) = loaders(document)
    reads = loader["worker_reads"]
    assert read <= reads["bytes"] <= 1.25 * read + workers * 2**20, reads
    active = json.loads((tmp_path / "times.json").read_text())["active_s"]
    assert 0.5 * active <= reads["active_s"] <= 1.5 * active + 0.5, (reads, active)
    assert reads["bytes_per_s"] == pytest.approx(reads["bytes"] / reads["active_s"], rel=0.01)
    assert reads["bytes_per_s"] >= 0.5 * read / (active + 0.5)
    if reads["storage_bytes"] is not None:
        assert 0 <= reads["storage_bytes"] <= reads["bytes"]
    schema = json.loads(resources.files("hostcheck.report").joinpath("report-v1.json").read_text())
    jsonschema.validate(document, schema)
    assert finding(document, "CPUs")["status"] == "pass"
    assert finding(document, "open files")["status"] == "pass"
    assert checks_by_id(document)["job"]["status"] == "pass"


def test_the_data_wait_remedy_points_at_storage_only_for_storage_reads():
    """The hint follows the report's figures: reads mostly from storage name
    dataset_staging, reads from the page cache (or without workers) add nothing."""
    mib = 2**20
    from_storage = {
        "worker_reads": {
            "bytes": 10 * mib,
            "storage_bytes": 9 * mib,
            "storage_bytes_per_s": 3.0 * mib,
        }
    }
    cached = {"worker_reads": {"bytes": 10 * mib, "storage_bytes": 0, "storage_bytes_per_s": 0.0}}
    assert "dataset_staging" in host_use.read_hint(from_storage)
    assert "3.0 MiB/s from storage" in host_use.read_hint(from_storage)
    assert host_use.read_hint(cached) == ""
    assert host_use.read_hint({"worker_reads": None}) == ""
