"""A Ctrl-C that arrives while a finalizer runs (a DataLoader iterator's __del__ stopping its
workers) is dropped by Python; hostcheck remembers it and raises it at the loop's next step."""

from __future__ import annotations

import gc
import os
import signal
import sys
import time

import pytest

from hostcheck import interrupt


class InterruptedWhileFinalized:
    def __del__(self) -> None:
        os.kill(os.getpid(), signal.SIGINT)
        time.sleep(0.05)  # the handler runs here, inside __del__, and its exception is dropped


def test_a_sigint_swallowed_by_a_finalizer_is_raised_at_the_next_step(monkeypatch):
    dropped = []
    monkeypatch.setattr(sys, "unraisablehook", lambda unraisable: dropped.append(unraisable))
    before = signal.getsignal(signal.SIGINT)
    try:
        interrupt.install()
        InterruptedWhileFinalized()  # no reference kept: __del__ runs at once
        gc.collect()
        assert [u.exc_type for u in dropped] == [KeyboardInterrupt]  # what Python did with it
        with pytest.raises(KeyboardInterrupt):
            interrupt.raise_if_received()
    finally:
        interrupt._received.clear()
        signal.signal(signal.SIGINT, before)


def test_nothing_is_raised_without_a_sigint():
    interrupt.raise_if_received()
