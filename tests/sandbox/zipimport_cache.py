"""Installed on every sandbox host (tests/sandbox/fleet.py), loaded at the start of the system
Python by a .pth file: remembers what zipimport compiled, by the source's hash, in /run.

Ansible sends each module with its module_utils in a zip that the host's Python imports with
zipimport, which never caches bytecode: every task compiled ansible.module_utils.basic and
its imports again (a trivial task: 0.346 s of the host's CPU, 0.250 s with this cache;
benchmarks/sandbox_task_cost.py). The code run is the same; only the compiling is done once
per host and Python. The file names in tracebacks stay those of the zip the module came in.
Standard library only.
"""

from __future__ import annotations

import hashlib
import marshal
import os
import sys
import types
import zipimport

FOLDER = "/run/sandbox-zipimport"
_compile_source = zipimport._compile_source


def _renamed(code: types.CodeType, filename: str) -> types.CodeType:
    consts = tuple(
        _renamed(const, filename) if isinstance(const, types.CodeType) else const
        for const in code.co_consts
    )
    return code.replace(co_filename=filename, co_consts=consts)


def compile_once(pathname: str, source: bytes) -> types.CodeType:
    digest = hashlib.sha256(source).hexdigest()
    path = f"{FOLDER}/{digest}.{sys.implementation.cache_tag}.opt{sys.flags.optimize}"
    try:
        with open(path, "rb") as kept:
            return _renamed(marshal.load(kept), pathname)
    except (OSError, EOFError, ValueError, TypeError):
        pass
    code = _compile_source(pathname, source)
    try:
        os.makedirs(FOLDER, mode=0o700, exist_ok=True)
        partial = f"{path}.{os.getpid()}"
        with open(partial, "wb") as out:
            marshal.dump(code, out)
        os.replace(partial, path)
    except OSError:
        pass
    return code


zipimport._compile_source = compile_once
