"""Whether a role supports a host's OS: the role's galaxy_info.platforms (Galaxy's names:
Debian and Ubuntu by codename, EL by major version) against the host's distribution facts."""

from __future__ import annotations

# Ansible's distribution names of the RHEL family, which Galaxy calls EL
EL = {"RedHat", "Rocky", "AlmaLinux", "CentOS", "OracleLinux"}


def platform_of(facts: dict) -> tuple[str, str]:
    """(Galaxy platform name, version) of a host: Debian and Ubuntu by codename, EL by major."""
    distribution = facts.get("distribution", "")
    if distribution in ("Debian", "Ubuntu"):
        return distribution, facts.get("distribution_release", "")
    if distribution in EL:
        return "EL", str(facts.get("distribution_major_version", ""))
    return distribution, str(facts.get("distribution_major_version", ""))


def supported_text(platforms: list[dict]) -> str:
    return "; ".join(f"{p['name']} {', '.join(map(str, p['versions']))}" for p in platforms)


def problem(facts: dict, platforms: list[dict], role: str) -> str:
    """'' when the role supports this host's OS, else the one-line reason."""
    name, version = platform_of(facts)
    for platform in platforms:
        if platform["name"] == name and version in map(str, platform["versions"]):
            return ""
    shown = (
        f"{facts.get('distribution') or 'an unknown OS'} {facts.get('distribution_version', '')}"
    )
    return (
        f"{role}: {shown.strip()} is not supported; the role runs on {supported_text(platforms)} "
        f"(set {role}_enabled: false for this host to leave it alone)"
    )
