"""The dataset_stage module's work, also run on the controller by the dataset_staging role's
validation (its measure mode): the options checked, then the mode run. StagingError carries a
one-line message and the result so far."""

from __future__ import annotations

import os

from ansible_collections.hostcheck.gpu_hosts.plugins.module_utils.dataset_copy import Stager
from ansible_collections.hostcheck.gpu_hosts.plugins.module_utils.dataset_files import StagingError
from ansible_collections.hostcheck.gpu_hosts.plugins.module_utils.dataset_manifest import (
    check_algorithm,
    make_manifest,
    measure,
    write_sizes,
)

__all__ = ["MODES", "VERIFY", "StagingError", "stage"]

MODES = ("copy", "plan", "commit", "measure", "manifest", "sizes")
VERIFY = ("changed", "all")
PATH_OPTIONS = ("source", "dest", "manifest", "state_dir", "incoming", "files_from", "sizes")
DEFAULTS = {
    "mode": "copy",
    "source": None,
    "dest": None,
    "manifest": None,
    "state_dir": None,
    "checksum": "sha256",
    "parallel": 4,
    "verify": "changed",
    "verify_written": True,
    "incoming": None,
    "files_from": None,
    "sizes": None,
    "dry_run": False,
}
REQUIRED = {
    "copy": ("source", "dest", "state_dir"),
    "plan": ("manifest", "dest", "state_dir", "files_from"),
    "commit": ("manifest", "incoming", "dest", "state_dir"),
    "measure": ("source",),
    "manifest": ("source", "manifest", "sizes", "state_dir"),
    "sizes": ("source", "manifest", "sizes"),
}


def validate(options: dict) -> dict:
    options = {**DEFAULTS, **{k: v for k, v in options.items() if v is not None}}
    name = options.get("name") or ""
    if not name or "/" in name or "\0" in name or name in (".", ".."):
        raise StagingError(f"name: {name!r} is not usable as a dataset (and file) name")
    if options["mode"] not in MODES:
        raise StagingError(f"mode: {options['mode']!r} is not one of {', '.join(MODES)}")
    if options["dry_run"] and options["mode"] in ("manifest", "sizes"):
        raise StagingError(f"dry_run: mode {options['mode']} cannot run without writing")
    if options["verify"] not in VERIFY:
        raise StagingError(f"verify: {options['verify']!r} is not one of {', '.join(VERIFY)}")
    check_algorithm(options["checksum"])
    if not isinstance(options["parallel"], int) or options["parallel"] < 1:
        raise StagingError(f"parallel: must be 1 or more, got {options['parallel']!r}")
    for key in PATH_OPTIONS:
        value = options[key]
        if value is not None and not os.path.isabs(value):
            raise StagingError(f"{key}: must be an absolute path, got {value!r}")
    missing = [key for key in REQUIRED[options["mode"]] if not options[key]]
    if missing:
        raise StagingError(f"mode {options['mode']} needs {' and '.join(missing)}")
    source = options["source"]
    if source is not None:
        if not os.path.exists(source):
            raise StagingError(f"source: {source} does not exist")
        if not os.path.isdir(source):
            raise StagingError(f"source: {source} is not a directory")
    if options["mode"] == "plan" and not (options["sizes"] or source):
        raise StagingError(
            "mode plan needs sizes (or a source on the node) for the free-space check"
        )
    return options


def stage(options: dict, check_mode: bool = False) -> dict:
    """Run the module's work, changing nothing when check_mode or dry_run; raise StagingError
    with a one-line message on failure."""
    options = validate(options)
    try:
        if options["mode"] == "measure":
            return measure(options)
        if options["mode"] == "manifest":
            return make_manifest(options)
        if options["mode"] == "sizes":
            return write_sizes(options)
        return Stager(options, check_mode or options["dry_run"]).run()
    except OSError as error:
        raise StagingError(f"{options['name']}: {error}") from error
