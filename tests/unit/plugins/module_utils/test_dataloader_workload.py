"""One rule for the DataLoader sweep's workload left at 0 (plugins/module_utils/
dataloader_workload.py): hostcheck loop --sweep resolves the ranks and the most workers as the
hostcheck role plans them, so the file it writes records what the role then compares."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
from ansible_collections.hostcheck.gpu_hosts.plugins.plugin_utils import hostcheck_rules
from hostcheck._shared import dataloader_workload as shared

from hostcheck.checks import loop as loop_check
from tests.support.role_dataloader import HOST, VARIABLES


@pytest.mark.parametrize(
    ("given", "gpus", "ranks"), [(0, 0, 1), (None, 0, 1), (0, 8, 8), (2, 8, 2), (3, 0, 3)]
)
def test_ranks_are_one_per_nvidia_gpu_unless_given(given, gpus, ranks):
    assert shared.ranks_per_node(given, gpus) == ranks


@pytest.mark.parametrize(
    ("cores", "ranks", "workers"), [(64, 8, 8), (4, 1, 4), (4, 8, 1), (1, 1, 1), (7, 2, 3)]
)
def test_the_sweeps_workers_share_the_physical_cores_at_least_one(cores, ranks, workers):
    assert shared.sweep_max_workers(cores, ranks) == workers


def test_the_role_and_hostcheck_use_the_one_file():
    def file_of(function) -> Path:
        return Path(sys.modules[function.__module__].__file__).resolve()

    assert file_of(hostcheck_rules.ranks_per_node) == Path(shared.__file__).resolve()
    assert file_of(hostcheck_rules.sweep_max_workers) == Path(shared.__file__).resolve()
    assert file_of(loop_check.ranks_per_node) == Path(shared.__file__).resolve()
    eight = hostcheck_rules.dataloader_workload(
        VARIABLES, {**HOST, "gpus": 8, "physical_cores": 20}
    )
    assert (eight["ranks_per_node"], eight["max_workers"]) == (8, 2)
