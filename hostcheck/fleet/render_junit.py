"""JUnit XML: a test suite per host, a test case per check; a host without a usable report
is one failing (unreachable, timed out, no report) or erroring (unreadable) case."""

from __future__ import annotations

import xml.etree.ElementTree as ET

from hostcheck.fleet.analyze import FleetReport
from hostcheck.report.entry import REPORT, UNREADABLE
from hostcheck.report.writers import junit_case, junit_text, xml_safe


def render_junit(report: FleetReport) -> str:
    root = ET.Element("testsuites", name="hostcheck fleet")
    fail_on_warn = report.fail_on == "warn"
    totals = {"tests": 0, "failures": 0, "errors": 0, "skipped": 0}
    for entry in report.entries:
        suite = ET.SubElement(root, "testsuite", name=xml_safe(entry.host))
        if entry.hostname:
            suite.set("hostname", xml_safe(entry.hostname))
        if entry.started_at:
            suite.set("timestamp", xml_safe(entry.started_at))
        classname = f"hostcheck.{entry.host}"
        if entry.state == REPORT:
            cases = list(entry.checks.items())
            for check_id, status in cases:
                message = entry.problems.get(check_id, "") or status
                junit_case(
                    suite, classname, check_id, status, message, status, "", 0.0, fail_on_warn
                )
        else:
            status = "error" if entry.state == UNREADABLE else "fail"
            message = f"{entry.state}: {entry.reason}"
            cases = [("report", status)]
            junit_case(suite, classname, "report", status, message, detail=entry.file)
        counts = {
            "tests": len(cases),
            "failures": sum(s == "fail" or (fail_on_warn and s == "warn") for _, s in cases),
            "errors": sum(s == "error" for _, s in cases),
            "skipped": sum(s == "skip" for _, s in cases),
        }
        for key, value in counts.items():
            suite.set(key, str(value))
            totals[key] += value
    for key, value in totals.items():
        root.set(key, str(value))
    return junit_text(root)
