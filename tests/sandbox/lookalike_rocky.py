"""Rocky Linux 8 and 9 look-alikes: a Debian root that Ansible gathers as Rocky (os_family
RedHat, pkg_mgr dnf), whose package manager is Debian's dnf and rpm over a local, signed
repository of stand-in RPMs under the names Rocky's own BaseOS/AppStream (and NVIDIA's CUDA
repository) give them. A stand-in carries metadata only, or tiny files where a role needs them
(a systemd unit, a fake nvidia.ko); the real programs and headers come from the Debian packages
in ROOT_PACKAGES. What a look-alike cannot show: Rocky's own binaries and versions (python3 is
Debian's 3.11, also on "EL 8"), SELinux, authselect itself (its files are written as its
`minimal` profile writes them), EPEL (the DKMS kmod stand-ins do not require dkms), a DKMS
build, or a kernel of its own (kernel-devel stands in for the running kernel).
"""

from __future__ import annotations

import os
import shutil
import subprocess
import tempfile
import textwrap
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, replace
from pathlib import Path

# Debian packages the look-alike root needs on top of the common ones (tests/sandbox/rootfs.py)
ROOT_PACKAGES: tuple[str, ...] = (
    "rpm",
    "dnf",
    "python3-dnf",
    "python3-libdnf",
    "python3-rpm",
    "python3-gpg",
    "dnf-plugins-core",  # the real versionlock plugin (python3-dnf-plugin-versionlock stands in)
    "gnupg",  # dnf imports repository keys with it
    "tuned",  # sysctl_tuning runs tuned and tuned-adm on RedHat
    "dracut-core",  # dataset_staging and nvidia_driver regenerate the initramfs with dracut
    "kmod",
    "build-essential",  # gcc, make, binutils: pillow-simd is compiled
    "pkgconf",
    "python3-dev",
    "libjpeg62-turbo-dev",
    "zlib1g-dev",
    "libtiff-dev",
    "libfreetype-dev",
    "python3.11",
    "python3.11-venv",
    "python3-pip",
    "python3-packaging",
    "libpam-modules",
    "libpam-pwquality",  # pam_pwquality.so, in authselect's system-auth
    "libpam-systemd",
)

REPO_DIR = "/srv/sandbox-standins/rpm"  # inside the root
CODENAME = {8: "Green Obsidian", 9: "Blue Onyx"}
POINT_RELEASE = {8: "8.10", 9: "9.5"}
KEY_NAME = "hostcheck sandbox look-alike <repo@hostcheck.invalid>"

_EL9_OL = "EL 9 name in an Oracle Linux 9 (RHEL 9 rebuild) dnf bootstrap script (code search)"
_NV_YUM = (
    "NVIDIA/yum-packaging-precompiled-kmod README.md (packages copied from "
    "developer.download.nvidia.com/compute/cuda/repos/rhel8/x86_64/)"
)
_NV_SPEC = "NVIDIA/yum-packaging-nvidia-driver nvidia-driver.spec (Epoch 3, subpackages)"
_COMMON = "standard RHEL/Rocky BaseOS package name (not re-confirmed from an index here)"


@dataclass(frozen=True)
class StandIn:
    name: str
    version: str  # "{osver}" = the point release, e.g. 9.5
    release: str  # "{dist}" = .el8 / .el9
    arch: str = "x86_64"
    provides: tuple[str, ...] = ()
    requires: tuple[str, ...] = ()
    files: tuple[tuple[str, str | bytes, int], ...] = ()  # (path, content, mode)
    installed: bool = False  # registered as installed in the root's rpm database
    majors: tuple[int, ...] = (8, 9)
    confirmed: str = _COMMON
    epoch: int = 0
    post: str = ""


def _base(name: str, version: str, confirmed: str = _COMMON, **more) -> StandIn:
    return StandIn(name, version, "1{dist}", installed=True, confirmed=confirmed, **more)


def _pkg(name: str, version: str, confirmed: str = _COMMON, **more) -> StandIn:
    return StandIn(name, version, "1{dist}", confirmed=confirmed, **more)


STANDINS: tuple[StandIn, ...] = (
    # what a minimal Rocky install has: registered installed, so dnf says "Nothing to do"
    StandIn(
        "rocky-release",
        "{osver}",
        "1.0{dist}.rocky",
        arch="noarch",
        provides=(
            "system-release = {osver}",
            "system-release(releasever) = {major}",
            "redhat-release = {osver}",
            "centos-release = {osver}",
            "base-module(platform:el{major})",
        ),
        installed=True,
        confirmed="Rocky BaseOS: rocky-release provides system-release(releasever) "
        "(git.rockylinux.org rpms/rocky-release spec; dnf needs it for $releasever)",
    ),
    _base("rocky-gpg-keys", "{osver}", arch="noarch"),
    _base("rocky-repos", "{osver}", arch="noarch"),
    _base("basesystem", "11", arch="noarch"),
    _base("filesystem", "3.16"),
    _base("setup", "2.13.7", arch="noarch"),
    _base("glibc", "2.34"),
    _base("bash", "5.1.8", provides=("/bin/sh", "/bin/bash", "/usr/bin/sh", "/usr/bin/bash")),
    _base("coreutils", "8.32"),
    _base("shadow-utils", "4.9"),
    _base("systemd", "252", provides=("systemd-udev",)),
    _base("dbus", "1.12.20"),
    _base("pam", "1.5.1"),
    _base("openssh", "8.7p1"),
    _base("openssh-server", "8.7p1", requires=("openssh",)),
    _base("openssh-clients", "8.7p1", requires=("openssh",)),
    _base("sudo", "1.9.5p2"),
    _base("util-linux", "2.37.4", confirmed=_EL9_OL),
    _base("procps-ng", "3.3.17"),
    _base("kmod", "28", provides=("/usr/sbin/depmod", "/usr/sbin/modprobe")),
    _base("iproute", "6.2.0"),
    _base("e2fsprogs", "1.46.5", confirmed=_EL9_OL.replace("EL 9 name", "EL 9 name (xfsprogs)")),
    _base("xfsprogs", "6.3.0", confirmed=_EL9_OL),
    _base("dracut", "057"),
    _base("rpm", "4.16.1.3"),
    _base("dnf", "4.14.0", arch="noarch", provides=("yum",)),
    _base("python3-dnf", "4.14.0", arch="noarch"),
    _base("dnf-plugins-core", "4.3.0", arch="noarch", confirmed=_EL9_OL),
    _base("python3-dnf-plugins-core", "4.3.0", arch="noarch"),
    _base("zlib", "1.2.11"),
    _base("libjpeg-turbo", "2.0.90"),
    # EL 9: python3 is 3.9 and installed (dnf runs on it)
    _base(
        "python3",
        "3.9.18",
        majors=(9,),
        provides=("python3.9", "python(abi) = 3.9"),
        confirmed=_EL9_OL,
    ),
    _base("python3-libs", "3.9.18", majors=(9,)),
    # EL 8: dnf runs on platform-python (3.6); hosts are managed with python3.11, so a host
    # Ansible can reach has it installed already (AppStream 8.8+)
    _base("platform-python", "3.6.8", majors=(8,)),
    _base(
        "python3.11",
        "3.11.7",
        majors=(8,),
        provides=("python(abi) = 3.11",),
        confirmed="RHEL 8 AppStream python3.11 (Oracle Linux 8 ELSA package list, code "
        "search: python3.11-*-el8 references)",
    ),
    # not installed: what the roles install
    _pkg("python3", "3.6.8", majors=(8,), provides=("python36",)),
    _pkg("python3-packaging", "20.9", arch="noarch", majors=(9,)),
    _pkg("python3-devel", "3.9.18", majors=(9,), requires=("python3",)),
    _pkg("python3-devel", "3.6.8", majors=(8,), requires=("python3",)),
    _pkg("python3.11-pip", "22.3.1", arch="noarch", majors=(8,), requires=("python3.11",)),
    _pkg("python3.11-setuptools", "65.5.1", arch="noarch", majors=(8,)),
    _pkg(
        "python3.11-packaging",
        "23.2",
        arch="noarch",
        majors=(8,),
        requires=("python3.11",),
        confirmed="Oracle Linux 8 ELSA (RHEL 8 rebuild) package list names "
        "python3.11-packaging-23.2-1.0.1.el8 (code search)",
    ),
    _pkg("python3.11-devel", "3.11.7", majors=(8,), requires=("python3.11",)),
    _pkg("gcc", "11.4.1", requires=("binutils", "cpp")),
    _pkg("cpp", "11.4.1"),
    _pkg("make", "4.3", epoch=1),
    _pkg("binutils", "2.35.2"),
    _pkg("pkgconf", "1.7.3"),
    _pkg("pkgconf-pkg-config", "1.7.3", requires=("pkgconf",), provides=("pkgconfig",)),
    _pkg("zlib-devel", "1.2.11", requires=("zlib",)),
    _pkg("libjpeg-turbo-devel", "2.0.90", requires=("libjpeg-turbo",)),
    _pkg("libtiff", "4.4.0"),
    _pkg("libtiff-devel", "4.4.0", requires=("libtiff",)),
    _pkg("freetype", "2.10.4"),
    _pkg("freetype-devel", "2.10.4", requires=("freetype",)),
    _pkg("tuned", "2.21.0", arch="noarch", confirmed=_EL9_OL),
    _pkg("mdadm", "4.2", confirmed=_EL9_OL),
    _pkg("rsync", "3.2.3", confirmed=_EL9_OL),
    _pkg("pciutils", "3.7.0"),
    _pkg(
        "python3-dnf-plugin-versionlock",
        "4.3.0",
        arch="noarch",
        requires=("python3-dnf-plugins-core",),
        provides=("dnf-command(versionlock)",),
        confirmed=_EL9_OL + "; also the yum-plugin-versionlock -> "
        "python3-dnf-plugin-versionlock row of RHEL 8's yum-to-dnf table",
    ),
)


def _kernel_release(kernel: str) -> tuple[str, str]:
    version, _, release = kernel.partition("-")
    return version, (release.replace("-", "_") or "1")


def _kernel_core(kernel: str) -> StandIn:
    """The running kernel, installed (hosts share this machine's kernel)."""
    version, release = _kernel_release(kernel)
    return StandIn(
        "kernel-core",
        version,
        release,
        provides=(f"kernel-uname-r = {version}-{release}", f"kernel-core-{kernel}", "kernel"),
        installed=True,
        confirmed="RHEL 8/9 BaseOS kernel-core provides kernel-uname-r",
    )


def _kernel_devel(kernel: str) -> StandIn:
    """AppStream's kernel-devel for the running kernel (the hosts share this machine's)."""
    version, release = _kernel_release(kernel)
    return StandIn(
        "kernel-devel",
        version,
        release,
        # rpm allows one '-' in a version: a Debian-style uname (6.1.0-18-amd64) is provided
        # by name, kernel-devel-<uname -r>, which is what dnf is asked for
        provides=(f"kernel-devel-uname-r = {version}-{release}", f"kernel-devel-{kernel}"),
        files=((f"/usr/src/kernels/{kernel}/Makefile", "# stand-in: no kernel sources\n", 0o644),),
        confirmed="RHEL AppStream kernel-devel provides kernel-devel-uname-r (the DKMS "
        "convention); RHEL's own kernel-devel-<uname -r> spelling is name-version-release",
    )


def _sh(*argv: str, **options) -> subprocess.CompletedProcess:
    done = subprocess.run(argv, capture_output=True, text=True, check=False, **options)
    if done.returncode != 0:
        raise RuntimeError(f"{' '.join(argv)} failed ({done.returncode}):\n{done.stderr[-2000:]}")
    return done


def _expand(text: str, major: int) -> str:
    return text.format(major=major, osver=POINT_RELEASE.get(major, str(major)), dist=f".el{major}")


def build_rpm(out: Path, pkg: StandIn, major: int) -> Path:
    """One stand-in RPM in `out` (rpmbuild, nothing compiled, no dependency generators)."""
    with tempfile.TemporaryDirectory() as tmp:
        top = Path(tmp)
        stage = top / "stage"
        stage.mkdir()
        for path, content, mode in pkg.files:
            target = stage / path.lstrip("/")
            target.parent.mkdir(parents=True, exist_ok=True)
            if isinstance(content, bytes):
                target.write_bytes(content)
            else:
                target.write_text(content)
            target.chmod(mode)
        lines = [
            f"Name: {pkg.name}",
            f"Version: {_expand(pkg.version, major)}",
            f"Release: {_expand(pkg.release, major)}",
            *([f"Epoch: {pkg.epoch}"] if pkg.epoch else []),
            f"Summary: hostcheck sandbox stand-in for {pkg.name}",
            "License: MIT",
            f"BuildArch: {pkg.arch}",
            "AutoReqProv: no",
            *(f"Provides: {_expand(p, major)}" for p in pkg.provides),
            *(f"Requires: {_expand(r, major)}" for r in pkg.requires),
            "%description",
            f"Stand-in for {pkg.name} in a Rocky {major} look-alike: the real files come from "
            "Debian packages.",
            "%install",
            f"mkdir -p %{{buildroot}} && cp -a {stage}/. %{{buildroot}}/",
        ]
        if pkg.post:
            lines += ["%post", pkg.post]
        lines += ["%files", *(path for path, _, _ in pkg.files)]
        spec = top / "stand-in.spec"
        spec.write_text("\n".join(lines) + "\n")
        _sh(
            "rpmbuild",
            "-bb",
            "--nodeps",
            "--quiet",
            "--target",
            pkg.arch,
            "--define",
            f"_topdir {top}",
            "--define",
            "_build_id_links none",
            "--define",
            "__os_install_post %{nil}",
            "--define",
            "debug_package %{nil}",
            "--define",
            "_binary_payload w2.gzdio",
            str(spec),
        )
        built = next((top / "RPMS").rglob("*.rpm"))
        out.mkdir(parents=True, exist_ok=True)
        return Path(shutil.copy2(built, out / built.name))


class _Signer:
    """A throw-away gpg key that signs RPMs (rpmsign) and repository metadata."""

    def __init__(self, home: Path) -> None:
        self.home = home
        self.env = {**os.environ, "GNUPGHOME": str(home)}
        home.mkdir(mode=0o700, parents=True, exist_ok=True)
        _sh(
            "gpg",
            "--batch",
            "--passphrase",
            "",
            "--quick-gen-key",
            KEY_NAME,
            "rsa2048",
            "sign",
            "never",
            env=self.env,
        )

    def public_key(self) -> str:
        return _sh("gpg", "--batch", "--armor", "--export", env=self.env).stdout

    def sign_rpms(self, rpms: list[Path]) -> None:
        gpg = shutil.which("gpg") or "/usr/bin/gpg"  # Debian's rpm expects gpg2
        _sh(
            "rpmsign",
            "--addsign",
            "--define",
            f"_gpg_name {KEY_NAME}",
            "--define",
            f"_gpg_path {self.home}",
            "--define",
            f"__gpg {gpg}",
            *map(str, rpms),
            env=self.env,
        )

    def sign_repomd(self, repodata: Path) -> None:
        _sh(
            "gpg",
            "--batch",
            "--yes",
            "--detach-sign",
            "--armor",
            "-o",
            str(repodata / "repomd.xml.asc"),
            str(repodata / "repomd.xml"),
            env=self.env,
        )


def _build_all(out: Path, packages: list[StandIn], major: int) -> list[Path]:
    with ThreadPoolExecutor(max_workers=min(8, os.cpu_count() or 2)) as pool:
        return list(pool.map(lambda pkg: build_rpm(out, pkg, major), packages))


def _make_repo(out: Path, rpms: list[Path], signer: _Signer) -> None:
    signer.sign_rpms(rpms)
    _sh("createrepo_c", "--quiet", "--no-database", str(out))


# --- identity ---------------------------------------------------------------------------


def _os_release(major: int) -> str:
    osver = POINT_RELEASE[major]
    cpe = "cpe:/o:rocky:rocky:9::baseos" if major == 9 else "cpe:/o:rocky:rocky:8:GA"
    return textwrap.dedent(f"""\
        NAME="Rocky Linux"
        VERSION="{osver} ({CODENAME[major]})"
        ID="rocky"
        ID_LIKE="rhel centos fedora"
        VERSION_ID="{osver}"
        PLATFORM_ID="platform:el{major}"
        PRETTY_NAME="Rocky Linux {osver} ({CODENAME[major]})"
        ANSI_COLOR="0;32"
        LOGO="fedora-logo-icon"
        CPE_NAME="{cpe}"
        HOME_URL="https://rockylinux.org/"
        BUG_REPORT_URL="https://bugs.rockylinux.org/"
        ROCKY_SUPPORT_PRODUCT="Rocky-Linux-{major}"
        ROCKY_SUPPORT_PRODUCT_VERSION="{osver}"
        REDHAT_SUPPORT_PRODUCT="Rocky Linux"
        REDHAT_SUPPORT_PRODUCT_VERSION="{osver}"
        """), cpe


def _write_identity(root: Path, major: int) -> None:
    text, cpe = _os_release(major)
    for path in (root / "etc/os-release", root / "usr/lib/os-release"):
        if path.is_symlink() or path.exists():
            path.unlink()
    (root / "usr/lib/os-release").write_text(text)
    (root / "etc/os-release").symlink_to("../usr/lib/os-release")
    (root / "etc/rocky-release").write_text(
        f"Rocky Linux release {POINT_RELEASE[major]} ({CODENAME[major]})\n"
    )
    (root / "etc/rocky-release-upstream").write_text(
        f"Derived from Red Hat Enterprise Linux {POINT_RELEASE[major]}\n"
    )
    for name in ("redhat-release", "system-release"):
        link = root / "etc" / name
        if link.is_symlink() or link.exists():
            link.unlink()
        link.symlink_to("rocky-release")
    (root / "etc/system-release-cpe").write_text(cpe + "\n")
    (root / "etc/debian_version").unlink(missing_ok=True)
    (root / "etc/issue").write_text("\\S\nKernel \\r on an \\m\n\n")


# --- PAM as authselect's minimal profile writes it ---------------------------------------

_SYSTEM_AUTH = """\
# Generated by authselect
# Do not modify this file manually, use authselect instead. Any user changes will be
# overwritten. You can stop authselect from managing your configuration by calling
# 'authselect opt-out'. See authselect(8) for more details.

auth        required                                     pam_env.so
auth        required                                     pam_faildelay.so delay=2000000
auth        sufficient                                   pam_unix.so nullok
auth        required                                     pam_deny.so

account     required                                     pam_unix.so

password    requisite                                    pam_pwquality.so local_users_only
password    sufficient                                   pam_unix.so yescrypt shadow nullok use_authtok
password    required                                     pam_deny.so

session     optional                                     pam_keyinit.so revoke
session     required                                     pam_limits.so
-session    optional                                     pam_systemd.so
session     [success=1 default=ignore]                   pam_succeed_if.so service in crond quiet use_uid
session     required                                     pam_unix.so
"""  # noqa: E501
_POSTLOGIN = """\
# Generated by authselect
# Do not modify this file manually, use authselect instead.

session optional                   pam_umask.so silent
session [success=1 default=ignore] pam_succeed_if.so service !~ gdm* service !~ su* quiet
session [default=1]                pam_lastlog.so nowtmp showfailed
session optional                   pam_lastlog.so silent noupdate showfailed
"""
_SERVICES = {
    "sshd": """\
#%PAM-1.0
auth       substack     password-auth
auth       include      postlogin
account    required     pam_sepermit.so
account    required     pam_nologin.so
account    include      password-auth
password   include      password-auth
# pam_selinux.so close should be the first session rule
session    required     pam_selinux.so close
session    required     pam_loginuid.so
# pam_selinux.so open should only be followed by sessions to be executed in the user context
session    required     pam_selinux.so open env_params
session    required     pam_namespace.so
session    optional     pam_keyinit.so force revoke
session    optional     pam_motd.so
session    include      password-auth
session    include      postlogin
""",
    "login": """\
#%PAM-1.0
auth       substack     system-auth
auth       include      postlogin
account    required     pam_nologin.so
account    include      system-auth
password   include      system-auth
# pam_selinux.so close should be the first session rule
session    required     pam_selinux.so close
session    required     pam_loginuid.so
# pam_selinux.so open should only be followed by sessions to be executed in the user context
session    required     pam_selinux.so open
session    required     pam_namespace.so
session    optional     pam_keyinit.so force revoke
session    include      system-auth
session    include      postlogin
-session   optional     pam_ck_connector.so
""",
    "su": """\
#%PAM-1.0
auth            required        pam_env.so
auth            sufficient      pam_rootok.so
auth            substack        system-auth
auth            include         postlogin
account         sufficient      pam_succeed_if.so uid = 0 use_uid quiet
account         include         system-auth
password        include         system-auth
session         include         system-auth
session         include         postlogin
session         optional        pam_xauth.so
""",
    "su-l": """\
#%PAM-1.0
auth            include         su
account         include         su
password        include         su
session         optional        pam_keyinit.so force revoke
session         include         su
""",
    "runuser": """\
#%PAM-1.0
auth            sufficient      pam_rootok.so
session         include         system-auth
""",
    "runuser-l": """\
#%PAM-1.0
auth            include         runuser
session         optional        pam_keyinit.so force revoke
-session        optional        pam_systemd.so
session         include         runuser
""",
    "sudo": """\
#%PAM-1.0
auth       include      system-auth
account    include      system-auth
password   include      system-auth
session    include      system-auth
""",
    "sudo-i": """\
#%PAM-1.0
auth       include      sudo
account    include      sudo
password   include      sudo
session    optional     pam_keyinit.so force revoke
session    include      sudo
""",
}


def _module_dir(root: Path) -> Path:
    for candidate in ("usr/lib/x86_64-linux-gnu/security", "lib/x86_64-linux-gnu/security"):
        if (root / candidate / "pam_unix.so").exists():
            return root / candidate
    raise RuntimeError(f"no PAM modules (pam_unix.so) in {root}")


def _write_pam(root: Path) -> None:
    pam_d = root / "etc/pam.d"
    authselect = root / "etc/authselect"
    authselect.mkdir(parents=True, exist_ok=True)
    (authselect / "authselect.conf").write_text("minimal\n")
    generated = {
        "system-auth": _SYSTEM_AUTH,
        "password-auth": _SYSTEM_AUTH,
        "postlogin": _POSTLOGIN,
        "fingerprint-auth": "auth required pam_deny.so\naccount required pam_deny.so\n",
        "smartcard-auth": "auth required pam_deny.so\naccount required pam_deny.so\n",
    }
    for name, text in generated.items():
        (authselect / name).write_text(text)
        link = pam_d / name
        if link.is_symlink() or link.exists():
            link.unlink()
        link.symlink_to(f"../authselect/{name}")
    for name, text in _SERVICES.items():
        (pam_d / name).write_text(text)
    modules = _module_dir(root)
    texts = [*generated.values(), *_SERVICES.values()]
    missing = {
        word
        for text in texts
        for line in text.splitlines()
        if line and not line.startswith("#") and not line.startswith("-")
        for word in line.split()
        if word.endswith(".so") and not (modules / word).exists()
    }
    if missing:
        raise RuntimeError(f"PAM modules missing from the root: {', '.join(sorted(missing))}")


# --- package manager ---------------------------------------------------------------------


def _repo_file(name: str, title: str, url: str, key: str) -> str:
    return textwrap.dedent(f"""\
        [{name}]
        name={title}
        baseurl={url}
        enabled=1
        gpgcheck=1
        repo_gpgcheck=0
        gpgkey={key}
        countme=0
        """)


def _write_dnf_config(root: Path, major: int) -> None:
    dnf = root / "etc/dnf"
    dnf.mkdir(parents=True, exist_ok=True)
    for stale in dnf.rglob("*.dpkg-new"):
        stale.rename(stale.with_suffix(""))
    (dnf / "dnf.conf").write_text(
        textwrap.dedent("""\
        [main]
        gpgcheck=1
        installonly_limit=3
        clean_requirements_on_remove=True
        best=True
        skip_if_unavailable=False
        reposdir=/etc/yum.repos.d
        """)
    )
    (dnf / "vars").mkdir(exist_ok=True)
    (dnf / "vars/contentdir").write_text("pub/rocky\n")
    (dnf / "vars/rltype").write_text("\n")
    for other in ("etc/yum/repos.d", "etc/distro.repos.d"):
        shutil.rmtree(root / other, ignore_errors=True)
    repos = root / "etc/yum.repos.d"
    shutil.rmtree(repos, ignore_errors=True)
    repos.mkdir(parents=True)
    key = f"file:///etc/pki/rpm-gpg/RPM-GPG-KEY-Rocky-{major}"
    url = f"file://{REPO_DIR}"
    # one local repository stands in for both of Rocky's (BaseOS and AppStream)
    (repos / "rocky.repo").write_text(
        _repo_file("baseos", f"Rocky Linux {major} - BaseOS (sandbox stand-ins)", url, key)
    )
    # Debian's rpm keeps its database in ~/.rpmdb; Rocky's is /var/lib/rpm
    (root / "etc/rpm").mkdir(parents=True, exist_ok=True)
    (root / "etc/rpm/macros.dbpath").write_text("%_dbpath /var/lib/rpm\n")
    (root / "etc/rpm/macros").write_text("%_dbpath /var/lib/rpm\n")


_PLUGINS = Path("usr/lib/python3/dist-packages/dnf-plugins")
# Debian's dnf-plugins-core ships plugins that Rocky packages separately: versionlock goes into
# its stand-in (so it works only once python3-dnf-plugin-versionlock is installed, as on
# Rocky); local and post-transaction-actions (not on a minimal Rocky) are removed.
_PLUGIN_FILES = {
    "python3-dnf-plugin-versionlock": (
        (str(_PLUGINS / "versionlock.py"), 0o644),
        ("etc/dnf/plugins/versionlock.conf", 0o644),
        ("etc/dnf/plugins/versionlock.list", 0o644),
    ),
}
_PLUGINS_REMOVED = (
    _PLUGINS / "local.py",
    Path("etc/dnf/plugins/local.conf"),
    _PLUGINS / "post-transaction-actions.py",
    Path("etc/dnf/plugins/post-transaction-actions.conf"),
)


def _with_plugin_files(root: Path, pkg: StandIn) -> StandIn:
    """`pkg` carrying the Debian plugin files it stands for (taken out of the root)."""
    if pkg.name not in _PLUGIN_FILES:
        return pkg
    files = []
    for relative, mode in _PLUGIN_FILES[pkg.name]:
        path = root / relative
        files.append((f"/{relative}", path.read_bytes(), mode))
        path.unlink()
    return replace(pkg, files=pkg.files + tuple(files))


def customize(root: Path, major: int, kernel: str) -> None:
    """Turn the Debian root `root` into the Rocky `major` look-alike (see the module text)."""
    if major not in POINT_RELEASE:
        raise ValueError(f"Rocky {major} is not a look-alike here (only 8 and 9)")
    root = Path(root)
    _write_identity(root, major)
    _write_pam(root)
    _write_dnf_config(root, major)
    for relative in _PLUGINS_REMOVED:
        (root / relative).unlink(missing_ok=True)
    for cache in (root / _PLUGINS / "__pycache__").glob("*.pyc"):
        if cache.name.split(".")[0] in ("versionlock", "local", "post-transaction-actions"):
            cache.unlink()
    repo = root / REPO_DIR.lstrip("/")
    shutil.rmtree(repo, ignore_errors=True)
    packages = [p for p in STANDINS if major in p.majors] + [_kernel_core(kernel)]
    packages = [_with_plugin_files(root, p) for p in packages]
    with tempfile.TemporaryDirectory() as tmp:
        signer = _Signer(Path(tmp, "gnupg"))
        rpms = _build_all(repo, packages, major)
        _make_repo(repo, rpms, signer)
        key_file = root / f"etc/pki/rpm-gpg/RPM-GPG-KEY-Rocky-{major}"
        key_file.parent.mkdir(parents=True, exist_ok=True)
        key_file.write_text(signer.public_key())
    # the "installed base": in the rpm database only (the files are Debian's)
    dbpath = root / "var/lib/rpm"
    dbpath.mkdir(parents=True, exist_ok=True)
    rpm = ("rpm", "--root", str(root), "--dbpath", "/var/lib/rpm")
    _sh(*rpm, "--initdb")
    _sh(*rpm, "--import", str(key_file))
    installed = [r for r, p in zip(rpms, packages) if p.installed]
    _sh(*rpm, "-i", "--justdb", "--nodeps", "--noscripts", "--notriggers", *map(str, installed))
    # tuned is not installed until a role installs it (Debian's postinst enabled the unit)
    _sh("systemctl", f"--root={root}", "disable", "tuned.service")


# --- NVIDIA's CUDA repository ------------------------------------------------------------


def _daemon(name: str) -> str:
    return f"#!/bin/sh\n# hostcheck sandbox stand-in for {name}: no GPU here\nexec sleep infinity\n"


def _unit(description: str, binary: str) -> str:
    return textwrap.dedent(f"""\
        [Unit]
        Description={description} (hostcheck sandbox stand-in)

        [Service]
        Type=simple
        ExecStart={binary}

        [Install]
        WantedBy=multi-user.target
        """)


def _modules_yaml(branch: str, driver_version: str, nevras: dict[str, str], stamp: str) -> str:
    """nvidia-driver module streams as NVIDIA's genmodules.py writes them (profiles default,
    ks, fm, src; the -dkms/-open streams name their kmod in the profiles)."""
    common = [
        "nvidia-driver",
        "nvidia-driver-libs",
        "nvidia-driver-cuda",
        "nvidia-driver-cuda-libs",
        "nvidia-driver-NVML",
        "nvidia-persistenced",
        "nvidia-modprobe",
        "nvidia-kmod-common",
        "dnf-plugin-nvidia",
        "cuda-drivers",
    ]
    streams = {
        f"{branch}-open": "kmod-nvidia-open-dkms",
        f"{branch}-dkms": "kmod-nvidia-latest-dkms",
        branch: f"kmod-nvidia-{driver_version}",
    }
    docs = []
    for stream, kmod in streams.items():
        default = ["nvidia-driver", "nvidia-driver-cuda", "nvidia-settings", kmod]
        if stream == branch:
            default = ["nvidia-driver", "nvidia-driver-cuda", "nvidia-settings"]
        profiles = {
            "default": [*default, "cuda-drivers"],
            "ks": default,
            "fm": [*default, "cuda-drivers", "nvidia-fabric-manager", f"libnvidia-nscq-{branch}"],
            "src": ["nvidia-kmod-common"],
        }
        wanted = [
            *common,
            kmod,
            "nvidia-settings",
            "nvidia-fabric-manager",
            f"libnvidia-nscq-{branch}",
        ]
        artifacts = [nevras[name] for name in wanted if name in nevras]
        lines = [
            "---",
            "document: modulemd",
            "version: 2",
            "data:",
            "  name: nvidia-driver",
            f'  stream: "{stream}"',
            f"  version: {stamp}",
            "  context: 00000000",
            "  arch: x86_64",
            f"  summary: Nvidia driver for {stream} branch",
            "  description: >-",
            f"    NVIDIA driver {driver_version} (hostcheck sandbox stand-in)",
            "  license:",
            "    module:",
            "      - MIT",
            "  profiles:",
        ]
        for profile, rpms in profiles.items():
            lines += [f"    {profile}:", "      rpms:", *(f"        - {r}" for r in rpms)]
        lines += ["  artifacts:", "    rpms:", *(f"      - {a}" for a in sorted(set(artifacts)))]
        lines.append("...")
        docs.append("\n".join(lines))
    defaults = [
        "---",
        "document: modulemd-defaults",
        "version: 1",
        "data:",
        "  module: nvidia-driver",
        "  profiles:",
        *(f'    "{stream}": [default]' for stream in streams),
        "...",
    ]
    return "\n".join(docs) + "\n" + "\n".join(defaults) + "\n"


def build_cuda_repo(
    out: Path, kernel: str, driver_version: str = "550.54.15", headers: bool = True
) -> Path:
    """A stand-in of NVIDIA's CUDA rhel8/rhel9 repository: signed RPMs, repodata, the
    nvidia-driver module streams; out/key.asc is its key. kernel-devel for `kernel` (AppStream's,
    in reality) is added when `headers`."""
    from tests.sandbox.fakegpu import fake_module, held

    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    branch = driver_version.split(".")[0]
    ko_path = f"/lib/modules/{kernel}/extra/nvidia.ko"
    with tempfile.TemporaryDirectory() as tmp:
        module = Path(tmp, "nvidia.ko")
        fake_module(driver_version, module)
        ko = module.read_bytes()
        evr = f"3:{driver_version}"
        depmod = held(f"depmod -a {kernel} || :")

        def nv(name: str, **more) -> StandIn:
            more.setdefault("confirmed", _NV_YUM)
            return StandIn(name, driver_version, "1{dist}", epoch=3, **more)

        def kmod(name: str, confirmed: str = _NV_YUM) -> StandIn:
            return nv(
                name,
                confirmed=confirmed,
                provides=(f"nvidia-kmod = {evr}", "kmod-nvidia"),
                requires=(f"nvidia-kmod-common = {evr}",),
                files=((ko_path, ko, 0o644),),
                post=depmod,
            )

        packages = [
            nv(
                "nvidia-driver",
                requires=(
                    f"nvidia-driver-libs = {evr}",
                    f"nvidia-kmod-common = {evr}",
                    "dnf-plugin-nvidia",
                ),
                provides=("nvidia-drivers",),
                confirmed=_NV_SPEC,
            ),
            nv("nvidia-driver-libs", confirmed=_NV_SPEC),
            nv(
                "nvidia-driver-cuda",
                requires=(f"nvidia-driver-cuda-libs = {evr}", f"nvidia-persistenced = {evr}"),
                confirmed=_NV_SPEC,
            ),
            nv("nvidia-driver-cuda-libs", confirmed=_NV_SPEC),
            nv("nvidia-driver-NVML", requires=(f"nvidia-driver = {evr}",), confirmed=_NV_SPEC),
            nv(
                "nvidia-kmod-common",
                requires=(f"nvidia-kmod = {evr}", f"nvidia-modprobe = {evr}"),
                arch="noarch",
            ),
            nv("nvidia-modprobe"),
            nv("nvidia-settings"),
            nv(
                "nvidia-persistenced",
                files=(
                    ("/usr/bin/nvidia-persistenced", _daemon("nvidia-persistenced"), 0o755),
                    (
                        "/usr/lib/systemd/system/nvidia-persistenced.service",
                        _unit("NVIDIA Persistence Daemon", "/usr/bin/nvidia-persistenced"),
                        0o644,
                    ),
                ),
            ),
            nv(
                "nvidia-fabric-manager",
                files=(
                    ("/usr/bin/nv-fabricmanager", _daemon("nv-fabricmanager"), 0o755),
                    (
                        "/usr/lib/systemd/system/nvidia-fabricmanager.service",
                        _unit("NVIDIA fabric manager service", "/usr/bin/nv-fabricmanager"),
                        0o644,
                    ),
                ),
                confirmed="NVIDIA datacenter docs / AWS P5 guide: `dnf install "
                "nvidia-fabric-manager`, `systemctl enable nvidia-fabricmanager`",
            ),
            nv(
                f"libnvidia-nscq-{branch}",
                confirmed="NVIDIA docs: `dnf install "
                "nvidia-fabric-manager libnvidia-nscq-<branch>`",
            ),
            nv(
                "cuda-drivers", requires=(f"nvidia-driver-cuda = {evr}", f"nvidia-settings = {evr}")
            ),
            StandIn("dnf-plugin-nvidia", "2.0", "1{dist}", arch="noarch", confirmed=_NV_YUM),
            kmod(
                "kmod-nvidia-open-dkms",
                "NVIDIA CUDA repo listings (rhel9, amzn2023) name "
                "kmod-nvidia-open-dkms-<version>-1 (code search); stream nvidia-driver:<br>-open",
            ),
            kmod("kmod-nvidia-latest-dkms"),
            kmod(f"kmod-nvidia-{driver_version}"),  # the precompiled <branch> stream's kmod
        ]
        if headers:
            packages.append(_kernel_devel(kernel))
        major = 9
        rpms = _build_all(out, packages, major)
        signer = _Signer(Path(tmp, "gnupg"))
        _make_repo(out, rpms, signer)
        nevras = {}
        for rpm_file, pkg in zip(rpms, packages):
            nevras[pkg.name] = _sh(
                "rpm",
                "-qp",
                "--qf",
                "%{NAME}-%{EPOCHNUM}:%{VERSION}-%{RELEASE}.%{ARCH}",
                str(rpm_file),
            ).stdout.strip()
        modules = Path(tmp, "modules.yaml")
        modules.write_text(_modules_yaml(branch, driver_version, nevras, "20240101000000"))
        _sh("modifyrepo_c", "--mdtype=modules", str(modules), str(out / "repodata"))
        (out / "key.asc").write_text(signer.public_key())
    return out
