"""The HTML page as a browser renders it: headless Chromium (Debian's `chromium`) loads the
file, and every host and every status must be in the rendered DOM. A screenshot is kept in
reports/screenshots/ for people to look at."""

from __future__ import annotations

import contextlib
import html
import os
import re
import shutil
import signal
import subprocess
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import pytest

from hostcheck.cli import main
from tests.paths import CHECKOUT as REPO
from tests.support.fleet_reports import host, marker, status, write

SCREENSHOTS = REPO / "reports" / "screenshots"
CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
FLAGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]
EVIL = "<script>alert(1)<!--"
TIMEOUT_S = 120
EXIT_GRACE_S = 10

pytestmark = pytest.mark.skipif(
    CHROMIUM is None, reason="chromium is not installed (make test installs it as root)"
)


@dataclass
class Run:
    returncode: int | None  # None: stopped after its output was complete (it hung at exit)
    stdout: str
    stderr: str


def chromium(profile: Path, *args: str, finished: Callable[[Run], bool]) -> Run:
    """Chromium with these arguments, in a session of its own. Now and then it writes all it was
    asked for and then never exits, spinning both cores (one clean-clone run: 120 s, then 120 s
    again for the screenshot): once finished(output so far) holds, it gets EXIT_GRACE_S to
    exit before its process group is killed. TIMEOUT_S bounds the whole run."""
    out, err = profile.parent / f"{profile.name}.out", profile.parent / f"{profile.name}.err"
    with out.open("w") as stdout, err.open("w") as stderr:
        process = subprocess.Popen(
            [CHROMIUM, *FLAGS, f"--user-data-dir={profile}", *args],
            stdout=stdout,
            stderr=stderr,
            start_new_session=True,
        )
    deadline = time.monotonic() + TIMEOUT_S
    finished_at = None
    while process.poll() is None and time.monotonic() < deadline:
        if finished_at is None and finished(Run(None, out.read_text(), err.read_text())):
            finished_at = time.monotonic()
        if finished_at is not None and time.monotonic() - finished_at > EXIT_GRACE_S:
            break
        time.sleep(0.2)
    if process.poll() is None:
        os.killpg(process.pid, signal.SIGKILL)
        process.wait()
        returncode = None if finished_at is not None else process.returncode
    else:
        returncode = process.returncode
        with contextlib.suppress(ProcessLookupError):
            os.killpg(process.pid, signal.SIGKILL)  # helpers it left behind
    return Run(returncode, out.read_text(), err.read_text())


def dumped(run: Run) -> bool:
    return run.stdout.rstrip().endswith("</html>")


@pytest.fixture
def page(tmp_path, real_report) -> tuple[Path, dict[str, str]]:
    audit = tmp_path / "20260102T000000Z"
    verdicts = {}
    for i, rate in enumerate((1000, 1020, 980, 1010, 990, 120)):
        write(audit, f"gpu{i}", host(real_report, f"gpu{i}", loop=(float(rate), 0.01 + i / 100)))
        verdicts[f"gpu{i}"] = "pass"
    write(audit, "gpu6", host(real_report, "gpu6", fail=["shm", "sysctl"]))
    write(audit, "gpu7", status(host(real_report, "gpu7"), "cpu", "warn"))
    write(audit, "gpu8", status(host(real_report, "gpu8"), "pillow", "error"))
    write(audit, "gpu9", marker("gpu9"))
    write(audit, "gpu10", marker("gpu10", "timeout", "no answer in 300 s"))
    write(audit, "gpu11", marker("gpu11", "no-report", "hostcheck: not found"))
    write(audit, EVIL, '{"schema_version": 1, "tool": {"na')
    verdicts.update(
        gpu6="fail",
        gpu7="warn",
        gpu8="error",
        gpu9="unreachable",
        gpu10="timeout",
        gpu11="no-report",
    )
    verdicts[EVIL] = "unreadable"
    write(tmp_path / "20260101T000000Z", "gpu0", host(real_report, "gpu0", fail=["shm"]))
    out = tmp_path / "fleet.html"
    assert main(["fleet", str(audit), "--report", f"html:{out}"]) == 1
    return out, verdicts


def test_rendered_page_shows_every_host_and_status(tmp_path, page, capsys, real_report):
    out, verdicts = page
    real_os = real_report["host"]["os"]["pretty_name"]
    capsys.readouterr()
    text = out.read_text()
    assert "<script" not in text  # the hostile name is escaped, and the page has no script
    assert "http://" not in text.replace('xmlns="http://www.w3.org/2000/svg"', "")
    assert "https://" not in text
    done = chromium(tmp_path / "profile", "--dump-dom", out.as_uri(), finished=dumped)
    assert done.returncode in (0, None), done.stderr[-2000:]
    assert dumped(done), done.stderr[-2000:]
    dom = done.stdout
    assert "<script" not in dom  # nothing the browser parsed became a script element
    rows = {}
    grid = re.search(r'<table class="grid">(.*?)</table>', dom, re.S).group(1)
    for row in re.findall(r"<tr>(.*?)</tr>", grid, re.S):
        cells = [
            html.unescape(re.sub(r"<[^>]+>", "", c))
            for c in re.findall(r"<t[hd][^>]*>(.*?)</t[hd]>", row, re.S)
        ]
        if cells:
            rows[cells[0]] = cells
    assert re.findall(r"<th>(\w+)</th>", grid)[:3] == ["host", "verdict", "os"]
    for name, verdict in verdicts.items():
        assert name in rows, name
        assert rows[name][1] == verdict, (name, rows[name])
    # the OS each report names (this machine's, in every host's copy), none for a marker
    assert rows["gpu6"][2] == real_os and rows["gpu9"][2] == ""
    for check_status in ("pass", "warn", "fail", "skip", "error"):
        assert any(check_status in cells[3:] for cells in rows.values()), check_status
    assert "truncated JSON" in dom and "no answer in 300 s" in dom
    assert "loop throughput" in dom and "median" in dom  # the charts
    assert "Outliers (1)" in dom and "Drift since" in dom


def test_screenshot_for_people(tmp_path, page):
    out, _ = page
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    png = SCREENSHOTS / "fleet.png"
    png.unlink(missing_ok=True)
    written = f"bytes written to file {png}"
    done = chromium(
        tmp_path / "profile",
        f"--screenshot={png}",
        "--window-size=1400,1000",
        out.as_uri(),
        finished=lambda run: written in run.stderr,
    )
    assert done.returncode in (0, None), done.stderr[-2000:]
    assert written in done.stderr, done.stderr[-2000:]
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert png.stat().st_size > 20_000  # a page, not a blank
    print(f"screenshot: {png}")
