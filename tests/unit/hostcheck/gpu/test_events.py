"""The kernel log read since the last position: each event counted once per boot, through
rotation, truncation, a reboot and an unwritable state file. The log here is a file in
/dev/kmsg's record format; the last test reads this machine's own /dev/kmsg."""

import json
import os
from pathlib import Path

import pytest

from hostcheck.gpu import events
from hostcheck.system import System

LOG = "/var/log/kmsg-copy"
STATE = "/var/lib/hostcheck/gpu-events.json"
XID_79 = "NVRM: Xid (PCI:0000:1a:00): 79, pid=2001, name=python, GPU has fallen off the bus."
XID_13 = "NVRM: Xid (PCI:0000:18:00): 13, pid=2002, Graphics Exception"


class Log:
    def __init__(self, root: Path):
        self.root = root
        self.path = root / LOG.lstrip("/")
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self.seq = 100
        self.boot("boot-1")

    def boot(self, boot_id: str) -> None:
        target = self.root / events.BOOT_ID.lstrip("/")
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(boot_id + "\n")

    def add(self, *messages: str) -> None:
        with open(self.path, "a") as handle:
            for message in messages:
                self.seq += 1
                handle.write(f"3,{self.seq},{self.seq * 1000},-;{message}\n")
                handle.write(" SUBSYSTEM=pci\n DEVICE=+pci:0000:1a:00.0\n")

    def read(self, state: str | None = STATE) -> events.Read:
        return events.read_since_boot(System(root=self.root), LOG, state)


@pytest.fixture
def log(tmp_path):
    return Log(tmp_path)


def counts(read: events.Read) -> dict[str, int]:
    return {key: event["count"] for key, event in read.events.items()}


def test_an_event_counts_once_however_often_it_is_read(log):
    log.add("usb 1-1: new device", XID_79, XID_13)
    first = log.read()
    assert counts(first) == {"xid:79:0000:1a:00.0": 1, "xid:13:0000:18:00.0": 1}
    assert (first.new, first.kept) == (2, True)
    again = log.read()
    assert counts(again) == counts(first)
    assert again.new == 0
    assert again.events["xid:79:0000:1a:00.0"]["last_text"].endswith("fallen off the bus.")


def test_new_events_add_to_the_counts_kept(log):
    log.add(XID_79)
    log.read()
    log.add(XID_79, XID_79)
    read = log.read()
    assert counts(read) == {"xid:79:0000:1a:00.0": 3}
    assert read.new == 2


def test_an_event_still_counts_after_the_log_lost_it(log):
    """The kernel's ring buffer overwrites old records: what was counted stays counted."""
    log.add(XID_79)
    log.read()
    os.unlink(log.path)
    log.add("something else entirely")  # a new file: another inode
    read = log.read()
    assert counts(read) == {"xid:79:0000:1a:00.0": 1}
    assert any("replaced" in note for note in read.notes)


def test_a_rotated_log_is_read_from_its_start(log):
    log.add(XID_13)
    log.read()
    os.rename(log.path, f"{log.path}.1")
    log.add(XID_79)
    read = log.read()
    assert counts(read) == {"xid:13:0000:18:00.0": 1, "xid:79:0000:1a:00.0": 1}


def test_a_truncated_log_is_read_from_its_start(log):
    log.add("line one", "line two", XID_13)
    log.read()
    with open(log.path, "w") as handle:  # same inode, shorter
        handle.write(f"3,900,1,-;{XID_79}\n")
    read = log.read()
    assert counts(read) == {"xid:13:0000:18:00.0": 1, "xid:79:0000:1a:00.0": 1}
    assert any("read from its start" in note for note in read.notes)


def test_a_reboot_starts_the_counts_anew(log):
    log.add(XID_79)
    log.read()
    log.boot("boot-2")
    read = log.read()  # the same records, read in another boot: this boot's records now
    assert counts(read) == {"xid:79:0000:1a:00.0": 1}
    saved = json.loads((log.root / STATE.lstrip("/")).read_text())
    assert saved["boot_id"] == "boot-2"


def test_records_already_counted_are_not_counted_again_by_seq(log):
    """A copy of /dev/kmsg made anew after the ring buffer dropped its oldest records: shorter
    than where the last read ended, so read from its start, and records up to the last seq
    counted are skipped."""
    log.add(*[f"filler {i}" for i in range(20)], XID_79)
    log.read()
    last = log.seq
    log.path.write_text(f"3,{last},1,-;{XID_79}\n3,{last + 1},2,-;{XID_79}\n")
    read = log.read()
    assert counts(read) == {"xid:79:0000:1a:00.0": 2}


def test_a_line_being_written_waits_for_its_end(log):
    log.add(XID_13)
    with open(log.path, "a") as handle:
        handle.write(f"3,999,1,-;{XID_79[:30]}")
    read = log.read()
    assert counts(read) == {"xid:13:0000:18:00.0": 1}
    with open(log.path, "a") as handle:
        handle.write(XID_79[30:] + "\n")
    assert counts(log.read()) == {"xid:13:0000:18:00.0": 1, "xid:79:0000:1a:00.0": 1}


def test_without_a_writable_state_the_counts_are_of_the_log_as_it_is(log):
    (log.root / "var/lib/hostcheck").mkdir(parents=True)
    (log.root / "var/lib/hostcheck/gpu-events.json").mkdir()  # cannot be replaced by a file
    log.add(XID_79)
    first = log.read()
    second = log.read()
    assert counts(first) == counts(second) == {"xid:79:0000:1a:00.0": 1}
    assert not first.kept
    assert first.notes


def test_no_state_path_counts_the_log_each_time(log):
    log.add(XID_79)
    first, second = log.read(state=None), log.read(state=None)
    assert counts(first) == counts(second) == {"xid:79:0000:1a:00.0": 1}
    assert not (log.root / STATE.lstrip("/")).exists()


def test_an_unreadable_log_is_a_problem_not_an_exception(tmp_path):
    read = events.read_since_boot(System(root=tmp_path), "/dev/kmsg", STATE)
    assert read.problem.startswith("cannot read /dev/kmsg: ")
    assert read.events == {}


def test_a_state_of_another_log_counts_anew(log):
    log.add(XID_79)
    log.read()
    other = events.read_since_boot(System(root=log.root), "/var/log/other", STATE)
    assert other.problem  # absent
    (log.root / "var/log/other").write_text(f"3,1,1,-;{XID_13}\n")
    read = events.read_since_boot(System(root=log.root), "/var/log/other", STATE)
    assert counts(read) == {"xid:13:0000:18:00.0": 1}
    assert any("changed from" in note for note in read.notes)


def test_ten_megabytes_of_log_are_read_for_the_one_event_in_them(log):
    """What it costs is measured by benchmarks/gpu_events_read.py, not asserted here."""
    filler = "".join(
        f"6,{i},{i},-;eth0: link up, 100Gbps, full duplex, flow control rx/tx number {i}\n"
        for i in range(1, 120_000)
    )
    log.path.write_text(filler + f"3,200000,1,-;{XID_79}\n")
    assert log.path.stat().st_size > 10_000_000
    read = log.read()
    assert counts(read) == {"xid:79:0000:1a:00.0": 1}
    assert json.loads((log.root / STATE.lstrip("/")).read_text())["position"]["offset"] == (
        log.path.stat().st_size
    )


@pytest.mark.skipif(
    not os.access("/dev/kmsg", os.R_OK), reason="/dev/kmsg is root's (kernel.dmesg_restrict)"
)
def test_this_machines_kmsg_is_read_record_by_record_with_rising_seqs():
    records, _ = events._device_records(Path("/dev/kmsg"))
    assert records, "the kernel log of a running machine is never empty"
    seqs = [int(r.split(b";", 1)[0].split(b",")[1]) for r in records]
    assert seqs == sorted(seqs) and len(set(seqs)) == len(seqs)
    _, highest = events._messages_after_seq(records, -1)
    assert highest == seqs[-1]
    assert events._messages_after_seq(records, highest) == ([], highest)
