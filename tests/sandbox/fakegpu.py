"""What makes a sandbox host look like a GPU host to the nvidia_driver role, where no GPU,
no NVIDIA mirror and no nvidia module can be had: a signed apt repository of stand-in
packages (built here with dpkg-deb and gpg), whose driver package carries an nvidia.ko that
is only an ELF file with a .modinfo section (modinfo reads its version; nothing loads it).
The PCI functions, the loaded module and mokutil are faked on the host by
tests/integration/playbooks/fake_gpu.yml, and push_repo puts the repository there. Everything
else the role touches is real: apt, dpkg holds, deb822 sources, signature checks, modprobe.d,
depmod, modinfo.
"""

from __future__ import annotations

import hashlib
import os
import subprocess
import tempfile
import textwrap
from email.utils import formatdate
from pathlib import Path

GPU = {"address": "0000:3b:00.0", "vendor": "0x10de", "device": "0x2330", "class": "0x030200"}
NVSWITCH = {"address": "0000:5a:00.0", "vendor": "0x10de", "device": "0x22a3", "class": "0x068000"}
NIC = {"address": "0000:17:00.0", "vendor": "0x15b3", "device": "0x1021", "class": "0x020700"}


# The daemons of the driver packages: nothing to manage without a GPU, so they only stay up,
# under units that `systemctl enable --now` really runs. NVIDIA's own units are Type=forking
# (nvidia-persistenced) and pulled in by udev once the device exists, which it never does here.
STANDIN_DAEMON = (
    "#!/bin/sh\n# hostcheck sandbox stand-in: no GPU here, so only stay up.\nexec sleep infinity\n"
)
PERSISTENCED_UNIT = textwrap.dedent("""\
    [Unit]
    Description=NVIDIA Persistence Daemon (hostcheck sandbox stand-in)
    Wants=syslog.target

    [Service]
    Type=simple
    ExecStart=/usr/bin/nvidia-persistenced --verbose
    ExecStopPost=/bin/rm -rf /var/run/nvidia-persistenced

    [Install]
    WantedBy=multi-user.target
    """)
FABRICMANAGER_UNIT = textwrap.dedent("""\
    [Unit]
    Description=NVIDIA fabric manager service (hostcheck sandbox stand-in)

    [Service]
    Type=simple
    ExecStart=/usr/bin/nv-fabricmanager -c /usr/share/nvidia/nvswitch/fabricmanager.cfg
    LimitCORE=infinity

    [Install]
    WantedBy=multi-user.target
    """)


def _sh(*argv: str, **options) -> subprocess.CompletedProcess:
    return subprocess.run(argv, check=True, capture_output=True, **options)


REPO_ON_HOST = "/srv/fake-cuda"
# While this file names a live process, the stand-in driver packages wait at the end of their
# post-install script, inside the package manager's transaction, with nvidia.ko written: a
# fault test's watcher (tests/integration/faults.py, freeze_when_written) then finds the
# transaction in its middle however late a loaded machine schedules it (without the wait,
# the packages after the driver's are installed within milliseconds). In /run: a power cut
# takes it away.
FAULT_HOLD = "/run/hostcheck-fault-hold"


def held(script: str) -> str:
    """A stand-in driver package's post-install script: `script`, then the wait above."""
    return (
        f"{script}\n"
        f'while [ -e {FAULT_HOLD} ] && kill -0 "$(cat {FAULT_HOLD} 2>/dev/null)" 2>/dev/null; '
        "do sleep 0.05; done"
    )


def push_repo(fleet, host, repo: Path) -> None:
    """The stand-in repository onto a host at REPO_ON_HOST, replacing what was there: one tar
    stream over SSH (Ansible's copy of a folder runs its modules once per file: 5-14 s here)."""
    unpack = f"rm -rf {REPO_ON_HOST} && mkdir -p {REPO_ON_HOST} && tar -xf - -C {REPO_ON_HOST}"
    packed = subprocess.run(["tar", "-cf", "-", "-C", str(repo), "."], capture_output=True)
    assert packed.returncode == 0, packed.stderr.decode()
    pushed = fleet.ssh_bytes(host, unpack, packed.stdout)
    assert pushed.returncode == 0, f"{host.name}: {unpack}: {pushed.stderr.decode()}"


def fake_module(version: str, path: Path) -> None:
    """An nvidia.ko that modinfo reports as `version`."""
    with tempfile.TemporaryDirectory() as tmp:
        source, obj, info = Path(tmp, "m.c"), Path(tmp, "m.o"), Path(tmp, "modinfo")
        source.write_text("int hostcheck_fake_nvidia;\n")
        _sh("gcc", "-c", str(source), "-o", str(obj))
        info.write_bytes(f"version={version}\0name=nvidia\0license=NVIDIA\0".encode())
        path.parent.mkdir(parents=True, exist_ok=True)
        _sh(
            "objcopy",
            "--add-section",
            f".modinfo={info}",
            "--set-section-flags",
            ".modinfo=alloc,readonly",
            str(obj),
            str(path),
        )


def build_deb(
    out: Path,
    name: str,
    version: str,
    files: dict[str, Path] | None = None,
    postinst: str = "",
    depends: str = "",
) -> Path:
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp, "pkg")
        (root / "DEBIAN").mkdir(parents=True)
        (root / "DEBIAN" / "control").write_text(
            textwrap.dedent(f"""\
            Package: {name}
            Version: {version}
            Architecture: all
            Maintainer: hostcheck tests <tests@hostcheck.invalid>
            Description: stand-in for {name} in the hostcheck sandbox (no GPU here)
            """)
            + (f"Depends: {depends}\n" if depends else "")
        )
        if postinst:
            script = root / "DEBIAN" / "postinst"
            script.write_text(f"#!/bin/sh\nset -e\n{postinst}\n")
            script.chmod(0o755)
        for target, source in (files or {}).items():
            dest = root / target.lstrip("/")
            dest.parent.mkdir(parents=True, exist_ok=True)
            dest.write_bytes(source.read_bytes())
            dest.chmod(source.stat().st_mode & 0o777)
        deb = out / f"{name}_{version}_all.deb"
        _sh("dpkg-deb", "--root-owner-group", "-Zgzip", "--build", str(root), str(deb))
    return deb


def write_signed_repo(out: Path, debs: list[Path], fields: str, uid: str) -> bytes:
    """A flat apt repository of `debs` in out: Packages, a Release with `fields` (lines) and
    its hash, signed into InRelease with a fresh key; returns the armored public key."""
    packages = packages_index(debs)
    (out / "Packages").write_text(packages)
    digest = hashlib.sha256(packages.encode()).hexdigest()
    (out / "Release").write_text(
        f"Origin: hostcheck sandbox\n{fields}Date: {formatdate(usegmt=True)}\n"
        f"SHA256:\n {digest} {len(packages.encode())} Packages\n"
    )
    return sign_release(out, uid)


def sign_release(out: Path, uid: str) -> bytes:
    """Sign out/Release into out/InRelease with a fresh key; return the armored public key."""
    with tempfile.TemporaryDirectory() as home:
        env = {**os.environ, "GNUPGHOME": home}
        _sh(
            *("gpg", "--batch", "--passphrase", "", "--quick-gen-key", uid),
            *("ed25519", "sign", "never"),
            env=env,
        )
        _sh(
            *("gpg", "--batch", "--yes", "--clearsign"),
            *("-o", str(out / "InRelease"), str(out / "Release")),
            env=env,
        )
        return _sh("gpg", "--batch", "--armor", "--export", env=env).stdout


def packages_index(debs: list[Path]) -> str:
    stanzas = []
    for deb in debs:
        control = _sh("dpkg-deb", "-f", str(deb), text=True).stdout.strip()
        data = deb.read_bytes()
        stanzas.append(
            f"{control}\nFilename: ./{deb.name}\nSize: {len(data)}\n"
            f"SHA256: {hashlib.sha256(data).hexdigest()}\n"
        )
    return "\n".join(stanzas)


def build_repo(
    out: Path, kernel: str, driver_version: str = "550.54.15", headers: bool = True
) -> Path:
    """A flat apt repository like NVIDIA's CUDA one, signed; out/key.asc is its key."""
    out.mkdir(parents=True, exist_ok=True)
    branch = driver_version.split(".")[0]
    package_version = f"{driver_version}-1"
    module = out / "build" / "nvidia.ko"
    fake_module(driver_version, module)
    ko = {f"/lib/modules/{kernel}/updates/dkms/nvidia.ko": module}
    depmod = held(f"depmod {kernel}")
    texts = out / "build"
    for name, text in (
        ("daemon", STANDIN_DAEMON),
        ("persistenced.service", PERSISTENCED_UNIT),
        ("fabricmanager.service", FABRICMANAGER_UNIT),
    ):
        (texts / name).write_text(text)
        (texts / name).chmod(0o755)
    persistenced = f"nvidia-persistenced (= {package_version})"
    debs = [
        build_deb(out, f"nvidia-driver-pinning-{branch}", package_version),
        build_deb(out, "nvidia-open", package_version, ko, depmod, persistenced),
        build_deb(out, "cuda-drivers", package_version, ko, depmod, persistenced),
        build_deb(
            out,
            "nvidia-persistenced",
            package_version,
            {
                "/usr/bin/nvidia-persistenced": texts / "daemon",
                "/lib/systemd/system/nvidia-persistenced.service": texts / "persistenced.service",
            },
        ),
        build_deb(
            out,
            "nvidia-fabricmanager",
            package_version,
            {
                "/usr/bin/nv-fabricmanager": texts / "daemon",
                "/lib/systemd/system/nvidia-fabricmanager.service": texts / "fabricmanager.service",
            },
        ),
    ]
    if headers:
        debs.append(build_deb(out, f"linux-headers-{kernel}", "1.0"))
    key = write_signed_repo(
        out, debs, "Label: fake CUDA\n", "hostcheck sandbox repository <repo@hostcheck.invalid>"
    )
    (out / "key.asc").write_bytes(key)
    return out
