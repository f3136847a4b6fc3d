"""The shipped Prometheus rules against a real Prometheus: node_exporter (Debian's package) on
two sandbox hosts reading the hostcheck timer's textfile (role hostcheck, a 20 s schedule), a
Prometheus on this machine scraping them with monitoring/prometheus/hostcheck-rules.yml
loaded. The rules' `for:` durations are shortened to 10 s here (promtool's rule tests hold
them at their real values); every outcome is read from Prometheus' HTTP API. The failing host
Prometheus shows is repaired by playbooks/repair.yml, which reads it from there."""

from __future__ import annotations

import json
import re
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor

import pytest

from tests.integration.ansible import run_playbook
from tests.integration.converged import converged_fleet
from tests.integration.prometheus_server import Prometheus
from tests.sandbox.fleet import CHECKOUT

# What this module covers (tests/selection.py: a change to these paths selects it)
COVERS = (
    "monitoring/prometheus/*",
    "hostcheck/report/*",
    "hostcheck/fleet/*",
    "hostcheck/health/*",
    "roles/hostcheck/*",
    "plugins/filter/hostcheck_timer.py",
    "plugins/plugin_utils/systemd_quoting.py",
    "tests/integration/prometheus_server.py",
    "tests/integration/playbooks/hostcheck.yml",
    "playbooks/repair.yml",
    "tests/integration/converged.py",
)

pytestmark = pytest.mark.integration
PLAYBOOK = "tests/integration/playbooks/hostcheck.yml"
RULES = CHECKOUT / "monitoring" / "prometheus" / "hostcheck-rules.yml"
DASHBOARD = CHECKOUT / "monitoring" / "grafana" / "hostcheck-dashboard.json"
TEXTFILE_DIR = "/var/lib/node_exporter/textfile_collector"
SCHEDULE = "*:*:0/20"  # every 20 s
VALUES = {
    "hostcheck_pip_packages_before": ["torch==2.13.0"],
    "hostcheck_profile": "quick",
    # what a bare sandbox host passes: 64 MiB /dev/shm, this machine's limits and tunables
    "hostcheck_config": {
        "checks": {
            "shm": {"min_size": "32MiB", "min_free": "8MiB"},
            "ulimits": {"enabled": False},
            "sysctl": {"enabled": False},
            "memory": {"min_ram": "2GiB"},
            "cpu": {"severity": "warn"},
        }
    },
    "hostcheck_timer_enabled": True,
    "hostcheck_timer_schedule": SCHEDULE,
    "hostcheck_timer_randomized_delay_sec": 0,
    "hostcheck_timer_profile": "quick",
}


def node_exporter_command(address: str) -> str:
    """node_exporter's arguments written before its install (the package starts it), only the
    textfile collector on, listening on the host's own address."""
    args = (
        f"--web.listen-address={address}:9100 --collector.disable-defaults "
        f"--collector.textfile --collector.textfile.directory={TEXTFILE_DIR}"
    )
    return (
        f"mkdir -p {TEXTFILE_DIR} && echo 'ARGS=\"{args}\"' > /etc/default/prometheus-node-exporter"
        " && export DEBIAN_FRONTEND=noninteractive && apt-get -q update >/dev/null && "
        "apt-get install -y -q --no-install-recommends -o Dpkg::Options::=--force-confold "
        "prometheus-node-exporter >/dev/null"
    )


def sh(fleet, host, command: str, timeout: float = 300) -> str:
    done = fleet.ssh(host, command, timeout=timeout)
    assert done.returncode == 0, f"{host.name}: {command}: {done.stdout}{done.stderr}"
    return done.stdout


@pytest.fixture(scope="module")
def monitored(make_fleet, tmp_path_factory):
    """Two hosts as the hostcheck role leaves them with its timer on (booted from converged
    layers where a run on this machine kept them: tests/integration/converged.py; hostcheck
    built from the checkout, as the sandbox inventory says), then node_exporter on each, on
    the host's own address (which the layers cannot know: it is the checkout's)."""
    fleet = converged_fleet(
        make_fleet, "monitoring", 2, PLAYBOOK, extra_vars=VALUES, os_kinds="debian12"
    )
    hosts = fleet.hosts()
    with ThreadPoolExecutor(len(hosts)) as pool:
        list(pool.map(lambda h: sh(fleet, h, node_exporter_command(h.address), 600), hosts))
    # systemd fires a timer up to AccuracySec (1 min) late: at a 20 s schedule that would look
    # stale, at the default 15 minutes it does not matter
    for host in hosts:
        sh(
            fleet,
            host,
            "mkdir -p /etc/systemd/system/hostcheck.timer.d && printf '[Timer]\\nAccuracySec=1s\\n'"
            " > /etc/systemd/system/hostcheck.timer.d/accuracy.conf && systemctl daemon-reload"
            " && systemctl restart hostcheck.timer",
        )
    folder = tmp_path_factory.mktemp("prometheus")
    rules = folder / "hostcheck-rules.yml"
    rules.write_text(re.sub(r"for: \d+m", "for: 10s", RULES.read_text()))
    prometheus = Prometheus(folder, [f"{h.address}:9100" for h in hosts], [rules]).start()
    try:
        prometheus.wait(
            lambda: len(prometheus.query("instance:hostcheck_failing:bool")) == 2,
            "evaluating the rules over both hosts",
            120,
        )
        yield fleet, prometheus, VALUES
    finally:
        prometheus.stop()


def hostcheck_alerts(prometheus, instance: str | None = None, name: str = "Hostcheck"):
    return [
        a
        for a in prometheus.alerts(name)
        if instance is None or a["labels"].get("instance") == instance
    ]


def fresh_runs_scraped(fleet, prometheus) -> None:
    """A hostcheck run on every host now (as its timer starts one), scraped by Prometheus, and
    the rules evaluated over it."""
    hosts = fleet.hosts()
    since = time.time()
    with ThreadPoolExecutor(len(hosts)) as pool:
        list(pool.map(lambda h: sh(fleet, h, "systemctl start hostcheck.service"), hosts))

    def scraped() -> bool:
        found = prometheus.query(f"hostcheck_last_run_timestamp_seconds >= {since - 1:.0f}")
        return len(found) == len(hosts)

    prometheus.wait(scraped, "a new run of every host scraped", 60)
    prometheus.wait_for_evaluations()


def test_a_healthy_fleet_raises_no_hostcheck_alert(monitored):
    """A failing check, a host that cannot be assessed or a stale one would be listed pending
    at the first evaluation that sees it (the alerts' for: only delays firing)."""
    fleet, prometheus, _ = monitored
    fresh_runs_scraped(fleet, prometheus)
    failing = {s["metric"]["instance"]: s["value"][1] for s in prometheus.query(
        "instance:hostcheck_failing:bool")}  # fmt: skip
    assert set(failing.values()) == {"0"}, failing
    intervals = prometheus.query("hostcheck_run_interval_seconds")
    assert {s["value"][1] for s in intervals} == {"20"}
    assert hostcheck_alerts(prometheus) == []


def fleet_json(*args: str) -> tuple[int, dict, str]:
    done = subprocess.run(
        [sys.executable, "-m", "hostcheck", "fleet", "--format", "json", *args],
        capture_output=True, text=True, timeout=120, check=False,
    )  # fmt: skip
    return done.returncode, json.loads(done.stdout) if done.stdout.strip() else {}, done.stderr


def test_the_fleet_read_from_prometheus_is_the_fleet_of_the_same_runs_report_files(
    monitored, tmp_path
):
    """The timer's run writes timer.json and the textfile: with the timers held still, the
    fleet of those report files and the fleet Prometheus scraped say the same of each host."""
    fleet, prometheus, _ = monitored
    hosts = fleet.hosts()
    try:
        for host in hosts:
            sh(fleet, host, "systemctl stop hostcheck.timer && "
               "while systemctl -q is-active hostcheck.service; do sleep 0.2; done")  # fmt: skip
        started = {}
        for host in hosts:
            text = sh(fleet, host, "cat /var/lib/hostcheck/timer.json")
            (tmp_path / f"{host.name}.json").write_text(text)
            started[f"{host.address}:9100"] = json.loads(text)["started_at"]

        def scraped() -> bool:
            found = prometheus.query("hostcheck_last_run_timestamp_seconds")
            at = {s["metric"]["instance"]: float(s["value"][1]) for s in found}
            return at.keys() == started.keys() and all(
                time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(at[i])) == started[i]
                for i in started
            )

        prometheus.wait(scraped, "the last runs scraped", 30)
        code, files, err = fleet_json(str(tmp_path), "--no-baseline")
        code_p, served, err_p = fleet_json(
            "--prometheus", prometheus.url, "--host-label", "hostname"
        )
    finally:
        for host in hosts:
            sh(fleet, host, "systemctl start hostcheck.timer")
    assert code == code_p == 0, err + err_p

    def shown(document):
        """Each host, its problems by check only: a report says why a check did not pass in
        words, Prometheus which findings did not (no words in labels)."""
        return {
            h["host"]: {
                **{k: v for k, v in h.items() if k not in ("file", "problems")},
                "problems": sorted(h["problems"]),
            }
            for h in document["hosts"]
        }

    assert shown(served) == shown(files)
    assert sorted(shown(served)) == [h.name for h in hosts]
    assert served["checks"] == files["checks"] and served["verdicts"] == files["verdicts"]
    assert served["outliers"] == files["outliers"]


def test_the_dashboards_queries_run_on_the_real_prometheus(monitored):
    """Grafana is not in Debian's archive: its panels' queries are run here instead, "$job"
    standing for every job. The loop panels have no data (the timer's quick profile runs no
    loop), nor the remedy table while every host passes."""
    _, prometheus, _ = monitored
    dashboard = json.loads(DASHBOARD.read_text())
    results = {}
    for panel in dashboard["panels"]:
        for target in panel["targets"]:
            expr = target["expr"].replace("$job", ".+")
            results[(panel["title"], target["refId"])] = prometheus.query(expr)
    with_data = {title for (title, _), found in results.items() if found}
    assert {
        "Fleet verdict",
        "Failing hosts by check",
        "/dev/shm headroom",
        "Staleness (age of the last run / its schedule)",
    } <= with_data
    headroom = results[("/dev/shm headroom", "A")]
    assert len(headroom) == 2 and all(0 < float(s["value"][1]) <= 1 for s in headroom)
    staleness = results[("Staleness (age of the last run / its schedule)", "A")]
    assert all(float(s["value"][1]) < 2 for s in staleness)


def repaired_from_prometheus(fleet, prometheus, values: dict, folder):
    """playbooks/repair.yml on the hosts `hostcheck fleet --prometheus` finds failing (named by
    the hostname label: the inventory's names), shm_size in the inventory as site.yml has it;
    the run and its report's hosts by name."""
    done = run_playbook(
        fleet,
        "playbooks/repair.yml",
        extra_vars={
            **values,
            "shm_size": "64MiB",
            "repair_from": "prometheus",
            "repair_prometheus_url": prometheus.url,
            "repair_fleet_args": ["--host-label", "hostname"],
            "repair_slurm_host": "",
            "repair_reports_dir": str(folder),
        },
    )
    (written,) = folder.glob("repair-*.json")
    return done, {entry["host"]: entry for entry in json.loads(written.read_text())["hosts"]}


def test_a_shrunk_dev_shm_goes_pending_then_firing_with_its_remedy_then_repair_yml_fixes_it(
    monitored, tmp_path
):
    fleet, prometheus, values = monitored
    node2 = fleet.hosts()[1]
    instance = f"{node2.address}:9100"
    began = time.monotonic()
    sh(fleet, node2, "mount -o remount,size=16m /dev/shm && systemctl start hostcheck.service")
    seen: dict[str, float] = {}

    def shm_alert_firing() -> bool:
        for alert in hostcheck_alerts(prometheus, instance, "HostcheckCheckFailing"):
            if alert["labels"]["check"] == "shm":
                seen.setdefault(alert["state"], time.monotonic() - began)
                seen["alert"] = alert
        if "firing" in seen:  # the recording rule the fleet's share is made of, while it fires
            failing = prometheus.query(f'instance:hostcheck_failing:bool{{instance="{instance}"}}')
            seen["failing"] = [sample["value"][1] for sample in failing]
        return "firing" in seen

    try:
        prometheus.wait(shm_alert_firing, "firing for node2's shm", 120)
        # the hosts to repair as Prometheus has them: playbooks/repair.yml, no Slurm here
        done, hosts = repaired_from_prometheus(fleet, prometheus, values, tmp_path)
    finally:
        sh(fleet, node2, "mount -o remount,size=64m /dev/shm && systemctl start hostcheck.service")
    print(f"/dev/shm shrunk to pending {seen['pending']:.1f} s, to firing {seen['firing']:.1f} s")
    assert done.returncode == 0, done.stderr[-3000:]
    assert (hosts["node2"]["action"], hosts["node2"]["roles"]) == ("repaired", ["shm"])
    assert hosts["node2"]["before"] == {"shm.size": "size 16.0 MiB"}
    assert hosts["node2"]["after"] == {"shm.size": "pass: size 64.0 MiB"}
    assert hosts["node1"]["action"] == "skipped"
    assert hosts["node1"]["said"].startswith("hostcheck fleet says it does not fail (")
    assert seen["pending"] < seen["firing"]
    assert seen["failing"] == ["1"], seen["failing"]
    alert = seen["alert"]
    assert alert["labels"]["variables"] == "shm_size"
    assert alert["annotations"]["remedy_variables"] == "shm_size"
    assert alert["annotations"]["summary"] == f"hostcheck: shm fails on {instance}"
    # node2's shm and, one host of two failing, the fleet's share: nothing else
    raised = {
        (a["labels"]["alertname"], a["labels"].get("instance"), a["labels"].get("check"))
        for a in hostcheck_alerts(prometheus)
    }
    assert raised <= {
        ("HostcheckCheckFailing", instance, "shm"),
        ("HostcheckFleetFailing", None, None),
    }, raised
    prometheus.wait(lambda: not hostcheck_alerts(prometheus, instance), "resolved", 120)


def test_a_stopped_timer_goes_stale_and_one_switched_off_on_purpose_does_not(monitored):
    fleet, prometheus, values = monitored
    node1 = fleet.hosts()[0]
    instance = f"{node1.address}:9100"
    began = time.monotonic()
    sh(fleet, node1, "systemctl stop hostcheck.timer")
    prometheus.wait(
        lambda: any(
            a["state"] == "firing" for a in hostcheck_alerts(prometheus, instance, "HostcheckStale")
        ),
        "stale on node1",
        180,
    )
    print(f"timer stopped to stale alert firing: {time.monotonic() - began:.1f} s")
    off = run_playbook(
        fleet, PLAYBOOK, extra_vars={**values, "hostcheck_timer_enabled": False}, limit="node1"
    )
    assert off.returncode == 0, off.failure_text("node1")
    prometheus.wait(lambda: not hostcheck_alerts(prometheus, instance), "no alert for node1", 60)

    def switched_off_scraped() -> bool:
        marker = prometheus.query(f'hostcheck_timer_enabled{{instance="{instance}"}}')
        runs = prometheus.query(f'hostcheck_last_run_timestamp_seconds{{instance="{instance}"}}')
        return [s["value"][1] for s in marker] == ["0"] and runs == []

    prometheus.wait(switched_off_scraped, "node1's textfile without its runs, marked off", 30)
    # HostcheckMissing, without the marker, would now be listed pending (for: delays firing)
    prometheus.wait_for_evaluations()
    assert hostcheck_alerts(prometheus, instance) == []
