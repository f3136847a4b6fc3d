"""Ctrl-C that is not lost. Python drops a KeyboardInterrupt raised inside a finalizer (a
DataLoader iterator's __del__ shutting its workers down, say) with an "Exception ignored"
line, and the loop would then run to its end; so the SIGINT handler also remembers the
signal, and the loop raises it again at its next step."""

from __future__ import annotations

import signal
import threading

_received = threading.Event()


def _on_sigint(signum, frame) -> None:
    _received.set()
    raise KeyboardInterrupt


def install() -> None:
    if threading.current_thread() is threading.main_thread():
        signal.signal(signal.SIGINT, _on_sigint)


def raise_if_received() -> None:
    """KeyboardInterrupt if a SIGINT came, also one that a finalizer swallowed."""
    if _received.is_set():
        raise KeyboardInterrupt
