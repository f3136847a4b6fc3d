"""`hostcheck loop`: run the synthetic training loop once, or sweep it and recommend a
setting."""

from __future__ import annotations

import argparse
import os
import sys
import time

from hostcheck.commands.common import (
    EXIT_USAGE,
    UsageError,
    load,
    profile_options,
    report_option,
    report_targets,
)


def add_parser(commands: argparse._SubParsersAction) -> None:
    loop = commands.add_parser(
        "loop",
        help="run the synthetic training loop (or sweep it) and show what it measured",
        description="Run the synthetic DataLoader training loop once with the profile's loop "
        "section and these flags on top, or --sweep num_workers, pin_memory and the "
        "prefetcher and recommend a setting. The verdict is the loop check's.",
    )
    profile_options(loop)
    shape = loop.add_argument_group("loop shape (defaults: the profile's loop section)")
    shape.add_argument("--device", choices=("auto", "cpu", "cuda"))
    shape.add_argument(
        "--sample",
        choices=("jpeg", "busy", "sleep"),
        help="jpeg: decode, random-resized-crop, flip; busy: calibrated CPU; sleep: a wait",
    )
    shape.add_argument("--sample-cost-us", type=float, metavar="US", help="busy/sleep cost")
    shape.add_argument("--batch-size", type=int, metavar="N")
    shape.add_argument("--workers", type=int, metavar="N", help="num_workers")
    shape.add_argument("--pin-memory", action=argparse.BooleanOptionalAction, default=None)
    shape.add_argument("--prefetch-factor", type=int, metavar="N")
    shape.add_argument("--persistent-workers", action=argparse.BooleanOptionalAction, default=None)
    shape.add_argument(
        "--prefetcher",
        action=argparse.BooleanOptionalAction,
        default=None,
        help="copy the next batch while the step runs (CUDA side stream, or a thread)",
    )
    shape.add_argument("--step-ms", type=float, metavar="MS", help="compute time per step")
    shape.add_argument("--seconds", type=float, metavar="S", help="measured time per run")
    shape.add_argument("--dataset-path", metavar="PATH", help="read samples from files here")
    shape.add_argument(
        "--ranks",
        type=int,
        metavar="N",
        help="training processes per host sharing its cores (default: loop.ranks, else one "
        "per NVIDIA GPU, else 1)",
    )
    loop.add_argument("--sweep", action="store_true", help="sweep and recommend a setting")
    loop.add_argument(
        "--max-workers",
        type=int,
        metavar="N",
        help="sweep up to N workers (default: physical cores // ranks, at least 1)",
    )
    loop.add_argument("--plot", metavar="PNG", help="with --sweep: write the sweep as a PNG")
    loop.add_argument(
        "--write",
        metavar="PATH",
        help="with --sweep: write the recommendation as the DataLoader settings file training "
        "code reads (hostcheck.dataloader; usually /etc/hostcheck/dataloader.json)",
    )
    report_option(loop, "json:PATH, junit:PATH or prom:PATH")
    loop.add_argument("-v", "--verbose", action="store_true", help="show every finding")


def _loop_assignments(args: argparse.Namespace) -> list[str]:
    pairs = {
        "device": args.device,
        "sample": args.sample,
        "sample_cost_us": args.sample_cost_us,
        "batch_size": args.batch_size,
        "num_workers": args.workers,
        "pin_memory": args.pin_memory,
        "prefetch_factor": args.prefetch_factor,
        "persistent_workers": args.persistent_workers,
        "prefetcher": args.prefetcher,
        "step_time": None if args.step_ms is None else args.step_ms / 1000,
        "seconds": args.seconds,
    }
    shown = {True: "true", False: "false"}
    return [
        f"loop.{key}={shown.get(value, value) if isinstance(value, bool) else value}"
        for key, value in pairs.items()
        if value is not None
    ]


def run(args: argparse.Namespace) -> int:

    from rich.console import Console
    from rich.text import Text

    from hostcheck._shared.dataloader_workload import sweep_max_workers
    from hostcheck.checks import loop as loop_check
    from hostcheck.checks.base import RunOptions
    from hostcheck.commands import loop_runs
    from hostcheck.report.document import build_document
    from hostcheck.report.table import render_table
    from hostcheck.report.writers import write_report
    from hostcheck.system import System

    for option, value in (("--plot", args.plot), ("--write", args.write)):
        if value and not args.sweep:
            raise UsageError(f"{option} needs --sweep")
    if args.plot and not os.path.isdir(os.path.dirname(os.path.abspath(args.plot))):
        raise UsageError(f"--plot {args.plot}: directory does not exist")
    if args.write:
        problem = loop_runs.write_target_problem(args.write)
        if problem:
            raise UsageError(f"--write {args.write}: {problem}")
    if args.max_workers is not None and args.max_workers < 0:
        raise UsageError("--max-workers must be 0 or more")
    if args.ranks is not None and args.ranks < 1:
        raise UsageError("--ranks must be 1 or more")
    if args.dataset_path and not os.path.isdir(args.dataset_path):
        raise UsageError(f"--dataset-path {args.dataset_path}: not a directory")
    targets = report_targets(args.report)
    ranks = [] if args.ranks is None else [f"loop.ranks={args.ranks}"]
    profile = load(args, [*_loop_assignments(args), *ranks])
    section = profile.section("loop")
    missing = loop_check._missing("torch") or (
        section["sample"] == "jpeg" and loop_check._missing("PIL")
    )
    if missing:
        raise UsageError(f"the loop needs {missing}, which this Python cannot import")
    began = time.time()
    system = System()
    settings, data = loop_check.prepare(system, section, args.dataset_path)
    to_stdout = any(path == "-" for _, path in targets)
    console = Console(stderr=to_stdout, highlight=False)
    from hostcheck.runner import outcome_of

    try:
        if args.sweep:
            budget = sweep_max_workers(data["physical_cores"], data["ranks"])
            max_workers = budget if args.max_workers is None else args.max_workers
            check, lines = loop_runs.run_sweep(
                settings, section, max_workers, console, data, args.plot
            )
        else:
            check, lines = loop_runs.run_once(settings, section, console, data)
    except RuntimeError as exc:  # e.g. --device cuda without a GPU
        raise UsageError(str(exc)) from None
    options = RunOptions(dataset_path=args.dataset_path)
    outcome = outcome_of([check], began, profile, options)
    exit_code = outcome.exit_code()
    document = build_document(outcome, exit_code, system.read("/etc/os-release"))
    render_table(document, console, verbose=args.verbose or not args.sweep)
    for line in lines:
        console.print(Text(line))
    if args.write:
        try:
            line = loop_runs.write_settings(args.write, check, settings, system)
            console.print(Text(line), soft_wrap=True)  # a path in one piece
        except OSError as exc:
            print(f"hostcheck: error: --write {args.write}: {exc.strerror}", file=sys.stderr)
            return EXIT_USAGE
    for kind, path in targets:
        try:
            write_report(kind, path, document)
        except OSError as exc:
            print(f"hostcheck: error: --report {kind}:{path}: {exc.strerror}", file=sys.stderr)
            return EXIT_USAGE
    return exit_code
