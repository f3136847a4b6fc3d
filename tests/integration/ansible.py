"""Run ansible-playbook against a sandbox fleet the way an operator would, and read the result
(the json callback: per-host stats and every task's result)."""

from __future__ import annotations

import functools
import hashlib
import json
import os
import resource
import shutil
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

from tests import costs
from tests.paths import MACHINE_CACHE
from tests.sandbox.fleet import CHECKOUT, Fleet

ANSIBLE_BIN = Path(sys.executable).parent
COLLECTION_PREFIX = "hostcheck.gpu_hosts."
WHEEL_INFO = CHECKOUT / "roles" / "hostcheck" / "files" / "wheel_info.py"
# The suite's callbacks (callback_plugins/): a cache of module payloads across runs
# (hostcheck_payload_cache.py) and ansible-core's Jinja2 plugins loaded before the forks
# (hostcheck_jinja_plugins.py); on when tests/conftest.py sets the switch, so benchmarks measure
# the controller as an operator runs it.
PAYLOAD_CACHE_SWITCH = "HOSTCHECK_TEST_PAYLOAD_CACHE_ON"
SUITE_CALLBACKS = ("hostcheck_payload_cache", "hostcheck_jinja_plugins")
PAYLOAD_CACHES = MACHINE_CACHE / "ansiballz"
SUITE_CALLBACK_PLUGINS = Path(__file__).resolve().parent / "callback_plugins"
PAYLOAD_CACHE_DAYS = 7


@dataclass(frozen=True)
class Controller:
    """Where ansible-playbook runs: its folder of executables, working directory and
    environment. CHECKOUT_CONTROLLER is this checkout (its venv and ansible.cfg);
    tests/integration/collection.py makes one with the built collection installed, as a user
    would have it."""

    bin: Path
    cwd: Path
    env: dict[str, str]

    def environment(self, **more: str) -> dict[str, str]:
        inherited = {k: v for k, v in os.environ.items() if not k.startswith("ANSIBLE_")}
        return {**inherited, **self.env, **more, "PATH": f"{self.bin}:{os.environ['PATH']}"}


CHECKOUT_CONTROLLER = Controller(
    ANSIBLE_BIN, CHECKOUT, {"ANSIBLE_CONFIG": str(CHECKOUT / "ansible.cfg")}
)


def core_release(controller: Controller) -> Path:
    """ansible-core's release.py of a controller: this venv's, or the one in the controller's
    own venv (tests/integration/collection.py)."""
    if controller == CHECKOUT_CONTROLLER:
        from ansible import release

        return Path(release.__file__)
    found = sorted(controller.bin.parent.glob("lib/python*/site-packages/ansible/release.py"))
    if not found:
        raise FileNotFoundError(f"{controller.bin.parent} has no ansible-core")
    return found[0]


def payload_cache_key(checkout: Path = CHECKOUT, release: Path | None = None) -> str:
    """What the payloads of a controller are built from: its ansible-core's release (a venv's
    path is left out: the collection-installed controllers are made anew in every run), the
    collections the ansible package bundles (copied into those controllers), and the content of
    the collection's modules and module_utils."""
    import ansible

    digest = hashlib.sha256()
    digest.update((release or core_release(CHECKOUT_CONTROLLER)).read_bytes())
    community = Path(ansible.__file__).parent.parent / "ansible_release.py"
    digest.update(community.read_bytes() if community.exists() else b"no ansible package")
    for folder in ("plugins/modules", "plugins/module_utils"):
        for path in sorted((checkout / folder).rglob("*.py")):
            digest.update(f"{path.relative_to(checkout)}\0".encode() + path.read_bytes())
    return digest.hexdigest()[:16]


@functools.cache
def payload_cache_folder(release: Path | None = None) -> Path:
    """The folder of payloads for this checkout and an ansible-core (this venv's by default);
    folders unused for PAYLOAD_CACHE_DAYS go."""
    folder = PAYLOAD_CACHES / payload_cache_key(CHECKOUT, release)
    if PAYLOAD_CACHES.is_dir():
        for old in PAYLOAD_CACHES.iterdir():
            if old != folder and time.time() - old.stat().st_mtime > PAYLOAD_CACHE_DAYS * 86400:
                shutil.rmtree(old, ignore_errors=True)
    folder.mkdir(parents=True, exist_ok=True)
    os.utime(folder)
    return folder


def payload_cache_environment(controller: Controller) -> dict[str, str]:
    """What enables the suite's callbacks (the payload cache and the Jinja2 plugins loaded
    before the forks) in a run, when the suite turns them on: for this checkout's controller
    and for those with the collection installed from it."""
    if os.environ.get(PAYLOAD_CACHE_SWITCH) != "1":
        return {}
    return {
        "ANSIBLE_CALLBACK_PLUGINS": str(SUITE_CALLBACK_PLUGINS),
        "ANSIBLE_CALLBACKS_ENABLED": ",".join(SUITE_CALLBACKS),
        "HOSTCHECK_TEST_PAYLOAD_CACHE": str(payload_cache_folder(core_release(controller))),
    }


def build_wheel(source: Path, cache: Path) -> str:
    """The hostcheck wheel of a checkout, built once per content into cache (the hostcheck
    role's own builder): its path."""
    done = subprocess.run(
        [sys.executable, str(WHEEL_INFO), "build", str(source), str(cache)],
        capture_output=True,
        text=True,
        check=True,
    )
    return json.loads(done.stdout)["path"]


@dataclass
class PlaybookRun:
    returncode: int
    output: dict
    stderr: str

    @property
    def stats(self) -> dict[str, dict[str, int]]:
        return self.output.get("stats", {})

    def changed(self, host: str) -> int:
        return self.stats[host]["changed"]

    def changed_tasks(self, host: str) -> list[str]:
        """Names of the tasks that changed this host, in order (for assertion messages)."""
        return [
            task["task"]["name"]
            for play in self.output.get("plays", [])
            for task in play["tasks"]
            if (task["hosts"].get(host) or {}).get("changed")
        ]

    def failed_hosts(self) -> list[str]:
        return sorted(h for h, s in self.stats.items() if s["failures"] or s["unreachable"])

    def messages(self, host: str) -> list[str]:
        """Failure messages of one host, in task order."""
        found = []
        for play in self.output.get("plays", []):
            for task in play["tasks"]:
                result = task["hosts"].get(host)
                if result and result.get("failed"):
                    found.append(str(result.get("msg", "")))
        return found

    def failure_text(self, host: str) -> str:
        """Every failure message of a host, those of loop items included (with the end of a
        failed command's stderr), then ansible-playbook's stderr."""
        found = []
        for play in self.output.get("plays", []):
            for task in play["tasks"]:
                result = task["hosts"].get(host) or {}
                # results: loop items, or lines of text for some modules (apt's)
                for item in [result, *result.get("results", [])]:
                    if isinstance(item, dict) and item.get("failed"):
                        stderr = str(item.get("stderr") or "").strip()
                        said = f" (stderr: {stderr[-1000:]})" if stderr else ""
                        found.append(str(item.get("msg", "")) + said)
        return " | ".join(found) + self.stderr

    def task_results(self, name: str) -> dict[str, dict]:
        """Results by host of the task with this name (the last one run); a role's tasks are
        named "<role> : <task>", without the collection's prefix Ansible shows."""
        results: dict[str, dict] = {}
        for play in self.output.get("plays", []):
            for task in play["tasks"]:
                if task["task"]["name"].removeprefix(COLLECTION_PREFIX) == name:
                    results.update(task["hosts"])
        return results


def playbook_argv(
    fleet: Fleet,
    playbook: str = "site.yml",
    extra_vars: dict | None = None,
    check: bool = False,
    diff: bool = False,
    limit: str | None = None,
    tags: str | None = None,
    forks: int | None = None,
    controller: Controller = CHECKOUT_CONTROLLER,
    inventory: Path | None = None,
) -> list[str]:
    """The ansible-playbook command line an operator would type for this run."""
    argv = [str(controller.bin / "ansible-playbook"), "-i", str(inventory or fleet.inventory)]
    argv.append(playbook)
    if extra_vars:
        argv += ["-e", json.dumps(extra_vars)]
    if check:
        argv.append("--check")
    if diff:
        argv.append("--diff")
    if limit:
        argv += ["--limit", limit]
    if tags:
        argv += ["--tags", tags]
    if forks:
        argv += ["--forks", str(forks)]
    return argv


def run_playbook(
    fleet: Fleet,
    playbook: str = "site.yml",
    extra_vars: dict | None = None,
    *,
    timeout: float = 2700,  # a hung run's stop: site.yml on six kinds took 27.5 min in the suite
    controller: Controller = CHECKOUT_CONTROLLER,
    **options,
) -> PlaybookRun:
    """Run ansible-playbook (options: those of playbook_argv) and read its json output."""
    argv = playbook_argv(fleet, playbook, extra_vars, controller=controller, **options)
    env = controller.environment(
        ANSIBLE_STDOUT_CALLBACK="json",
        ANSIBLE_LOAD_CALLBACK_PLUGINS="1",
        ANSIBLE_DEPRECATION_WARNINGS="0",
        ANSIBLE_PYTHON_INTERPRETER="/usr/bin/python3",
        **payload_cache_environment(controller),
    )
    started, controller_cpu, cpu = (
        time.monotonic(),
        costs.rusage_cpu_seconds(resource.RUSAGE_CHILDREN),
        costs.own_cgroup_cpu_seconds(),
    )
    done = subprocess.run(
        argv,
        capture_output=True,
        text=True,
        env=env,
        cwd=controller.cwd,
        timeout=timeout,
        check=False,
    )
    try:
        output = json.loads(done.stdout[done.stdout.index("{") :])
    except ValueError:
        output = {}
    run = PlaybookRun(done.returncode, output, done.stderr + done.stdout[-3000:] * (not output))
    cpu_after = costs.own_cgroup_cpu_seconds()
    controller_cpu_after = costs.rusage_cpu_seconds(resource.RUSAGE_CHILDREN)
    costs.record_playbook_run(
        {
            "playbook": playbook,
            "tags": options.get("tags") or "",
            "check": bool(options.get("check")),
            "returncode": done.returncode,
            "hosts": len(run.stats),
            "tasks": sum(
                sum(s.get(k, 0) for k in ("ok", "failures", "skipped"))  # ok counts the changed
                for s in run.stats.values()
            ),
            "changed": sum(s.get("changed", 0) for s in run.stats.values()),
            "wall_s": round(time.monotonic() - started, 3),
            "controller_cpu_s": round(controller_cpu_after - controller_cpu, 3),
            "cpu_s": None if cpu is None or cpu_after is None else round(cpu_after - cpu, 3),
            "task_s": costs.task_seconds(output),
        }
    )
    return run


def run_module(fleet: Fleet, module: str, args: str, timeout: float = 180) -> dict[str, dict]:
    """One module on every host of gpu_nodes (`ansible -m`), its result by host; fails the
    test when Ansible does."""
    done = subprocess.run(
        [
            *(str(ANSIBLE_BIN / "ansible"), "-i", str(fleet.inventory), "gpu_nodes"),
            *("-m", module, "-a", args),
        ],
        capture_output=True,
        text=True,
        env=CHECKOUT_CONTROLLER.environment(
            ANSIBLE_STDOUT_CALLBACK="json", ANSIBLE_LOAD_CALLBACK_PLUGINS="1"
        ),
        cwd=CHECKOUT,
        check=False,
        timeout=timeout,
    )
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    return json.loads(done.stdout)["plays"][0]["tasks"][0]["hosts"]
