"""The selection of integration modules by what changed since the last full pass
(tests/selection.py): every tracked path is claimed, a change selects the modules that claim
it, and what every module stands on, or nothing claims, selects them all."""

from __future__ import annotations

import json

import pytest

from tests import costs, selection
from tests.selection import EVERYTHING, GATE_PATHS
from tests.unit.test_ansible_static import READS

MODULES = selection.selectable_modules()
READERS = selection.reading_modules()
TRACKED = selection.tracked_paths()


def test_every_integration_module_declares_what_it_covers():
    assert len(MODULES) >= 20
    undeclared = [module for module, covers in MODULES.items() if not covers]
    assert undeclared == []


@pytest.mark.parametrize("module", sorted(MODULES))
def test_each_pattern_a_module_declares_matches_a_tracked_path(module):
    stale = [p for p in MODULES[module] if not any(selection.matches(t, [p]) for t in TRACKED)]
    assert stale == [], f"{module}: COVERS patterns that match no tracked path"


def test_every_tracked_path_is_claimed_by_a_module_the_gate_or_the_harness():
    assert len(TRACKED) > 500
    unclaimed = [
        path
        for path in TRACKED
        if not selection.matches(path, EVERYTHING + GATE_PATHS)
        and not selection.claimants(path, MODULES)
    ]
    assert unclaimed == [], "claim them in a module's COVERS (or GATE_PATHS, EVERYTHING)"


def test_the_gate_and_harness_patterns_match_tracked_paths():
    for pattern in EVERYTHING + GATE_PATHS:
        assert any(selection.matches(path, [pattern]) for path in TRACKED), pattern


def chosen(*paths: str) -> selection.Selection:
    return selection.select(list(paths), "0" * 40, MODULES, READERS)


def test_docs_and_unit_tests_select_the_gate_alone():
    picked = chosen("docs/development.md", "tests/unit/test_costs.py", "README.md")
    assert picked.everything is None and picked.modules == {}
    assert picked.runs("tests/unit/plugins/action/test_shm_validate.py")
    assert picked.runs("tests/integration/test_collection.py")
    assert picked.runs("tests/integration/test_smoke.py")
    assert not picked.runs("tests/integration/test_os_matrix.py")
    assert not picked.runs("tests/unit/hostcheck/job/test_command_scripts.py")
    assert not picked.runs("tests/unit/hostcheck/loop/test_theory.py")
    assert not picked.runs("tests/unit/hostcheck/job/test_gpu_use.py")


MEASURING = [module for module in MODULES if module.startswith("tests/unit/")]


def test_the_measuring_unit_modules_leave_the_gate_and_run_when_their_code_changes():
    assert sorted(MEASURING) == [
        "tests/unit/hostcheck/job/test_command.py",
        "tests/unit/hostcheck/job/test_command_scripts.py",
        "tests/unit/hostcheck/job/test_compare.py",
        "tests/unit/hostcheck/job/test_gpu_use.py",
        "tests/unit/hostcheck/job/test_host_use.py",
        "tests/unit/hostcheck/job/test_waits_jobs.py",
        "tests/unit/hostcheck/loop/test_theory.py",
    ]
    picked = chosen("hostcheck/loop/theory.py")
    assert sorted(picked.modules).count("tests/unit/hostcheck/loop/test_theory.py") == 1
    assert "tests/unit/hostcheck/job/test_command_scripts.py" in picked.modules
    assert picked.runs("tests/unit/hostcheck/checks/test_loop.py")  # the gate still runs
    assert not chosen("roles/shm/tasks/size.yml").runs("tests/unit/hostcheck/loop/test_theory.py")
    itself = chosen("tests/unit/hostcheck/job/test_waits_jobs.py")
    assert list(itself.modules) == ["tests/unit/hostcheck/job/test_waits_jobs.py"]
    assert "less 8 unit modules, run when chosen" in itself.explain()


def test_the_lint_runs_when_the_ansible_content_changes_and_claims_nothing():
    lint = "tests/unit/test_ansible_static.py"
    assert selection.reading_modules() == {lint: READS}
    picked = chosen("roles/shm/tasks/size.yml")
    assert picked.runs(lint) and picked.modules[lint] == ["roles/shm/tasks/size.yml"]
    assert chosen("playbooks/audit.yml").runs(lint)
    assert chosen(lint).modules == {lint: [lint]}
    assert not chosen("docs/roles.md").runs(lint)
    assert not chosen("hostcheck/checks/shm.py").runs(lint)
    # the lint reads every role: a path no other module claims still selects everything
    assert chosen("roles/new_role/files/probe.py").everything is not None


def test_covers_built_of_a_shared_tuple_is_read_from_its_source():
    from tests.paths import CHECKOUT
    from tests.support.job_runs import JOB_RUN_COVERS

    gpu_use = CHECKOUT / "tests/unit/hostcheck/job/test_gpu_use.py"
    assert selection.declared_covers(gpu_use) == (
        *JOB_RUN_COVERS,
        "tests/support/fake_libnvml.py",
        "tests/sandbox/fake_nvml.c",
    )
    assert MODULES["tests/unit/hostcheck/job/test_host_use.py"] == JOB_RUN_COVERS


def test_covers_naming_what_its_module_does_not_have_is_an_error(tmp_path):
    module = tmp_path / "test_x.py"
    module.write_text("from tests.support.job_runs import NOTHING\nCOVERS = (*NOTHING,)\n")
    with pytest.raises(ValueError, match=r"tests\.support\.job_runs assigns no NOTHING"):
        selection.declared_covers(module)


def test_a_role_task_selects_the_modules_of_that_role_not_the_matrix():
    picked = chosen("roles/shm/tasks/size.yml")
    assert picked.everything is None
    assert "tests/integration/test_role_shm.py" in picked.modules
    assert not picked.runs("tests/integration/test_os_matrix.py")
    assert not picked.runs("tests/integration/test_role_ulimits.py")


@pytest.mark.parametrize(
    ("planted", "catcher"),
    [
        # an Ubuntu package name in a RedHat vars file
        ("roles/nvidia_driver/vars/RedHat.yml", "tests/integration/test_role_nvidia_driver_os.py"),
        ("roles/nvidia_driver/vars/RedHat.yml", "tests/integration/test_os_matrix.py"),
        # a misspelt section in the systemd drop-in: its text, and the task writing it
        ("plugins/plugin_utils/ulimits_rules.py", "tests/integration/test_role_ulimits.py"),
        ("roles/ulimits/tasks/systemd.yml", "tests/integration/test_role_ulimits.py"),
        # the Slurm health check resuming any drain
        ("hostcheck/health/slurm.py", "tests/integration/test_slurm_healthcheck.py"),
        # an alert rule matching error instead of fail
        ("monitoring/prometheus/hostcheck-rules.yml", "tests/integration/test_monitoring.py"),
    ],
)
def test_a_planted_defect_selects_the_module_that_catches_it(planted, catcher):
    assert planted in TRACKED
    assert catcher in chosen(planted).modules


@pytest.mark.parametrize(
    "path", ["tests/sandbox/fleet.py", "Makefile", "plugins/plugin_utils/role_action.py"]
)
def test_the_harness_selects_everything(path):
    picked = chosen("docs/index.md", path)
    assert picked.everything == f"{path} changed (every module stands on it)"
    assert picked.runs("tests/integration/test_os_matrix.py")


def test_a_path_no_module_claims_selects_everything():
    picked = chosen("roles/new_role/files/probe.py")
    assert picked.everything == "roles/new_role/files/probe.py changed and no test module claims it"


def test_without_a_recorded_full_pass_everything_runs():
    picked = selection.select(["docs/index.md"], None, MODULES)
    assert picked.everything.startswith("no full pass is recorded")
    assert "every test module" in picked.explain()


def test_the_recorded_full_pass_is_a_commit_of_this_repository():
    record = json.loads(selection.RECORD.read_text())
    assert set(record) >= {"commit", "date", "wall_s", "pace_s", "tests"}
    assert selection.recorded_base() == record["commit"], "not a commit of this clone"


def ledger(tmp_path, selected="all", exitstatus=0, dirty=False, commit=None):
    commit = commit or selection.head_state()["commit"]
    path = tmp_path / "run-20261128-040000.jsonl"
    costs.write_line(path, {"run": path.stem, "start": 100.0, "pace_s": 0.15,
                            "selection": selected, "commit": commit, "dirty": dirty})  # fmt: skip
    module = {"module": "m", "worker": "gw0", "start": 101, "wall_s": 60, "cpu_s": 90}
    costs.write_line(path, {**module, "outcomes": {"passed": 7}, "cpu_source": "cgroup"})
    costs.write_line(path, {"exitstatus": exitstatus, "start": 100.0, "end": 1900.0})
    return path


@pytest.mark.parametrize(
    ("facts", "refusal"),
    [
        ({"selected": "changed"}, "it did not run every module"),
        ({"exitstatus": 1}, "it did not finish with every test passed"),
        ({"dirty": True}, "with changes, or not at HEAD"),
        ({"commit": "1" * 40}, "with changes, or not at HEAD"),
    ],
)
def test_only_a_passing_full_run_at_a_clean_head_is_recorded(tmp_path, monkeypatch, facts, refusal):
    monkeypatch.setattr(selection, "RECORD", tmp_path / "full_pass.json")
    with pytest.raises(SystemExit) as refused:
        selection.record(ledger(tmp_path, **facts))
    assert refusal in str(refused.value)
    assert not (tmp_path / "full_pass.json").exists()


def test_a_passing_full_run_is_recorded_with_its_time_and_pace(tmp_path, monkeypatch):
    monkeypatch.setattr(selection, "RECORD", tmp_path / "full_pass.json")
    monkeypatch.setattr(selection, "head_state", lambda: {"commit": "a" * 40, "dirty": False})
    entry = selection.record(ledger(tmp_path, commit="a" * 40))
    assert entry == {"commit": "a" * 40, "date": "20261128-040000", "wall_s": 1800,
                     "pace_s": 0.15, "tests": 7, "modules": 1,
                     "module_wall_s": {"m": 60}}  # fmt: skip
    assert json.loads((tmp_path / "full_pass.json").read_text()) == entry


def test_the_longest_modules_start_first_one_fewer_than_the_workers_the_rest_in_order():
    walls = {"tests/b.py": 30, "tests/c.py": 400, "tests/a.py": 90, "tests/d.py": 200}
    modules = ["tests/a.py", "tests/new.py", "tests/b.py", "tests/c.py", "tests/d.py"]
    assert selection.longest_first(modules, walls, 2) == [
        "tests/c.py", "tests/d.py", "tests/a.py", "tests/new.py", "tests/b.py"
    ]  # fmt: skip
    assert selection.longest_first(modules, {}, 2) == modules
    # a selection without the longest: the longest of those selected
    assert selection.longest_first(["tests/a.py", "tests/b.py"], walls, 1) == [
        "tests/a.py", "tests/b.py"
    ]  # fmt: skip
    assert selection.longest_first(["tests/b.py", "tests/a.py"], walls, 1)[0] == "tests/a.py"


def test_make_tests_selection_starts_longest_first_and_the_full_suite_one_fewer_than_workers():
    walls = {"tests/b.py": 30, "tests/c.py": 400, "tests/a.py": 90, "tests/d.py": 200}
    modules = ["tests/a.py", "tests/new.py", "tests/b.py", "tests/c.py", "tests/d.py"]
    assert selection.start_order(modules, walls, 3, changed=True) == [
        "tests/c.py", "tests/d.py", "tests/a.py", "tests/b.py", "tests/new.py"
    ]  # fmt: skip
    assert selection.start_order(modules, walls, 3, changed=False) == [
        "tests/c.py", "tests/d.py", "tests/a.py", "tests/new.py", "tests/b.py"
    ]  # fmt: skip
    assert selection.start_order(modules, walls, 1, changed=False)[:2] == [
        "tests/c.py", "tests/a.py"
    ]  # fmt: skip


def test_the_recorded_walls_are_read_and_a_record_without_them_orders_nothing(
    tmp_path, monkeypatch
):
    monkeypatch.setattr(selection, "RECORD", tmp_path / "full_pass.json")
    assert selection.recorded_module_walls() == {}
    (tmp_path / "full_pass.json").write_text(json.dumps({"commit": "a" * 40}))
    assert selection.recorded_module_walls() == {}
    (tmp_path / "full_pass.json").write_text(json.dumps({"module_wall_s": {"tests/x.py": 5}}))
    assert selection.recorded_module_walls() == {"tests/x.py": 5}


def test_the_workers_are_counted_alike_in_the_controller_and_in_each_worker():
    from types import SimpleNamespace

    from tests.conftest import _workers

    controller = SimpleNamespace(option=SimpleNamespace(numprocesses=3))
    worker = SimpleNamespace(
        option=SimpleNamespace(numprocesses=None), workerinput={"workercount": 3}
    )
    alone = SimpleNamespace(option=SimpleNamespace())
    assert (_workers(controller), _workers(worker), _workers(alone)) == (3, 3, 1)
