"""`hostcheck job -- COMMAND ...`: run a training job unchanged and say whether it waits for
data, with the settings each DataLoader used and how they compare with this host's
measured setting (hostcheck.dataloader). With --compare OLD.json, the run beside an earlier
report (hostcheck.job.compare).

Exit status: the job's own when it did not succeed (127: command not found, 126: cannot
run, 128+N: ended by signal N); when it succeeded, hostcheck's: 0 nothing failed, 1 a
check failed (data-wait above the threshold, no DataLoader iterated); 2 usage error.
"""

from __future__ import annotations

import argparse
import sys
import time

from hostcheck.commands.common import (
    UsageError,
    fail_on_option,
    load,
    profile_options,
    report_option,
    report_targets,
)


def add_parser(commands: argparse._SubParsersAction) -> None:
    job = commands.add_parser(
        "job",
        help="run a training command unchanged and measure its DataLoaders' data-wait",
        description="Run COMMAND (e.g. python train.py, torchrun ...) unchanged, with a probe "
        "in each of its Python processes, and report for every DataLoader it iterates: "
        "data-wait as a share of step time, samples/s, the settings it used, worker CPU, "
        "peak /dev/shm, and how they compare with this host's measured DataLoader setting. "
        "Exit status: the job's when it failed, else 0, or 1 when a check failed.",
        usage="hostcheck job [options] -- COMMAND [ARG ...]",
    )
    profile_options(job)
    job.add_argument(
        "--settings",
        metavar="FILE",
        help="this host's DataLoader settings file (default: $HOSTCHECK_DATALOADER, "
        "else /etc/hostcheck/dataloader.json when it exists)",
    )
    job.add_argument(
        "--ranks-per-node",
        type=int,
        metavar="N",
        help="ranks per node the recommendation is scaled to (default: the job's "
        "LOCAL_WORLD_SIZE, else 1)",
    )
    job.add_argument(
        "--compare",
        metavar="OLD.json",
        help="an earlier hostcheck job --report json: report: print this run beside it, per "
        "loader (data-wait, samples/s, wait per batch, GPU utilization, the settings that "
        "changed) and whether the change helped beyond the runs' noise",
    )
    report_option(job, "json:PATH, junit:PATH or prom:PATH")
    fail_on_option(job, "status")
    job.add_argument("-v", "--verbose", action="store_true", help="show every finding")
    job.add_argument("job_command", nargs=argparse.REMAINDER, metavar="-- COMMAND")


def _settings_file(path: str | None):
    """This host's settings file, None when there is none; a bad one is a usage error."""
    from hostcheck import dataloader

    try:
        return dataloader.load(path)
    except dataloader.SettingsFileError as exc:
        raise UsageError(str(exc)) from None


def _earlier_report(path: str | None) -> dict | None:
    """The report --compare names, None without it; a bad one is a usage error."""
    from hostcheck.job import compare

    if path is None:
        return None
    try:
        return compare.load(path)
    except compare.CompareFileError as exc:
        raise UsageError(str(exc)) from None


def run(args: argparse.Namespace) -> int:
    from rich.console import Console
    from rich.text import Text

    from hostcheck._shared.sizes import format_size
    from hostcheck.checks.base import RunOptions
    from hostcheck.job import assess, compare, gpu_use, host_use, runner, tables, waits
    from hostcheck.model import Status
    from hostcheck.report.document import build_document
    from hostcheck.report.table import render_table
    from hostcheck.runner import outcome_of
    from hostcheck.system import System

    command = list(args.job_command)
    if command and command[0] == "--":
        command = command[1:]
    if not command:
        raise UsageError("job: no command given (hostcheck job [options] -- COMMAND ...)")
    if args.ranks_per_node is not None and args.ranks_per_node < 1:
        raise UsageError("--ranks-per-node must be 1 or more")
    targets = report_targets(args.report)
    profile = load(args)
    max_wait = profile.section("loop")["max_data_wait"]
    wait_rules = waits.Rules.from_profile(profile.values)
    found = _settings_file(args.settings)
    earlier = _earlier_report(args.compare)
    to_stdout = any(path == "-" for _, path in targets)
    console = Console(stderr=to_stdout, highlight=False)
    began = time.time()
    job = runner.run(command)
    ranks = args.ranks_per_node or _local_world_size(job) or 1
    recommended = None
    if found is not None:
        cuda = found.host.device.startswith("cuda")
        recommended = assess.Recommended(found.path, found.kwargs_for(ranks), cuda)
    min_gpu = profile.values["job"]["min_gpu_utilization"]
    results = assess.checks(job, max_wait, recommended, min_gpu, wait_rules)
    fail_on = Status(args.fail_on)
    outcome = outcome_of(results, began, profile, RunOptions())
    verdict_code = outcome.exit_code(fail_on)
    exit_code = job.exit_status if job.exit_status else verdict_code
    system = System()
    document = build_document(outcome, exit_code, system.read("/etc/os-release"))
    document["job"] = assess.job_section(job, recommended, wait_rules)
    console.print(tables.loaders_table(document["job"]))
    if any(lo["waits"] for entry in document["job"]["ranks"] for lo in entry["loaders"]):
        console.print(tables.wait_table(document["job"], wait_rules))
    if document["job"]["gpu"] and document["job"]["gpu"]["gpus"]:
        console.print(gpu_use.table(document["job"]["gpu"]))
    render_table(document, console, verbose=args.verbose)
    if recommended is None:
        console.print(
            Text(
                "no DataLoader settings file for this host: hostcheck loop --sweep --write "
                "measures one (role variable hostcheck_dataloader_enabled)"
            )
        )
    if job.shm_peak_bytes is not None:
        console.print(Text(f"/dev/shm peak during the job: {format_size(job.shm_peak_bytes)}"))
    if earlier is not None:
        document["job"]["comparison"] = compare.comparison(earlier, document, args.compare)
        console.print(compare.table(document["job"]["comparison"]))
    for line in host_use.console_lines(document["job"]):
        console.print(Text(line))
    if job.exit_status:
        console.print(Text(f"exit status {job.exit_status}: the job's own"))
    from hostcheck.report.writers import write_report

    for kind, path in targets:
        try:
            write_report(kind, path, document, fail_on_warn=fail_on == Status.WARN)
        except OSError as exc:
            print(f"hostcheck: error: --report {kind}:{path}: {exc.strerror}", file=sys.stderr)
            return 2
    return exit_code


def _local_world_size(job) -> int | None:
    sizes = [p.get("local_world_size") for p in job.processes if p.get("local_world_size")]
    return sizes[0] if sizes else None
