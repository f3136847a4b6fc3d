"""The inotify budget of sandbox fleets: the limit raised to hold the running hosts and the new
ones at their peak, never lowered, and a clear failure where it cannot be raised."""

from __future__ import annotations

import os

import pytest

from tests.sandbox import budget


class Sysctl:
    """fs.inotify.max_user_instances, writable or not."""

    def __init__(self, value: int, writable: bool = True) -> None:
        self.value, self.writable, self.writes = value, writable, []

    def read_text(self) -> str:
        return f"{self.value}\n"

    def write_text(self, text: str) -> None:
        if not self.writable:
            raise PermissionError(13, "Permission denied")
        self.writes.append(text)
        self.value = int(text)


@pytest.fixture
def sysctl(monkeypatch, tmp_path):
    monkeypatch.setattr(budget, "LOCK", tmp_path / "boot.lock")

    def make(value: int, writable: bool = True) -> Sysctl:
        fake = Sysctl(value, writable)
        monkeypatch.setattr(budget, "INSTANCES", fake)
        return fake

    return make


def test_a_limit_too_low_for_the_hosts_is_raised_to_the_next_power_of_two(sysctl):
    fake, said = sysctl(128), []
    with budget.booking(lambda: 9, 19, log=said.append):
        pass
    needed = (9 + 19) * budget.HOST_PEAK + budget.RESERVE
    assert needed > 128
    assert fake.value == 256 >= needed
    assert said == ["raised fs.inotify.max_user_instances from 128 to 256 for the sandbox hosts"]


def test_a_limit_with_room_is_left_alone_never_lowered(sysctl):
    fake = sysctl(8192)
    with budget.booking(lambda: 3, 3, log=pytest.fail):
        pass
    assert fake.value == 8192 and fake.writes == []


def test_where_the_limit_cannot_be_raised_the_boot_waits_for_other_fleets(sysctl):
    fake = sysctl(128, writable=False)
    running = iter([20, 20, 0])  # another worker's fleet goes down during the wait
    with budget.booking(lambda: next(running), 3, log=pytest.fail, wait_s=30):
        pass
    assert fake.value == 128


def test_where_it_cannot_be_raised_and_no_fleet_goes_down_the_boot_fails_naming_the_sysctl(
    sysctl,
):
    sysctl(128, writable=False)
    with pytest.raises(budget.BudgetError) as raised, budget.booking(lambda: 20, 19, wait_s=0):
        pytest.fail("the fleet booted beyond the limit")
    message = str(raised.value)
    assert "fs.inotify.max_user_instances is 128" in message
    assert "with the 20 hosts already running" in message
    assert "sysctl fs.inotify.max_user_instances=512" in message  # (20+19)*8+32 = 344


def test_the_instances_a_process_holds_are_counted():
    import ctypes

    before = budget.instances_of(os.getpid())
    descriptor = ctypes.CDLL(None, use_errno=True).inotify_init()
    assert descriptor >= 0
    try:
        assert budget.instances_of(os.getpid()) == before + 1
        assert budget.inotify_instances(os.getpid()) >= before + 1
    finally:
        os.close(descriptor)
    assert budget.instances_of(os.getpid()) == before
