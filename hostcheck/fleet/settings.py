"""The profile's `fleet` section: when a host is an outlier and when a metric drifted."""

from __future__ import annotations

import fnmatch
from collections.abc import Mapping
from dataclasses import dataclass

from hostcheck import config as c

# Metric names are `check.finding` (`loop.throughput`, `ulimits.process nofile soft`);
# patterns may use * and ? as in shell globs.
PATTERN = {"type": "string", "minLength": 1}

SCHEMA = c.obj(
    {
        "outliers": c.obj(
            {
                "z": {"type": "number", "exclusiveMinimum": 0},
                "min_group": {"type": "integer", "minimum": 3},
                "min_relative": c.NON_NEGATIVE,
                "ignore": {"type": "array", "items": PATTERN},
            }
        ),
        "drift": c.obj(
            {
                "tolerance": c.NON_NEGATIVE,
                "tolerances": {
                    "type": "object",
                    "propertyNames": PATTERN,
                    "additionalProperties": c.nullable(c.NON_NEGATIVE),
                },
            }
        ),
    }
)

# The modified z-score of Iglewicz and Hoaglin: 0.6745 is the 75th percentile of the
# standard normal distribution, so that the MAD of normal data estimates its sigma.
MAD_SCALE = 0.6745


@dataclass(frozen=True)
class FleetSettings:
    z: float = 3.5
    min_group: int = 4
    min_relative: float = 0.1
    ignore: tuple[str, ...] = ()
    tolerance: float = 0.2
    tolerances: tuple[tuple[str, float | None], ...] = ()

    @classmethod
    def from_profile(cls, values: Mapping) -> FleetSettings:
        """From a validated profile's values (`values["fleet"]`)."""
        fleet = values["fleet"]
        outliers, drift = fleet["outliers"], fleet["drift"]
        return cls(
            z=float(outliers["z"]),
            min_group=int(outliers["min_group"]),
            min_relative=float(outliers["min_relative"]),
            ignore=tuple(outliers["ignore"]),
            tolerance=float(drift["tolerance"]),
            tolerances=tuple(drift["tolerances"].items()),
        )

    def compared(self, metric: str) -> bool:
        """Whether outlier detection looks at this metric."""
        return not any(fnmatch.fnmatchcase(metric, pattern) for pattern in self.ignore)

    def tolerance_of(self, metric: str) -> float | None:
        """Relative change allowed before a metric counts as drifted; 0 means any change,
        None means never. The first matching pattern wins, else the default."""
        for pattern, value in self.tolerances:
            if fnmatch.fnmatchcase(metric, pattern):
                return value
        return self.tolerance
