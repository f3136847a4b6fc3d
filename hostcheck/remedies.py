"""The role variables a remedy tells people to set, for places that carry them apart from the
remedy's text (the Prometheus textfile, where alerts take them as an annotation)."""

from __future__ import annotations

import re

# The collection's roles (tests/unit/hostcheck/test_remedies.py keeps this equal to roles/).
ROLES = (
    "cuda_check",
    "dataset_staging",
    "hostcheck",
    "nvidia_driver",
    "pillow_simd",
    "shm",
    "slurm_healthcheck",
    "sysctl_tuning",
    "ulimits",
)
# Longest first: sysctl_tuning_x is a sysctl_tuning variable.
_VARIABLE = re.compile(
    r"\b(?:" + "|".join(sorted(ROLES, key=len, reverse=True)) + r")_[a-z0-9_]+\b"
)


def role_variables(remedy: str) -> list[str]:
    """The role variables a remedy names, in order, once each; none when it names no role."""
    if "role" not in remedy:
        return []
    return list(dict.fromkeys(m.group(0) for m in _VARIABLE.finditer(remedy)))
