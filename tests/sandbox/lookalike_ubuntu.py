"""Ubuntu 22.04 and 24.04 look-alikes: a Debian root that Ansible takes for Ubuntu.

Ubuntu's archive cannot be reached from here, so an "Ubuntu" sandbox host is a Debian bookworm
root (SUITES) with Ubuntu's identity files (os-release, lsb-release, debian_version, read by
Ansible's distribution facts), apt over Debian's archive (the machine's debian.sources, bind-
mounted at run time) plus a local signed repository of stand-ins under Ubuntu's real package
names for what Ubuntu calls differently or Debian lacks (STANDINS, each with where its name was
confirmed in Ubuntu's own indexes, never from this project's vars), and an apt preferences file
that makes Debian-only names uninstallable, as they are on Ubuntu.

Both releases use bookworm: the debian.sources bind-mounted into every host names bookworm
suites only, and a trixie root fed bookworm's archive would be a mixed system that neither
Debian nor Ubuntu ships.

What a look-alike cannot show: Ubuntu's own package contents and dependency trees (stand-ins
depend on Debian's packages or carry Debian's files), Ubuntu's versions of everything else
(gcc, Python, glibc are bookworm's), Ubuntu's kernel and its signed precompiled modules (the
nvidia.ko here is an ELF file with a .modinfo section; nothing loads it), unattended-upgrades
and needrestart behaviour, and the libjpeg ABI (Ubuntu's libjpeg-turbo8 is libjpeg.so.8; the
stand-in carries Debian's libjpeg.so.62, so a wheel built here only runs on this look-alike).
"""

from __future__ import annotations

import re
import shutil
import subprocess
import tempfile
import textwrap
from dataclasses import dataclass, field
from pathlib import Path

from tests.sandbox.fakegpu import (
    FABRICMANAGER_UNIT,
    PERSISTENCED_UNIT,
    STANDIN_DAEMON,
    fake_module,
    held,
    write_signed_repo,
)

# Ubuntu version -> Debian suite of the root (see the module docstring for why bookworm).
SUITES: dict[str, str] = {"22.04": "bookworm", "24.04": "bookworm"}

# Ubuntu version -> (codename, codename words, point release, /etc/debian_version as Ubuntu has it:
# the Debian testing it was branched from, "<codename>/sid").
RELEASES: dict[str, tuple[str, str, str, str]] = {
    "22.04": ("jammy", "Jammy Jellyfish", "22.04.5", "bookworm/sid"),
    "24.04": ("noble", "Noble Numbat", "24.04.2", "trixie/sid"),
}

# Extra Debian packages the root needs beyond the fleet's base list: none. apt's own gpgv checks
# the stand-in repository's signature; kmod (depmod, modinfo) is in the base list.
ROOT_PACKAGES: tuple[str, ...] = ()

# Driver branch -> the upstream version the stand-ins carry (550.54.15 is the version Ubuntu's
# jammy archive carried, per manpages.ubuntu.com; 570.86.15 is from an Ubuntu apt listing of
# nvidia-firmware-570-server-570.86.15). The role's default branch is 570, tests often use 550.
DRIVER_VERSIONS: dict[str, str] = {"550": "550.54.15", "570": "570.86.15"}

REPO_DIR = "srv/sandbox-standins/apt"
KEY_FILE = "etc/apt/keyrings/sandbox-standins.asc"
SOURCES_FILE = "etc/apt/sources.list.d/sandbox-standins.sources"
PREFERENCES_FILE = "etc/apt/preferences.d/sandbox-ubuntu-lookalike.pref"

# Debian-only names that Ubuntu does not have but a wrong Ubuntu vars file could plausibly use:
# Pin-Priority -1 makes them uninstallable, so such a name fails here as on real Ubuntu.
# libjpeg62-turbo(-dev): Ubuntu builds libjpeg-turbo with the libjpeg 8 ABI and names the packages
# libjpeg-turbo8(-dev) (Debian bug 1089017 by Jeremy Bicha, Ubuntu's packager, quotes Ubuntu's
# packaging). linux-image-amd64 / linux-headers-amd64: Debian's kernel metapackages; Ubuntu's are
# linux-image-generic / linux-headers-generic.
DEBIAN_ONLY: tuple[str, ...] = (
    "libjpeg62-turbo",
    "libjpeg62-turbo-dev",
    "linux-image-amd64",
    "linux-headers-amd64",
)

# Names the roles use on Ubuntu that Debian bookworm has under the same name, so no stand-in:
# pillow_simd's zlib1g-dev, libtiff-dev, libwebp-dev, libfreetype-dev, liblcms2-dev,
# libopenjp2-7-dev, build-essential, binutils, pkgconf, python3-dev, python3-venv (all in
# jammy and noble main; apt-cache policy on bookworm shows each with a candidate).
SAME_IN_DEBIAN: tuple[str, ...] = (
    "zlib1g-dev",
    "libtiff-dev",
    "libwebp-dev",
    "libfreetype-dev",
    "liblcms2-dev",
    "libopenjp2-7-dev",
    "build-essential",
    "binutils",
    "pkgconf",
    "python3-dev",
    "python3-venv",
)


@dataclass(frozen=True)
class Standin:
    """One stand-in .deb. Names and relations may hold {branch}, {kernel} and {driver}
    (the upstream driver version). `version` is "driver" (Ubuntu's form for the driver
    packages, <driver>-0ubuntu0.<release>.1), "kernel" (linux-restricted-modules carry the
    kernel's version), "repack" (the Debian package's version with the suffix "ubuntu0sandbox")
    or a literal. `repack` names the Debian package whose files and relations the stand-in
    takes over (it Conflicts with and Replaces that name, and Provides it unless
    provides_debian is false). `files` maps target paths to contents in _CONTENTS."""

    name: str
    version: str
    confirmed: str
    depends: tuple[str, ...] = ()
    conflicts: tuple[str, ...] = ()
    files: dict[str, str] = field(default_factory=dict)
    depmod: bool = False
    repack: str = ""
    provides_debian: bool = True
    per_branch: bool = True


_UNITS = "/lib/systemd/system"
_MODULE_DKMS = "/lib/modules/{kernel}/updates/dkms/nvidia.ko"
# Ubuntu's precompiled (linux-restricted-modules) location: /lib/modules/<k>/kernel/nvidia-<N>srv/
# (ubuntu-drivers-common's log on 6.8.0-48-generic lists "kernel/nvidia-550srv"; an Ubuntu
# 24.04 host reports /lib/modules/6.8.0-86-generic/kernel/nvidia-535srv/nvidia.ko).
_MODULE_PRECOMPILED = "/lib/modules/{kernel}/kernel/nvidia-{branch}srv/nvidia.ko"

_MANPAGE = (
    "manpages.ubuntu.com/manpages/jammy/man1/nvidia-persistenced.1.html: 'Provided by: "
    "nvidia-compute-utils-550-server_550.54.15-0ubuntu0.22.04.2_amd64'"
)
_QUESTING = "apt-cache search listing of Ubuntu questing (GitHub, find_string id 33279138368)"

STANDINS: tuple[Standin, ...] = (
    Standin(
        "libjpeg-turbo8",
        "repack",
        "Ubuntu's runtime libjpeg-turbo (jammy/noble main); Debian bug 1089017: 'Ubuntu's "
        "library name is libjpeg-turbo8'",
        repack="libjpeg62-turbo",
        per_branch=False,
    ),
    Standin(
        "libjpeg-turbo8-dev",
        "repack",
        "Ubuntu jammy/noble main (Debian bug 1089017 quotes Ubuntu's debian/libjpeg-turbo8 "
        "packaging; techoverflow: Debian has no libjpeg8-dev, only libjpeg62-turbo-dev)",
        repack="libjpeg62-turbo-dev",
        # not a provider of the Debian name, so `apt-get install libjpeg62-turbo-dev` fails
        provides_debian=False,
        per_branch=False,
    ),
    Standin(
        "libjpeg-dev",
        "1:2.1.5-2ubuntu0sandbox",
        "Ubuntu jammy/noble main (source libjpeg8-empty: libjpeg-dev -> libjpeg8-dev -> "
        "libjpeg-turbo8-dev); replaces Debian's libjpeg-dev, which needs libjpeg62-turbo-dev, "
        "so that Debian's libtiff-dev still installs; epoch 1 to outrank Debian's",
        depends=("libjpeg-turbo8-dev",),
        per_branch=False,
    ),
    Standin(
        "nvidia-kernel-common-{branch}-server",
        "driver",
        "jammy apt transcript (GitHub id 56971458480): linux-modules-nvidia-550-server-* "
        "'Depends: nvidia-kernel-common-550-server (>= 550.54.15)'",
    ),
    Standin(
        "nvidia-compute-utils-{branch}-server",
        "driver",
        _MANPAGE + " (the package that ships nvidia-persistenced); noble: dpkg -l on 24.04 "
        "(GitHub id 67197419148) 'nvidia-compute-utils-550-server 550.144.03-0ubuntu0.24.04.1'",
        files={
            "/usr/bin/nvidia-persistenced": "daemon",
            _UNITS + "/nvidia-persistenced.service": "persistenced.service",
        },
    ),
    Standin(
        "nvidia-utils-{branch}-server",
        "driver",
        "jammy apt transcript (GitHub id 2730644313) 'nvidia-utils-550-server "
        "(550.144.03-0ubuntu0.22.04.1)'; noble: install script on 6.8.0-49-generic "
        "(id 19093256823)",
    ),
    Standin(
        "nvidia-dkms-{branch}-server",
        "driver",
        "jammy apt transcript (GitHub id 2730644313) 'nvidia-dkms-550-server "
        "(550.144.03-0ubuntu0.22.04.1)'",
        depends=("nvidia-kernel-common-{branch}-server (>= {driver})",),
        conflicts=("nvidia-dkms-{branch}-server-open",),
        files={_MODULE_DKMS: "module"},
        depmod=True,
    ),
    Standin(
        "nvidia-dkms-{branch}-server-open",
        "driver",
        "by Ubuntu's -server-open naming (nvidia-headless-550-server-open pulls it); not seen "
        "in an index excerpt itself",
        depends=("nvidia-kernel-common-{branch}-server (>= {driver})",),
        conflicts=("nvidia-dkms-{branch}-server",),
        files={_MODULE_DKMS: "module"},
        depmod=True,
    ),
    Standin(
        "nvidia-headless-no-dkms-{branch}-server",
        "driver",
        "apt glob listings on Ubuntu (GitHub ids 58845507354, 56722029818); " + _QUESTING,
        depends=(
            "nvidia-kernel-common-{branch}-server (= {version})",
            "nvidia-compute-utils-{branch}-server (= {version})",
        ),
    ),
    Standin(
        "nvidia-headless-no-dkms-{branch}-server-open",
        "driver",
        _QUESTING + ": 'NVIDIA headless metapackage - no DKMS (open kernel module)'",
        depends=(
            "nvidia-kernel-common-{branch}-server (= {version})",
            "nvidia-compute-utils-{branch}-server (= {version})",
        ),
    ),
    Standin(
        "nvidia-headless-{branch}-server",
        "driver",
        _QUESTING + ": 'nvidia-headless-550-server ... NVIDIA headless metapackage'",
        depends=(
            "nvidia-headless-no-dkms-{branch}-server (= {version})",
            "nvidia-dkms-{branch}-server (= {version})",
        ),
    ),
    Standin(
        "nvidia-headless-{branch}-server-open",
        "driver",
        _QUESTING + ": 'nvidia-headless-550-server-open ... (open kernel module)'",
        depends=(
            "nvidia-headless-no-dkms-{branch}-server-open (= {version})",
            "nvidia-dkms-{branch}-server-open (= {version})",
        ),
    ),
    Standin(
        "linux-modules-nvidia-{branch}-server-{kernel}",
        "kernel",
        "jammy apt transcript (GitHub id 56971458480) "
        "'linux-modules-nvidia-550-server-5.15.0-106-generic'",
        depends=("nvidia-kernel-common-{branch}-server (>= {driver})",),
        conflicts=("linux-modules-nvidia-{branch}-server-open-{kernel}",),
        files={_MODULE_PRECOMPILED: "module"},
        depmod=True,
    ),
    Standin(
        "linux-modules-nvidia-{branch}-server-open-{kernel}",
        "kernel",
        "jammy apt transcript (id 56971458480) 'linux-modules-nvidia-550-server-open-5.15.0-106-"
        "generic'; noble script (id 19093256823) '...-550-server-open-6.8.0-49-generic'",
        depends=("nvidia-kernel-common-{branch}-server (>= {driver})",),
        conflicts=("linux-modules-nvidia-{branch}-server-{kernel}",),
        files={_MODULE_PRECOMPILED: "module"},
        depmod=True,
    ),
    Standin(
        "nvidia-fabricmanager-{branch}",
        "driver",
        "jammy: 'ubuntu-drivers install --gpgpu nvidia:550-server' then 'apt install "
        "nvidia-fabricmanager-550 libnvidia-nscq-550' (GitHub ids 18031540951, 18731334182); "
        "Launchpad bug 2129682 (Ubuntu's fabric-manager packages depend on "
        "nvidia-kernel-common-<N>-server)",
        depends=("nvidia-kernel-common-{branch}-server (>= {driver})",),
        files={
            "/usr/bin/nv-fabricmanager": "daemon",
            _UNITS + "/nvidia-fabricmanager.service": "fabricmanager.service",
        },
    ),
    Standin(
        "libnvidia-nscq-{branch}",
        "driver",
        "as nvidia-fabricmanager-550 (same transcripts); Launchpad bug 2129682 names "
        "libnvidia-nscq among Ubuntu's support packages",
        depends=("nvidia-kernel-common-{branch}-server (>= {driver})",),
    ),
    Standin(
        "linux-headers-{kernel}",
        "0sandbox1",
        "Ubuntu's per-kernel header packages are linux-headers-<release> (e.g. install scripts "
        "'apt-get install linux-headers-\"$(uname -r)\"', GitHub id 10168250364); empty here "
        "like fakegpu's: no kernel tree (DKMS does not really build)",
        per_branch=False,
    ),
)

_CONTENTS: dict[str, str] = {
    "daemon": STANDIN_DAEMON,
    "persistenced.service": PERSISTENCED_UNIT,
    "fabricmanager.service": FABRICMANAGER_UNIT,
}

# Ubuntu's systemd ships ondemand.service (Type=idle; sets the ondemand/powersave governor late
# in boot; askubuntu 1021748: "by default during boot up the ondemand service is executed").
# Stand-in with the same name, description and ordering semantics; it tries what Ubuntu's
# script does and ignores the read-only /sys of sandbox hosts.
ONDEMAND_UNIT = textwrap.dedent("""\
    # hostcheck sandbox stand-in for the unit Ubuntu's systemd package ships.
    [Unit]
    Description=Set the CPU Frequency Scaling governor
    ConditionVirtualization=no
    ConditionPathExists=/sys/devices/system/cpu/online

    [Service]
    Type=idle
    ExecStart=/lib/systemd/ondemand

    [Install]
    WantedBy=multi-user.target
    """)
ONDEMAND_SCRIPT = textwrap.dedent("""\
    #!/bin/sh
    # hostcheck sandbox stand-in for Ubuntu's /lib/systemd/ondemand: pick ondemand, interactive
    # or powersave (whichever the cpufreq driver offers) for every CPU; failures are ignored.
    available=/sys/devices/system/cpu/cpu0/cpufreq/scaling_available_governors
    [ -f "$available" ] || exit 0
    for governor in ondemand interactive powersave; do
        if grep -qw "$governor" "$available"; then
            for cpu in /sys/devices/system/cpu/cpu[0-9]*/cpufreq/scaling_governor; do
                echo "$governor" 2>/dev/null > "$cpu" || true
            done
            break
        fi
    done
    exit 0
    """)


def _sh(*argv: str, **options) -> subprocess.CompletedProcess:
    return subprocess.run(argv, check=True, capture_output=True, **options)


def _fill(text: str, **values: str) -> str:
    for key, value in values.items():
        text = text.replace("{" + key + "}", value)
    return text


def _kernel_version(kernel: str) -> str:
    """A Debian version for linux-modules-nvidia-*-<kernel> from the kernel release."""
    match = re.match(r"[0-9]+(?:\.[0-9]+)*", kernel)
    return f"{match.group(0) if match else '0'}-0sandbox1"


def _control(fields: dict[str, str]) -> str:
    return "".join(f"{key}: {value}\n" for key, value in fields.items() if value)


def _build(out: Path, fields: dict[str, str], files: dict[str, bytes], postinst: str) -> Path:
    """A binary .deb with the given control fields and files (mode 0755 under bin/)."""
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp, "pkg")
        (root / "DEBIAN").mkdir(parents=True)
        (root / "DEBIAN" / "control").write_text(_control(fields))
        if postinst:
            script = root / "DEBIAN" / "postinst"
            script.write_text(f"#!/bin/sh\nset -e\n{postinst}\n")
            script.chmod(0o755)
        for target, data in files.items():
            dest = root / target.lstrip("/")
            dest.parent.mkdir(parents=True, exist_ok=True)
            dest.write_bytes(data)
            dest.chmod(0o755 if "/bin/" in target or data.startswith(b"#!") else 0o644)
        deb = out / f"{fields['Package']}_{fields['Version']}_{fields['Architecture']}.deb"
        _sh("dpkg-deb", "--root-owner-group", "-Zgzip", "--build", str(root), str(deb))
    return deb


def _relations(value: str, renames: dict[str, str]) -> str:
    """Debian relation field with package names renamed (Debian name -> Ubuntu stand-in)."""
    out = []
    for alternative in value.split(","):
        names = []
        for part in alternative.split("|"):
            part = part.strip()
            name, _, rest = part.partition(" ")
            base, colon, arch = name.partition(":")
            names.append(renames.get(base, base) + colon + arch + (" " + rest if rest else ""))
        out.append(" | ".join(names))
    return ", ".join(out)


def _repack(
    out: Path, source: Path, name: str, renames: dict[str, str], provide: bool = True
) -> Path:
    """The Debian .deb `source` under the Ubuntu name `name`: same files, renamed relations,
    Provides/Conflicts/Replaces the Debian name (so Debian packages that depend on it install)."""
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp, "pkg")
        _sh("dpkg-deb", "-R", str(source), str(root))
        control = (root / "DEBIAN" / "control").read_text()
        fields: dict[str, str] = {}
        key = ""
        for line in control.splitlines():
            if line[:1] in (" ", "\t") and key:
                fields[key] += "\n" + line
            elif ":" in line:
                key, _, value = line.partition(":")
                fields[key] = value.strip()
        debian_name, debian_version = fields["Package"], fields["Version"]
        version = f"{debian_version}ubuntu0sandbox"  # keeps the epoch, if any
        fields["Package"] = name
        fields["Version"] = version
        fields.pop("Source", None)
        for relation in ("Depends", "Pre-Depends", "Recommends", "Suggests"):
            if relation in fields:
                fields[relation] = _relations(fields[relation], renames).replace(
                    f"(= {debian_version})", f"(= {version})"
                )
        provided = f"{debian_name} (= {debian_version})"
        if provide:
            fields["Provides"] = ", ".join(filter(None, [fields.get("Provides", ""), provided]))
        for relation in ("Conflicts", "Replaces"):
            fields[relation] = ", ".join(filter(None, [fields.get(relation, ""), debian_name]))
        fields["Description"] = (
            f"hostcheck sandbox stand-in: Debian's {debian_name} under Ubuntu's name {name}\n"
            " The files are Debian bookworm's; only the name and relations are Ubuntu's."
        )
        (root / "DEBIAN" / "control").write_text(_control(fields))
        deb = out / f"{name}_{version.split(':')[-1]}_{fields['Architecture']}.deb"
        _sh("dpkg-deb", "--root-owner-group", "-Zgzip", "--build", str(root), str(deb))
    return deb


def _download(names: list[str], into: Path) -> dict[str, Path]:
    """Debian's .debs of `names` (the host's apt lists; same debian.sources as the roots)."""
    into.mkdir(parents=True, exist_ok=True)
    _sh("apt-get", "download", *names, cwd=str(into))
    found = {}
    for name in names:
        matches = sorted(into.glob(f"{name}_*.deb"))
        if not matches:
            raise RuntimeError(f"apt-get download {name} left no .deb in {into}")
        found[name] = matches[-1]
    return found


def standin_names(kernel: str, branches: tuple[str, ...] = tuple(DRIVER_VERSIONS)) -> list[str]:
    """Every package name the repository holds for `kernel` and `branches`."""
    names = []
    for standin in STANDINS:
        for branch in branches if standin.per_branch else ("",):
            name = _fill(standin.name, branch=branch, kernel=kernel)
            if name not in names:
                names.append(name)
    return names


def build_repo(
    out: Path, version: str, kernel: str, branches: tuple[str, ...] = tuple(DRIVER_VERSIONS)
) -> bytes:
    """The signed flat repository of STANDINS in `out`; returns its armored public key."""
    release = version
    out.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        repacks = [s.repack for s in STANDINS if s.repack]
        sources = _download(repacks, work / "debian") if repacks else {}
        renames = {s.repack: s.name for s in STANDINS if s.repack}
        debs = []
        for standin in STANDINS:
            if standin.repack:
                source = sources[standin.repack]
                debs.append(_repack(out, source, standin.name, renames, standin.provides_debian))
                continue
            for branch in branches if standin.per_branch else ("",):
                driver = DRIVER_VERSIONS.get(branch, "")
                if standin.version == "driver":
                    package_version = f"{driver}-0ubuntu0.{release}.1"
                elif standin.version == "kernel":
                    package_version = _kernel_version(kernel)
                else:
                    package_version = standin.version
                values = {
                    "branch": branch,
                    "kernel": kernel,
                    "driver": driver,
                    "version": f"{driver}-0ubuntu0.{release}.1",
                }
                files: dict[str, bytes] = {}
                for target, content in standin.files.items():
                    if content == "module":
                        module = work / f"nvidia-{driver}.ko"
                        if not module.exists():
                            fake_module(driver, module)
                        files[_fill(target, **values)] = module.read_bytes()
                    else:
                        files[_fill(target, **values)] = _CONTENTS[content].encode()
                name = _fill(standin.name, **values)
                fields = {
                    "Package": name,
                    "Version": package_version,
                    "Architecture": "all",
                    "Maintainer": "hostcheck tests <tests@hostcheck.invalid>",
                    "Depends": ", ".join(_fill(d, **values) for d in standin.depends),
                    "Conflicts": ", ".join(_fill(c, **values) for c in standin.conflicts),
                    "Description": f"stand-in for Ubuntu's {name} in the hostcheck sandbox\n"
                    f" Confirmed in Ubuntu's indexes: {standin.confirmed}.",
                }
                postinst = held(f"depmod {kernel} || true") if standin.depmod else ""
                debs.append(_build(out, fields, files, postinst))
    return write_signed_repo(
        out,
        sorted(debs),
        "Label: Ubuntu stand-ins\n"
        f"Description: packages under Ubuntu {version}'s names for the look-alike\n",
        "hostcheck sandbox Ubuntu stand-ins <ubuntu-standins@hostcheck.invalid>",
    )


def _os_release(version: str) -> str:
    codename, words, point, _ = RELEASES[version]
    return textwrap.dedent(f"""\
        PRETTY_NAME="Ubuntu {point} LTS"
        NAME="Ubuntu"
        VERSION_ID="{version}"
        VERSION="{point} LTS ({words})"
        VERSION_CODENAME={codename}
        ID=ubuntu
        ID_LIKE=debian
        HOME_URL="https://www.ubuntu.com/"
        SUPPORT_URL="https://help.ubuntu.com/"
        BUG_REPORT_URL="https://bugs.launchpad.net/ubuntu/"
        PRIVACY_POLICY_URL="https://www.ubuntu.com/legal/terms-and-policies/privacy-policy"
        UBUNTU_CODENAME={codename}
        """) + ("LOGO=ubuntu-logo\n" if version >= "24.04" else "")


def _divert(root: Path, path: str) -> None:
    """Keep base-files upgrades from putting Debian's file back (dpkg-divert --local)."""
    _sh(
        "chroot",
        str(root),
        "dpkg-divert",
        "--local",
        "--rename",
        "--divert",
        f"{path}.debian",
        "--add",
        path,
    )


def customize(
    root: Path,
    version: str,
    kernel: str,
    branches: tuple[str, ...] = tuple(DRIVER_VERSIONS),
) -> None:
    """Turn the Debian root `root` into the Ubuntu `version` look-alike for `kernel`."""
    if version not in RELEASES:
        raise ValueError(f"no Ubuntu look-alike for {version!r}: one of {sorted(RELEASES)}")
    codename, _, point, debian_version = RELEASES[version]
    root = Path(root)
    # Identity: Ansible's distribution facts read /etc/os-release (ID, VERSION_ID,
    # VERSION_CODENAME), and /etc/lsb-release for ansible_lsb when lsb_release is absent.
    # The Debian parser of those facts must not see the word "Debian" in these files.
    for path in ("usr/lib/os-release", "etc/debian_version", "etc/issue", "etc/issue.net"):
        if (root / path).exists() and not (root / f"{path}.debian").exists():
            _divert(root, "/" + path)
    (root / "usr/lib/os-release").write_text(_os_release(version))
    etc_os_release = root / "etc/os-release"
    if etc_os_release.is_symlink() or etc_os_release.exists():
        etc_os_release.unlink()
    etc_os_release.symlink_to("../usr/lib/os-release")
    (root / "etc/lsb-release").write_text(
        f"DISTRIB_ID=Ubuntu\nDISTRIB_RELEASE={version}\nDISTRIB_CODENAME={codename}\n"
        f'DISTRIB_DESCRIPTION="Ubuntu {point} LTS"\n'
    )
    (root / "etc/debian_version").write_text(debian_version + "\n")
    (root / "etc/issue").write_text(f"Ubuntu {point} LTS \\n \\l\n\n")
    (root / "etc/issue.net").write_text(f"Ubuntu {point} LTS\n")

    # The stand-in repository, signed, with its key in the root.
    repo = root / REPO_DIR
    if repo.exists():
        shutil.rmtree(repo)
    key = build_repo(repo, version, kernel, branches)
    for path in repo.rglob("*"):
        path.chmod(0o755 if path.is_dir() else 0o644)
    for parent in (repo, *repo.parents):
        if parent == root:
            break
        parent.chmod(0o755)
    key_path = root / KEY_FILE
    key_path.parent.mkdir(parents=True, exist_ok=True)
    key_path.write_bytes(key)
    key_path.chmod(0o644)
    (root / SOURCES_FILE).write_text(
        textwrap.dedent(f"""\
        # Stand-ins under Ubuntu {version}'s package names (tests/sandbox/lookalike_ubuntu.py).
        Types: deb
        URIs: file:/{REPO_DIR}
        Suites: /
        Signed-By: /{KEY_FILE}
        """)
    )
    pins = "\n".join(f"Package: {name}\nPin: version *\nPin-Priority: -1\n" for name in DEBIAN_ONLY)
    preferences = root / PREFERENCES_FILE
    preferences.parent.mkdir(parents=True, exist_ok=True)
    preferences.write_text(
        "# Debian-only names: Ubuntu has no such package, so none installs here either.\n" + pins
    )

    # Ubuntu's systemd ships ondemand.service, enabled (see ONDEMAND_UNIT).
    unit = root / "lib/systemd/system/ondemand.service"
    unit.write_text(ONDEMAND_UNIT)
    script = root / "lib/systemd/ondemand"
    script.write_text(ONDEMAND_SCRIPT)
    script.chmod(0o755)
    wants = root / "etc/systemd/system/multi-user.target.wants"
    wants.mkdir(parents=True, exist_ok=True)
    link = wants / "ondemand.service"
    if not link.is_symlink():
        link.symlink_to("/lib/systemd/system/ondemand.service")
