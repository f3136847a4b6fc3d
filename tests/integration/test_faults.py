"""Converges that do not finish, on a sandbox host: the controller killed (SIGKILL, as a CI
timeout or a lost session does, and SIGINT, as Ctrl-C does) inside dpkg installing
pillow-simd's libraries, inside the pillow-simd build, and as the shm role edits fstab; the
host's power cut while pip installs hostcheck into the training venv. After each fault the next
converge must succeed and the one after it change nothing, and the host must read as after the
uninterrupted converge the module starts with: every package installed, pillow-simd importing
in the venv, pip's requirements met, hostcheck installed and passing, fstab and the limits file
whole.

The count of faults injected and recovered is printed at the end of the run
(tests/integration/conftest.py, from each test's `fault` property)."""

from __future__ import annotations

import json
import signal

import pytest

from hostcheck import __version__
from tests.integration.faults import (
    converges_then_changes_nothing,
    interrupted_run,
    power_cut,
    signal_controller,
)
from tests.sandbox.oskinds import KINDS

# What this module covers (tests/selection.py: a change to these paths selects it)
COVERS = (
    "roles/shm/*",
    "roles/pillow_simd/*",
    "roles/hostcheck/*",
    "tests/integration/faults.py",
    "site.yml",
    "playbooks/site.yml",
    "playbooks/provision.yml",
    "playbooks/tasks/group_roles.yml",
    "playbooks/tasks/validate_roles.yml",
    "plugins/action/role_switch.py",
    "plugins/modules/role_switch.py",
    "playbooks/verify.yml",
    "plugins/modules/package_manager_ready.py",
    "plugins/modules/os_packages_missing.py",
    "plugins/module_utils/dpkg_status.py",
)

pytestmark = [pytest.mark.integration, pytest.mark.faults]
TAGS = "shm,ulimits,pillow_simd,hostcheck"
VENV = "/opt/venvs/train"
PILLOW_SIMD = "12.1.1.post0"
SHM_LINE = "tmpfs /dev/shm tmpfs nosuid,nodev,size={size} 0 0"
LIMITS_FILE = "/etc/security/limits.d/90-hostcheck-training.conf"
# what dpkg left half way: every package not installed (ii) or removed with its config (rc)
DPKG_HALF_WAY = "dpkg-query -W -f='${db:Status-Abbrev} ${Package}\\n' | grep -v '^ii \\|^rc ' || :"
PIL_INFO = (
    "import json, PIL, PIL._imaging, importlib.metadata as m; "
    "print(json.dumps([PIL.__version__, m.version('pillow-simd')]))"
)


@pytest.fixture(scope="module")
def faults(make_fleet, tmp_path_factory):
    """One fresh Debian 12 host, the converge's variables (a wheel cache of its own, so the
    pillow-simd build runs; the quick profile: settings, no benchmarks) and, once the first
    test has converged it, the host's state: what each later recovery must come back to."""
    fleet = make_fleet("faults", os_kinds=[KINDS["debian12"]])
    (host,) = fleet.hosts()
    cache = tmp_path_factory.mktemp("pillow-simd-wheels")
    extra_vars = {"hostcheck_profile": "quick", "pillow_simd_wheel_cache": str(cache)}
    return fleet, host, extra_vars, {}


@pytest.fixture
def reference(faults) -> dict:
    """The host's state after the first test's recovery."""
    if not faults[3]:
        pytest.fail("the first converge did not recover; later faults have nothing to compare to")
    return faults[3]


def sh(fleet, host, command: str) -> str:
    done = fleet.ssh(host, command, timeout=300)
    assert done.returncode == 0, f"{command}: {done.stdout[-1500:]}{done.stderr[-1500:]}"
    return done.stdout


def host_state(fleet, host) -> dict:
    """What a converge leaves, read from the host itself; hostcheck with the role's profile and
    the sandbox's thresholds (inventory/sandbox_group_vars), as the role runs it."""
    pil = fleet.ssh(host, f"{VENV}/bin/python -c {json.dumps(PIL_INFO)}")
    ran = (
        f"{VENV}/bin/hostcheck run --profile quick --config /etc/hostcheck/config.yaml"
        " --report json:/tmp/report.json >/dev/null"
    )
    code = fleet.ssh(host, f"{ran}; echo $?").stdout.strip()
    return {
        "dpkg half way": sh(fleet, host, DPKG_HALF_WAY).split("\n")[:-1],
        "dpkg audit": sh(fleet, host, "dpkg --audit || :").strip(),
        "pillow": json.loads(pil.stdout) if pil.returncode == 0 else pil.stderr[-300:],
        "pip check": fleet.ssh(host, f"{VENV}/bin/pip check").returncode,
        "hostcheck": sh(fleet, host, f"{VENV}/bin/hostcheck --version").strip(),
        "hostcheck run": (code, failures(sh(fleet, host, "cat /tmp/report.json"))),
        "shm in fstab": sh(fleet, host, "grep ' /dev/shm ' /etc/fstab").strip(),
        "limits file": sh(fleet, host, f"md5sum < {LIMITS_FILE}").split()[0],
    }


def failures(report_text: str) -> list[str]:
    """The ids of the checks a JSON report says failed or could not run."""
    report = json.loads(report_text)
    return [r["id"] for r in report["checks"] if r["status"] in ("fail", "error")]


def expected_state(size: str = "50%", limits: str = "") -> dict:
    return {
        "dpkg half way": [],
        "dpkg audit": "",
        "pillow": [PILLOW_SIMD, PILLOW_SIMD],
        "pip check": 0,
        "hostcheck": f"hostcheck {__version__}",
        "hostcheck run": ("0", []),
        "shm in fstab": SHM_LINE.format(size=size),
        "limits file": limits,
    }


def recovered(fleet, host, extra_vars) -> dict:
    """The next converge succeeds, the one after changes nothing; the host's state."""
    converges_then_changes_nothing(fleet, host, extra_vars=extra_vars, tags=TAGS, timeout=1500)
    return host_state(fleet, host)


def test_sigkill_inside_dpkg_installing_the_libraries(faults, record_property):
    """The first converge of a fresh host, cut off while dpkg installs; its recovery must read
    as a converge without a fault does."""
    fleet, host, extra_vars, reached = faults
    seen = interrupted_run(
        fleet,
        host,
        signal_controller(signal.SIGKILL),
        extra_vars=extra_vars,
        tags=TAGS,
        on_host="pgrep -x dpkg",
    )
    record_property("fault", "controller SIGKILL while dpkg installs pillow-simd's libraries")
    assert any("Install the libraries pillow-simd is built against" in line for line in seen)
    state = recovered(fleet, host, extra_vars)
    assert state == expected_state(limits=state["limits file"])
    assert "*\thard\tnofile\t20000\n" in sh(fleet, host, f"cat {LIMITS_FILE}")
    reached.update(state)


def test_sigint_inside_the_pillow_simd_build(faults, reference, record_property, tmp_path):
    fleet, host, extra_vars, _ = faults
    # pillow-simd and the wheel the role keeps in the venv gone, the cache empty: a build
    sh(fleet, host, f"{VENV}/bin/pip uninstall -y -q pillow-simd pillow")
    sh(fleet, host, f"rm -r {VENV}/pillow-simd/wheels")
    rebuild = {**extra_vars, "pillow_simd_wheel_cache": str(tmp_path)}
    interrupted_run(
        fleet,
        host,
        signal_controller(signal.SIGINT),
        extra_vars=rebuild,
        tags=TAGS,
        on_host="pgrep -f '[p]ip wheel'",
    )
    record_property("fault", "controller SIGINT while pip builds pillow-simd")
    assert not list(tmp_path.rglob("*.whl")), "the interrupted build left a wheel in the cache"
    built = f"find {VENV}/pillow-simd/wheels -name 'pillow[_-]simd-*.whl*' 2>/dev/null || :"
    assert sh(fleet, host, built).split() == [], "the interrupted build left a wheel in the venv"
    # The build, cut off from the controller, may finish on the host: its wheel counts only
    # with the build record written after it (files/pillow_simd_build.py).
    assert recovered(fleet, host, rebuild) == reference
    kept = sorted(name.rsplit("/", 1)[1] for name in sh(fleet, host, built).split())
    assert [name.rsplit(".", 1)[-1] for name in kept] == ["whl", "json"], kept


def test_sigkill_as_the_shm_role_edits_fstab(faults, reference, record_property):
    fleet, host, extra_vars, _ = faults
    bigger = {**extra_vars, "shm_size": "60%"}
    interrupted_run(
        fleet,
        host,
        signal_controller(signal.SIGKILL),
        extra_vars=bigger,
        tags=TAGS,
        on_line="TASK [hostcheck.gpu_hosts.shm : Persist /dev/shm in fstab",
    )
    record_property("fault", "controller SIGKILL as the shm role edits fstab")
    fstab = sh(fleet, host, "grep -c ' /dev/shm ' /etc/fstab").strip()
    assert fstab == "1", "fstab holds one /dev/shm line, old or new, never a partial one"
    state = recovered(fleet, host, bigger)
    assert state == {**reference, "shm in fstab": SHM_LINE.format(size="60%")}


def test_power_cut_while_pip_installs_hostcheck(faults, reference, record_property):
    fleet, host, extra_vars, _ = faults
    sh(fleet, host, f"{VENV}/bin/pip uninstall -y -q hostcheck")
    interrupted_run(
        fleet,
        host,
        power_cut(fleet, host),
        extra_vars=extra_vars,
        tags=TAGS,
        on_host="pgrep -f '[p]ip.* install .*hostcheck'",
    )
    record_property("fault", "host power cut while pip installs hostcheck into the venv")
    fleet.power_on(host)
    assert recovered(fleet, host, extra_vars) == reference
