"""The pillow_simd role off the sandbox: its per-OS package lists and cache keys for every OS
family (the RHEL and Ubuntu paths cannot run here), the constraint file it writes, and its
host-side scripts (probe, placeholder wheel, pip configuration) against a real, empty venv."""

from __future__ import annotations

import hashlib
import importlib.util
import json
import subprocess
import sys
import zipfile
from pathlib import Path

import jinja2
import pytest
import yaml
from ansible_collections.hostcheck.gpu_hosts.plugins.plugin_utils.pillow_simd_rules import (
    os_key,
    skip_reason,
)
from ansible_collections.hostcheck.gpu_hosts.plugins.plugin_utils.role_action import with_facts
from hostcheck._shared import distributions

from tests.paths import CHECKOUT as REPO
from tests.support.os_vars import vars_file_for as os_vars_file_for

ROLE = REPO / "roles" / "pillow_simd"
SCRIPTS = ROLE / "files"
sys.path.insert(0, str(SCRIPTS))  # the scripts import pillow_simd_common from beside them
probe_script = importlib.import_module("pillow_simd_probe")

VERSION = "12.1.1.post0"
JINJA = jinja2.Environment(undefined=jinja2.StrictUndefined)


def render(text: str, **variables) -> str:
    return JINJA.from_string(text).render(**variables)


def vars_file_for(facts: dict) -> Path | None:
    """What validate.yml's include_vars task loads for these facts."""
    return os_vars_file_for("pillow_simd", facts)


FACTS = {
    "debian-12": {"distribution": "Debian", "distribution_major_version": "12",
                  "distribution_version": "12.5", "os_family": "Debian"},
    "ubuntu-22.04": {"distribution": "Ubuntu", "distribution_major_version": "22",
                     "distribution_version": "22.04", "os_family": "Debian"},
    "ubuntu-24.04": {"distribution": "Ubuntu", "distribution_major_version": "24",
                     "distribution_version": "24.04", "os_family": "Debian"},
    "rocky-9": {"distribution": "Rocky", "distribution_major_version": "9",
                "distribution_version": "9.4", "os_family": "RedHat"},
    "redhat-8": {"distribution": "RedHat", "distribution_major_version": "8",
                 "distribution_version": "8.10", "os_family": "RedHat"},
    "almalinux-9": {"distribution": "AlmaLinux", "distribution_major_version": "9",
                    "distribution_version": "9.5", "os_family": "RedHat"},
}  # fmt: skip
JPEG = {"Debian": "libjpeg62-turbo-dev", "Ubuntu": "libjpeg-turbo8-dev"}


@pytest.mark.parametrize("key", sorted(FACTS))
def test_each_os_gets_its_packages_and_cache_key(key):
    facts = FACTS[key]
    path = vars_file_for(facts)
    assert path is not None
    variables = yaml.safe_load(path.read_text())
    assert os_key(with_facts(variables, facts)) == key
    libraries = variables["__pillow_simd_library_packages"]
    compiler = variables["__pillow_simd_compiler_packages"]
    if facts["os_family"] == "Debian":
        assert JPEG[facts["distribution"]] in libraries and "zlib1g-dev" in libraries
        assert {"build-essential", "binutils", "python3-dev"} <= set(compiler)
        assert variables["__pillow_simd_venv_packages"] == ["python3-venv"]
    else:
        assert {"libjpeg-turbo-devel", "zlib-devel"} <= set(libraries)
        # EL 8's training venv runs python3.11 (python3 is 3.6 there): its headers
        python = (
            "python3.11-devel" if facts["distribution_major_version"] == "8" else "python3-devel"
        )
        assert {"gcc", "binutils", python} <= set(compiler)
    # the package task of the family exists and uses that family's package module
    # (after a look at which packages are missing; apt or dnf only runs when one is)
    setup = yaml.safe_load((ROLE / "tasks" / f"setup-{facts['os_family']}.yml").read_text())
    module = {"Debian": "ansible.builtin.apt", "RedHat": "ansible.builtin.dnf"}
    assert "hostcheck.gpu_hosts.os_packages_missing" in setup[0]
    tasks = [inner for task in setup for inner in task.get("block", [task])]
    install = [t for t in tasks if t["name"].startswith("Install")]
    assert len(install) == 1 and module[facts["os_family"]] in install[0]
    assert install[0][module[facts["os_family"]]]["name"] == "{{ __pillow_simd_packages }}"


def test_an_unknown_os_has_no_vars_file_and_is_skipped():
    facts = {"distribution": "Gentoo", "distribution_major_version": "2",
             "distribution_version": "2.15", "os_family": "Gentoo"}  # fmt: skip
    assert vars_file_for(facts) is None
    assert skip_reason(facts, False, ["sse4_1"]).startswith("no package list for Gentoo")


def test_library_lists_differ_so_cache_keys_never_mix_os_releases():
    hashes = {}
    for name in ("Debian", "Ubuntu", "RedHat"):
        variables = yaml.safe_load((ROLE / "vars" / f"{name}.yml").read_text())
        joined = " ".join(sorted(variables["__pillow_simd_library_packages"]))
        hashes[name] = hashlib.sha1(joined.encode()).hexdigest()
    assert len(set(hashes.values())) == 3


def test_constraint_file_pins_the_placeholder_and_the_release():
    text = render(
        (ROLE / "templates" / "constraints.txt.j2").read_text(),
        ansible_managed="Ansible managed",
        __pillow_simd_version=VERSION,
    )
    pins = [line for line in text.splitlines() if line and not line.startswith("#")]
    assert pins == [f"pillow=={VERSION}+pillowsimd", f"pillow-simd=={VERSION}"]


def test_defaults_match_the_argument_specs():
    defaults = yaml.safe_load((ROLE / "defaults" / "main.yml").read_text())
    specs = yaml.safe_load((ROLE / "meta" / "argument_specs.yml").read_text())["argument_specs"]
    options = specs["main"]["options"]
    assert set(options) == set(defaults)
    for name, value in defaults.items():
        assert options[name]["default"] == value, name
    lines = (ROLE / "defaults" / "main.yml").read_text().splitlines()
    for index, line in enumerate(lines):
        if line.startswith("pillow_simd_"):
            assert lines[index - 1].startswith("# "), f"{line}: one-line comment above"


# ---------------------------------------------------------------- the host-side scripts


def run_script(script: str, *args: str, env: dict | None = None) -> dict:
    """pillow_simd_<script>.py run as the role runs it: after pillow_simd_common.py, as one
    program on standard input."""
    program = "\n".join(
        (SCRIPTS / name).read_text().rstrip() for name in ("pillow_simd_common.py", script)
    )
    done = subprocess.run(
        [sys.executable, "-", *args],
        input=program,
        capture_output=True,
        text=True,
        check=False,
        env=env,
        cwd="/",
    )
    assert done.returncode == 0, done.stdout + done.stderr
    return json.loads(done.stdout)


def test_placeholder_wheel_installs_no_files_and_is_reproducible(tmp_path):
    first = run_script(
        "pillow_simd_placeholder.py", "--version", VERSION, "--out", str(tmp_path / "a")
    )
    done = subprocess.run(
        [sys.executable, str(SCRIPTS / "pillow_simd_placeholder.py"), "--version", VERSION,
         "--out", str(tmp_path / "b")],
        capture_output=True, text=True, check=True,
    )  # fmt: skip
    second = json.loads(done.stdout)  # run as a file, as tests/integration runs the bench
    assert first["sha256"] == second["sha256"]
    assert Path(first["path"]).name == f"pillow-{VERSION}+pillowsimd-py3-none-any.whl"
    with zipfile.ZipFile(first["path"]) as wheel:
        names = wheel.namelist()
        assert all(n.startswith(f"pillow-{VERSION}+pillowsimd.dist-info/") for n in names)
        info = f"pillow-{VERSION}+pillowsimd.dist-info"
        meta = probe_script.headers(wheel.read(f"{info}/METADATA").decode())
        assert (meta["Name"], meta["Version"]) == ("pillow", f"{VERSION}+pillowsimd")
        assert "Requires-Dist" not in meta  # a missing pillow-simd must not trigger a rebuild
        for path, digest in probe_script.record_rows(wheel.read(f"{info}/RECORD").decode()):
            if digest:
                assert digest == probe_script.record_hash(wheel.read(path))


def test_global_pip_constraints_are_kept_install_section_first(tmp_path):
    xdg, etc = tmp_path / "xdg.conf", tmp_path / "etc.conf"
    xdg.write_text("[global]\nconstraint = /etc/a.txt /etc/b.txt\n")
    found = probe_script.pip_global_constraints([str(xdg), str(etc)])
    assert found == {"files": [str(xdg)], "constraints": ["/etc/a.txt", "/etc/b.txt"]}
    etc.write_text("[install]\nconstraint = /etc/c.txt\n")  # read last, and install wins
    assert probe_script.pip_global_constraints([str(xdg), str(etc)])["constraints"] == [
        "/etc/c.txt"
    ]
    assert probe_script.global_pip_files()[-1] == "/etc/pip.conf"


@pytest.fixture
def venv(tmp_path) -> Path:
    """A real venv without pip, with a pillow-simd install the probe can judge."""
    path = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(path)], check=True)
    return path


def fake_install(venv: Path, name: str, version: str, files: dict[str, bytes]) -> None:
    (site,) = venv.glob("lib/python3*/site-packages")
    info = site / f"{name.replace('-', '_')}-{version}.dist-info"
    info.mkdir()
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n")
    rows = []
    for relative, data in files.items():
        (site / relative).parent.mkdir(parents=True, exist_ok=True)
        (site / relative).write_bytes(data)
        rows.append(f"{relative},{probe_script.record_hash(data)},{len(data)}")
    rows.append(f"{info.name}/RECORD,,")
    (info / "RECORD").write_text("\n".join(rows) + "\n")


def probe(venv: Path, avx2: str = "yes", *more: str) -> dict:
    return run_script(
        "pillow_simd_probe.py", "--venv", str(venv), "--version", VERSION, "--avx2", avx2,
        "--os-key", "debian-12", "--packages-hash", "0123456789abcdef", *more,
    )  # fmt: skip


IMAGING = f"PIL/_imaging.cpython-{sys.version_info[0]}{sys.version_info[1]}-x86_64-linux-gnu.so"
SIMD_SO = b"\x7fELF pillow-simd built with -mavx2"


def install_simd_from_its_wheel(venv: Path, found: dict) -> None:
    """pillow-simd in the venv, and the wheel with its build record where the role keeps it."""
    fake_install(venv, "pillow-simd", VERSION, {"PIL/__init__.py": b"", IMAGING: SIMD_SO})
    wheel_dir = Path(found["wheel"]["dir"])
    wheel_dir.mkdir(parents=True)
    wheel = wheel_dir / found["wheel"]["name"]
    wheel.write_bytes(b"the wheel")
    record = {
        "version": VERSION,
        "avx2": True,
        "wheel_sha256": hashlib.sha256(b"the wheel").hexdigest(),
        "imaging_sha256": probe_script.record_hash(SIMD_SO),
    }
    Path(f"{wheel}.json").write_text(json.dumps(record))


def test_probe_follows_the_imaging_hash_from_the_build_record_to_the_disk(venv):
    tag = f"cp{sys.version_info[0]}{sys.version_info[1]}"
    imaging = IMAGING
    found = probe(venv)
    assert found["venv"]["state"] == "venv" and not found["simd_ok"]
    assert found["key"].startswith("debian-12-") and found["key"].endswith(f"-{tag}-avx2-01234567")

    install_simd_from_its_wheel(venv, found)
    assert probe(venv)["simd_ok"]
    assert not probe(venv, avx2="no")["simd_ok"]  # the other build is wanted: another key

    # stock Pillow pulled in over it: two claimants, PIL files now Pillow's
    fake_install(venv, "Pillow", "12.3.0", {imaging: b"\x7fELF stock"})
    found = probe(venv)
    assert not found["simd_ok"] and found["remove"] == ["Pillow"]
    assert [c["name"] for c in found["claimants"]] == ["Pillow", "pillow-simd"]


def test_probe_tells_the_placeholder_from_stock_pillow(venv):
    run = run_script("pillow_simd_placeholder.py", "--version", VERSION, "--out", str(venv / "w"))
    (site,) = venv.glob("lib/python3*/site-packages")
    with zipfile.ZipFile(run["path"]) as wheel:
        wheel.extractall(site)
    assert probe(venv)["placeholder"] == {"ok": True, "version": f"{VERSION}+pillowsimd"}
    assert probe(venv)["remove"] == []
    # stock Pillow replaced it (same name, but it installs PIL): not ours, and to be removed
    for info in site.glob("pillow-*.dist-info"):
        for item in info.iterdir():
            item.unlink()
        info.rmdir()
    fake_install(venv, "pillow", "12.3.0", {"PIL/Image.py": b"x"})
    found = probe(venv)
    assert not found["placeholder"]["ok"] and found["remove"] == ["pillow"]


# ---------------------------------------------------------------- the provisioning probe

CONSTRAINTS = f"# managed\npillow=={VERSION}+pillowsimd\npillow-simd=={VERSION}\n"


def provision(venv: Path) -> tuple[str, ...]:
    """The state the install path leaves (without running pip): pillow-simd from its wheel, the
    placeholder, the role's folders (0755), constraints.txt and pip.conf (0644). Returns the
    probe arguments main.yml adds (no packages: they are tested apart)."""
    found = probe(venv)
    install_simd_from_its_wheel(venv, found)
    placeholder = run_script(
        "pillow_simd_placeholder.py", "--version", VERSION, "--out", str(venv / "w")
    )
    (site,) = venv.glob("lib/python3*/site-packages")
    with zipfile.ZipFile(placeholder["path"]) as wheel:
        wheel.extractall(site)
    home = Path(found["home"])
    for folder in (home, home / "wheels", Path(found["wheel"]["dir"])):
        folder.chmod(0o755)
    constraints = home / "constraints.txt"
    constraints.write_text(CONSTRAINTS)
    constraints.chmod(0o644)
    wanted = " ".join(dict.fromkeys([*found["pip_global"]["constraints"], str(constraints)]))
    pip_conf = venv / "pip.conf"
    pip_conf.write_text(f"[global]\nconstraint = {wanted}\n\n[install]\nconstraint = {wanted}\n")
    pip_conf.chmod(0o644)
    return ("--packages", "--constraints-text", CONSTRAINTS)


def test_a_provisioned_venv_needs_nothing_and_each_drift_is_named(venv):
    more = provision(venv)
    found = probe(venv, "yes", *more)
    assert (found["provisioned"], found["drift"]) == (True, [])
    home = venv / "pillow-simd"
    constraints, pip_conf = home / "constraints.txt", venv / "pip.conf"

    constraints.write_text(CONSTRAINTS + "pillow<99\n")
    assert probe(venv, "yes", *more)["drift"] == [f"{constraints} is not the role's template"]
    constraints.write_text(CONSTRAINTS)
    constraints.chmod(0o600)
    assert probe(venv, "yes", *more)["drift"] == [f"{constraints} has mode 0600, not 0644"]
    constraints.chmod(0o644)
    (home / "wheels").chmod(0o700)
    assert probe(venv, "yes", *more)["drift"] == [f"{home}/wheels has mode 0700, not 0755"]
    (home / "wheels").chmod(0o755)

    text = pip_conf.read_text()
    pip_conf.write_text(text.replace("[install]\nconstraint", "[install]\nno-cache-dir = 1\nx"))
    (drift,) = probe(venv, "yes", *more)["drift"]
    assert drift.startswith(f"{pip_conf} [install] constraint is None, not ")
    pip_conf.write_text(text)
    assert probe(venv, "yes", *more)["provisioned"]

    # the other AVX2 choice: another wheel, so neither it nor PIL is as wanted
    other = probe(venv, "no", *more)
    assert other["drift"] == [
        f"{other['wheel']['dir']} is missing",
        f"no wheel built as wanted at {other['wheel']['path']}",
        f"PIL is not pillow-simd {VERSION} from that wheel",
    ]

    (site,) = venv.glob("lib/python3*/site-packages")
    for info in site.glob("pillow-*.dist-info"):
        for item in info.iterdir():
            item.unlink()
        info.rmdir()
    assert probe(venv, "yes", *more)["drift"] == [
        f"pillow is not the placeholder {VERSION}+pillowsimd"
    ]


def test_no_venv_yet_is_drift(tmp_path):
    found = probe(tmp_path / "none", "yes", "--constraints-text", CONSTRAINTS)
    assert not found["provisioned"]
    assert found["drift"][0] == f"no venv at {tmp_path / 'none'}"


@pytest.mark.parametrize(
    ("manager", "output", "missing"),
    [
        ("apt", "zlib1g-dev ii \npython3-venv un \n", ["python3-venv", "libtiff-dev"]),
        ("apt", "dpkg-query: no packages found matching libtiff-dev\n", ["zlib1g-dev",
         "python3-venv", "libtiff-dev"]),
        ("dnf", "zlib-devel-1.2.11-40.el9.x86_64\nno package provides libtiff-dev\n",
         ["libtiff-dev"]),
    ],
)  # fmt: skip
def test_missing_packages_from_the_package_database(monkeypatch, manager, output, missing):
    asked = []
    monkeypatch.setattr(probe_script, "run", lambda argv, **_: asked.append(argv) or (1, output))
    names = ["zlib1g-dev", "python3-venv", "libtiff-dev"]
    assert probe_script.missing_packages(names, manager) == missing
    assert asked[0][0] == ("dpkg-query" if manager == "apt" else "rpm")
    assert asked[0][-3:] == names
    assert probe_script.missing_packages([], manager) == [] and len(asked) == 1


def test_missing_packages_without_the_tool_are_all_missing(monkeypatch):
    def absent(argv, **_):
        raise FileNotFoundError(argv[0])

    monkeypatch.setattr(probe_script, "run", absent)
    assert probe_script.missing_packages(["a", "b"], "dnf") == ["a", "b"]


METADATA_SAMPLES = [
    "Metadata-Version: 2.1\nName: Pillow-SIMD\nVersion: 9.5.0.post1\n\nName: not a header\n",
    "Name: pillow_simd\nSummary: a\n  continued\nVersion: 10.0\nVersion: 11.0\n",
    "Name:torch\nVersion:2.13.0\n\n",
    "",
]


@pytest.mark.parametrize("text", METADATA_SAMPLES)
def test_the_probes_metadata_reader_is_the_shared_rule(text):
    """The probe runs on the host's Python without the collection, so it keeps a copy of
    module_utils/distributions.py's rules: they must read every METADATA and name alike."""
    assert probe_script.headers(text) == distributions.parse_metadata(text)
    name = probe_script.headers(text).get("Name", "Pillow.SIMD_x")
    assert probe_script.normalize(name) == distributions.normalize_name(name)


def test_the_probes_record_reader_is_the_shared_rule():
    record = "PIL/__init__.py,sha256=abc,12\nPIL/x.pyc,,\n\nPillow.dist-info/RECORD,,\n"
    shared = [(path, digest or "") for path, digest, dummy in distributions.parse_record(record)]
    assert probe_script.record_rows(record) == shared
    assert probe_script.record_hash(b"pixels") == distributions.record_hash(b"pixels")
