import pytest

from hostcheck.checks.base import CheckSpec, RunOptions
from hostcheck.config import Profile
from hostcheck.model import CheckResult, Finding, Status
from hostcheck.runner import run_checks
from hostcheck.system import System


def spec(check_id, status=None, raises=None):
    def run(ctx):
        if raises:
            raise raises
        return CheckResult.from_findings(check_id, [Finding("x", status, 1, 2, remedy="fix x")])

    return CheckSpec(check_id, check_id, "", run, {})


def outcome(*specs, sections=None, fail_on=Status.FAIL):
    sections = sections or {}
    profile = Profile("t", {"checks": {s.id: sections.get(s.id, {}) for s in specs}})
    result = run_checks(profile, RunOptions(), System(), checks={s.id: s for s in specs})
    return result, result.exit_code(fail_on)


def test_all_pass_exits_zero():
    result, code = outcome(spec("a", Status.PASS), spec("b", Status.PASS))
    assert code == 0 and result.verdict() == Status.PASS
    assert result.counts["pass"] == 2


def test_fail_exits_one_even_next_to_an_error():
    result, code = outcome(spec("a", Status.FAIL), spec("b", raises=RuntimeError("boom")))
    assert code == 1
    assert result.verdict() == Status.ERROR
    broken = result.results[1]
    assert broken.status == Status.ERROR and "RuntimeError: boom" in broken.summary


def test_error_alone_exits_two():
    _, code = outcome(spec("a", Status.PASS), spec("b", raises=KeyError("k")))
    assert code == 2


@pytest.mark.parametrize(("fail_on", "code"), [(Status.FAIL, 0), (Status.WARN, 1)])
def test_warnings_fail_only_when_asked(fail_on, code):
    assert outcome(spec("a", Status.WARN), fail_on=fail_on)[1] == code


def test_severity_warn_softens_failures():
    result, code = outcome(spec("a", Status.FAIL), sections={"a": {"severity": "warn"}})
    assert result.results[0].status == Status.WARN
    assert result.results[0].findings[0].status == Status.WARN
    assert code == 0


def test_disabled_check_is_skipped_and_not_run():
    result, code = outcome(
        spec("a", raises=AssertionError("ran")), sections={"a": {"enabled": False}}
    )
    assert result.results[0].status == Status.SKIP
    assert "disabled" in result.results[0].summary
    assert code == 0


def test_remedy_and_summary_come_from_bad_findings():
    findings = [
        Finding("size", Status.FAIL, 64, 128, display="64 B", remedy="set shm_size"),
        Finding("free", Status.PASS, 60, 1, display="60 B"),
    ]
    result = CheckResult.from_findings("shm", findings)
    assert result.status == Status.FAIL
    assert result.summary == "size 64 B"
    assert result.expected == "size 128"
    assert result.remedy == "set shm_size"
