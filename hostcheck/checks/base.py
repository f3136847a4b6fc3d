"""What a check is: an id, an explanation, the profile keys it reads, and a function."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Callable

from hostcheck.model import CheckResult
from hostcheck.system import System


@dataclass(frozen=True)
class RunOptions:
    """What the operator said on the command line beyond thresholds."""

    user: str | None = None
    dataset_path: str | None = None
    require_gpu: bool = False


@dataclass
class CheckContext:
    system: System
    config: dict  # this check's section of the profile, validated
    options: RunOptions = field(default_factory=RunOptions)
    require_gpu: bool = False


@dataclass(frozen=True)
class CheckSpec:
    id: str
    title: str
    explain: str  # what it measures and why it matters for data loading
    run: Callable[[CheckContext], CheckResult]
    schema: Mapping[str, Any]  # JSON schema of its profile section (an `obj(...)`)
    roles: tuple[str, ...] = ()  # the roles whose variables fix what it finds
