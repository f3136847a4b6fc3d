"""Loaded by Python at start-up in every process of a job that `hostcheck job` runs (this
folder is first on PYTHONPATH). It installs the DataLoader probe, then runs the
sitecustomize this one shadows, if the job's environment has one."""

import os
import sys


def _run_shadowed_sitecustomize(here: str) -> None:
    import importlib.machinery
    import importlib.util

    rest = [entry for entry in sys.path if os.path.abspath(entry or os.curdir) != here]
    spec = importlib.machinery.PathFinder.find_spec("sitecustomize", rest)
    if spec is None or spec.loader is None:
        return
    module = importlib.util.module_from_spec(spec)
    sys.modules["sitecustomize"] = module
    spec.loader.exec_module(module)


def _start() -> None:
    here = os.path.dirname(os.path.abspath(__file__))
    folder = os.environ.get("HOSTCHECK_JOB_DIR")
    if folder:
        import _hostcheck_job_probe

        _hostcheck_job_probe.install(folder)
    _run_shadowed_sitecustomize(here)


_start()
