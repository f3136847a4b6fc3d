"""Prometheus textfile (node_exporter's textfile collector) for the fleet."""

from __future__ import annotations

import math

from hostcheck import __version__
from hostcheck.fleet.analyze import FleetReport
from hostcheck.report.entry import STATUSES, VERDICTS
from hostcheck.report.writers import prom_label, prom_value


def _family(lines: list[str], name: str, text: str) -> None:
    lines += [f"# HELP {name} {text}", f"# TYPE {name} gauge"]


def render_prom(report: FleetReport) -> str:
    lines: list[str] = []
    _family(lines, "hostcheck_fleet_info", "hostcheck version and profile of the last fleet run.")
    lines.append(
        f'hostcheck_fleet_info{{version="{prom_label(__version__)}",'
        f'profile="{prom_label(report.profile_name)}"}} 1'
    )
    _family(lines, "hostcheck_fleet_last_run_timestamp_seconds", "When the fleet run was made.")
    lines.append(f"hostcheck_fleet_last_run_timestamp_seconds {int(report.generated_at)}")
    _family(lines, "hostcheck_fleet_exit_code", "0 every host assessed and none failed, else 1.")
    lines.append(f"hostcheck_fleet_exit_code {report.exit_code}")
    _family(lines, "hostcheck_fleet_hosts", "Hosts per verdict.")
    for verdict, count in report.verdict_counts.items():
        lines.append(f'hostcheck_fleet_hosts{{verdict="{verdict}"}} {count}')
    _family(lines, "hostcheck_fleet_check_hosts", "Hosts per check and status.")
    for check_id, row in report.check_counts.items():
        for status in STATUSES:
            lines.append(
                f'hostcheck_fleet_check_hosts{{check="{prom_label(check_id)}",status="{status}"}} '
                f"{row[status]}"
            )
    _family(lines, "hostcheck_fleet_host_verdict", "1 for the verdict each host had.")
    for entry in report.entries:
        host = prom_label(entry.host)
        verdict = entry.verdict
        lines += [
            f'hostcheck_fleet_host_verdict{{host="{host}",verdict="{v}"}} {int(v == verdict)}'
            for v in VERDICTS
        ]
    _family(
        lines,
        "hostcheck_fleet_outlier_z",
        "Modified z-score of an outlying metric (+-Inf when the group's MAD is 0).",
    )
    for o in report.outliers:
        z = o.z if o.z is not None else math.copysign(math.inf, o.value - o.median)
        labels = f'host="{prom_label(o.host)}",metric="{prom_label(o.metric)}"'
        lines.append(f"hostcheck_fleet_outlier_z{{{labels}}} {prom_value(float(z))}")
    _family(lines, "hostcheck_fleet_drift_changes", "Changes per host since the baseline.")
    changed: dict[str, int] = {}
    for change in report.drift:
        changed[change.host] = changed.get(change.host, 0) + 1
    for host, count in changed.items():
        lines.append(f'hostcheck_fleet_drift_changes{{host="{prom_label(host)}"}} {count}')
    return "\n".join(lines) + "\n"
