"""Files that readers never see half-written: a temporary file beside the target, synced, then
renamed over it."""

from __future__ import annotations

import contextlib
import os
import stat


def write_atomic(path: str, text: str) -> None:
    """Readers (node_exporter, audits, training code) see the old file or the new, never a
    part of one. A path that is no regular file (/dev/null, /dev/stdout, a FIFO) is written
    to as it is: renaming over it would replace the device with a file."""
    try:
        special = not stat.S_ISREG(os.stat(path).st_mode)
    except FileNotFoundError:
        special = False
    if special:
        with open(path, "w") as handle:
            handle.write(text)
        return
    directory, name = os.path.split(path)
    # one writer per process at a time; a file left by a killed process of the same pid is
    # only ever a leftover, so truncating it is safe
    tmp = os.path.join(directory, f".{name}.{os.getpid()}.tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_CLOEXEC, 0o644)
    try:
        with os.fdopen(fd, "w") as handle:
            handle.write(text)
            handle.flush()
            os.fsync(handle.fileno())
        os.chmod(tmp, 0o644)
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise
