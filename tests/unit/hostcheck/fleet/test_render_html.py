"""The fleet page's loop bars take the colour of the finding each value is judged by: a 6 %
data-wait over the 5 % threshold is red even where the loop check as a whole only warns
(severity warn) or passes, and a throughput that met its threshold stays green."""

from __future__ import annotations

import re

from hostcheck.cli import main
from tests.support.fleet_reports import finding, host, status, write


def bar_classes(page: str, host_name: str) -> dict[str, str]:
    """metric label -> the class of this host's dark bar, from the SVG titles."""
    found = {}
    for klass, label in re.findall(
        rf'<rect class="([a-z-]+)"[^>]*><title>{host_name} ([^:]+):', page
    ):
        found[label] = klass
    return found


def test_bars_take_their_findings_status(tmp_path, real_report):
    audit = tmp_path / "20260103T000000Z"
    slow = host(real_report, "slow", loop=(900.0, 0.06))
    finding(slow, "loop", "data-wait", 0.06, status="fail")
    status(slow, "loop", "warn")  # severity warn turned the check's failure into a warning
    write(audit, "slow", slow)
    write(audit, "fast", host(real_report, "fast", loop=(1000.0, 0.01)))
    out = tmp_path / "fleet.html"
    main(["fleet", str(audit), "--report", f"html:{out}"])
    page = out.read_text()
    assert bar_classes(page, "slow") == {"samples/s": "bar-pass", "data-wait": "bar-fail"}
    assert bar_classes(page, "fast") == {"samples/s": "bar-pass", "data-wait": "bar-pass"}
