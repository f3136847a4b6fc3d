"""The operating systems a sandbox host can be. Debian 12 and 13 are real roots from
mmdebstrap. Ubuntu and Rocky archives cannot be reached from here, so those kinds are
look-alikes on a Debian root (tests/sandbox/lookalike_*.py): the distribution's identity files
and its package manager over a local repository of stand-in packages under that
distribution's own package names. They cannot show a real kernel of their own, their real
archives, or SELinux."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class OsKind:
    name: str
    title: str
    suite: str  # the Debian suite the root is built from
    family: str  # Ansible's os_family
    lookalike: str = ""  # "ubuntu" or "rocky": whose identity the Debian root takes
    version: str = ""  # the look-alike's release ("24.04", "9")
    python: str = "/usr/bin/python3"  # the interpreter Ansible is told to use

    @property
    def real(self) -> bool:
        return not self.lookalike


KINDS = {
    kind.name: kind
    for kind in (
        OsKind("debian12", "Debian 12 (bookworm)", "bookworm", "Debian"),
        OsKind("debian13", "Debian 13 (trixie)", "trixie", "Debian"),
        OsKind("ubuntu2204", "Ubuntu 22.04 look-alike", "bookworm", "Debian", "ubuntu", "22.04"),
        OsKind("ubuntu2404", "Ubuntu 24.04 look-alike", "bookworm", "Debian", "ubuntu", "24.04"),
        # EL 8's python3 is 3.6: Ansible runs there with python3.11 (as roles/hostcheck says)
        OsKind(
            "rocky8",
            "Rocky Linux 8 look-alike",
            "bookworm",
            "RedHat",
            "rocky",
            "8",
            "/usr/bin/python3.11",
        ),
        OsKind("rocky9", "Rocky Linux 9 look-alike", "bookworm", "RedHat", "rocky", "9"),
    )
}
# What `make sandbox-up` and `make demo` get when no OS is named: the kinds GPU fleets run
# most, one of each family first. A Fleet given no kinds (the test fixtures) is all debian12.
DEFAULT_MIX = ("debian12", "ubuntu2404", "rocky9", "debian13", "ubuntu2204", "rocky8")


def parse(text: str) -> list[OsKind]:
    """'debian12,rocky9' -> kinds; an unknown name is refused with the list of kinds."""
    names = [part.strip() for part in text.split(",") if part.strip()]
    if not names:
        raise ValueError(f"OS names no kind; the kinds are: {', '.join(KINDS)}")
    unknown = [name for name in names if name not in KINDS]
    if unknown:
        raise ValueError(
            f"unknown OS kind {', '.join(repr(n) for n in unknown)}; the kinds are: "
            f"{', '.join(KINDS)}"
        )
    return [KINDS[name] for name in names]


def for_hosts(count: int, kinds: list[OsKind] | None = None) -> list[OsKind]:
    """The kind of each of `count` hosts: the kinds given (or debian12) in turn."""
    cycle = kinds or [KINDS["debian12"]]
    return [cycle[index % len(cycle)] for index in range(count)]
