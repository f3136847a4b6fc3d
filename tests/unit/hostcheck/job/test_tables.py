"""The console's tables of `hostcheck job` (hostcheck/job/tables.py): what each row says, and
the rank column only for a job that ran ranks."""

from __future__ import annotations

from rich.console import Console

from hostcheck.job import tables
from hostcheck.job.waits import Rules


def _loader(created_at: str, workers: int, waits: dict | None) -> dict:
    return {
        "created_at": created_at,
        "settings": {
            "num_workers": workers,
            "pin_memory": True,
            "prefetch_factor": None if workers == 0 else 4,
            "persistent_workers": False,
            "batch_size": 64,
        },
        "batches": 120,
        "samples_per_s": 812.4,
        "data_wait_fraction": 0.256,
        "startup_s": 1.5,
        "worker_cpu_cores": 3.25,
        "worker_reads": {"bytes_per_s": 3 * 2**20},
        "waits": waits,
    }


WAITS = {
    "batches": 119,
    "median_s": 0.004,
    "p95_s": 0.012,
    "worst_s": 0.9,
    "stall_count": 2,
    "stalls": [
        {"wait_s": 0.3, "at_s": 10.0, "iteration": 1, "batch": 3},
        {"wait_s": 0.9, "at_s": 42.25, "iteration": 2, "batch": 17},
    ],
}


def _text(table) -> list[str]:
    console = Console(record=True, width=400)
    console.print(table)
    return [line.rstrip() for line in console.export_text().splitlines() if line.strip()]


def _row(lines: list[str], first: str) -> list[str]:
    (line,) = [line for line in lines if line.split()[:1] == [first]]
    return line.split()


def test_the_loaders_table_has_each_loaders_settings_and_what_it_delivered():
    section = {"ranks": [{"rank": None, "loaders": [_loader("train.py:9", 4, WAITS)]}]}
    lines = _text(tables.loaders_table(section))
    assert lines[0].strip() == "DataLoaders the job iterated"
    assert lines[1].split() == list(tables.LOADER_COLUMNS)
    assert _row(lines, "train.py:9") == [
        *("train.py:9", "4", "on", "4", "off", "64", "120", "812", "25.6%", "1.50", "3.2"),
        *("3.0", "MiB"),
    ]
    assert "w: num_workers; pf: prefetch_factor" in " ".join(lines)


def test_a_job_of_ranks_gets_a_rank_column_and_each_rank_its_rows():
    section = {
        "ranks": [
            {"rank": 0, "loaders": [_loader("train.py:9", 0, None)]},
            {"rank": 1, "loaders": [_loader("train.py:9", 2, WAITS)]},
        ]
    }
    lines = _text(tables.loaders_table(section))
    assert lines[1].split()[:2] == ["rank", "loader"]
    assert [line.split()[:3] for line in lines if "train.py:9" in line] == [
        ["0", "train.py:9", "0"],
        ["1", "train.py:9", "2"],
    ]


def test_the_wait_table_leaves_out_loaders_without_steady_batches_and_names_the_worst_stall():
    section = {
        "ranks": [
            {
                "rank": None,
                "loaders": [_loader("warmup.py:3", 0, None), _loader("train.py:9", 4, WAITS)],
            }
        ]
    }
    lines = _text(tables.wait_table(section, Rules(stall_factor=5.0, stall_min_wait_s=0.05)))
    assert lines[0].strip() == "Data-wait per batch"
    assert not [line for line in lines if "warmup.py:3" in line]
    assert " ".join(_row(lines, "train.py:9")) == (
        "train.py:9 119 4.0ms 12ms 900ms 2 900ms at 42.2 s, iteration 2 batch 17"
    )
    assert "stalls: waits above 5 x the loader's median and above 50ms" in " ".join(lines)
