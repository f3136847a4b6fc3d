#!/usr/bin/env python3
"""Wall time of `hostcheck healthcheck` (as Slurm runs it, without scontrol) on a sandbox host,
next to LBNL NHC running the equivalent checks (benchmarks/nhc-quick.conf) and Python's own
start-up on the same host, measured alternately in one run (compare the ratios).

    sudo .venv/bin/python benchmarks/healthcheck_time.py --nhc PATH-TO-nhc [--repeat N] [--gpus 8]

The host is one Debian 12 sandbox host; hostcheck is installed there from this checkout's wheel
into a venv, as the hostcheck role installs it (without torch: the checks timed need none).
Its profile is quick with the checks NHC's configuration has no counterpart for switched off
(pillow, gpu, storage, dataloader), and it reads a full report's measurements and keeps its
state as it does under Slurm. The times are taken on the host, so SSH is not in them.

With --gpus N a fourth case runs the same health check with the gpu check on N fake GPUs
(tests/sandbox/fake_nvml.c loaded by the real pynvml, PCI functions bound over
/sys/bus/pci/devices, an empty kernel log in /dev/kmsg's format): the GPU fault checks' cost.
NHC's GPU check needs DCGM, which is not here: the ratio is against its quick checks alone.
"""

from __future__ import annotations

import argparse
import io
import json
import subprocess
import sys
import tarfile
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from tests.integration.ansible import build_wheel
from tests.sandbox.fleet import CHECKOUT, Fleet

HERE = Path(__file__).resolve().parent
BUDGET_S = 2.0  # the goals: at most 2 s and at most 1.5x NHC on the same checks
RATIO_GOAL = 1.5
SAME_CHECKS = "checks: {pillow: {enabled: false}, gpu: {enabled: false}, "
SAME_CHECKS += "storage: {enabled: false}, dataloader: {enabled: false}}\n"
VENV = "/opt/venvs/train"
# Run on the host: the cases alternately, then the medians as JSON.
TIMER = """
import json, statistics, subprocess, sys, time
cases, repeat = json.loads(sys.argv[1]), int(sys.argv[2])
for argv in cases.values():
    subprocess.run(argv, capture_output=True)
times = {name: [] for name in cases}
codes = {name: set() for name in cases}
for _ in range(repeat):
    for name, argv in cases.items():
        began = time.perf_counter()
        code = subprocess.run(argv, capture_output=True).returncode
        times[name].append(time.perf_counter() - began)
        codes[name].add(code)
print(json.dumps({n: [statistics.median(t), min(t), sorted(codes[n])] for n, t in times.items()}))
"""


def tar_of(files: dict[str, Path]) -> bytes:
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w") as tar:
        for name, path in files.items():
            tar.add(path, arcname=name)
    return buffer.getvalue()


def ssh_in(fleet: Fleet, host, command: str, data: bytes) -> None:
    done = subprocess.run(
        fleet.ssh_argv(host, command), input=data, capture_output=True, timeout=600, check=False
    )
    if done.returncode != 0:
        raise SystemExit(f"{command}: {done.stderr.decode(errors='replace')}")


def must(fleet: Fleet, host, command: str, timeout: float = 600) -> str:
    done = fleet.ssh(host, command, timeout=timeout)
    if done.returncode != 0:
        raise SystemExit(f"{command}: {done.stdout}{done.stderr}")
    return done.stdout


def add_fake_gpus(fleet: Fleet, host, count: int, cases: dict) -> list[str]:
    """N fake GPUs on the host, and the health check's argv with the gpu check on."""
    from importlib.metadata import version

    from tests.integration.cuda_fakes import cuda_torch_venv, files_tar, pci_gpus_shell
    from tests.support.fake_libnvml import build_fake_nvml

    library = build_fake_nvml(Path(tempfile.mkdtemp(prefix="nvml-")), gpus=count)
    ssh_in(fleet, host, "cat > /usr/lib/x86_64-linux-gnu/libnvidia-ml.so.1 && ldconfig",
           library.read_bytes())  # fmt: skip
    ssh_in(fleet, host, "tar -x -C /", files_tar(cuda_torch_venv("/srv/bench/cuda-venv")))
    must(fleet, host, f"{VENV}/bin/pip install -q nvidia-ml-py=={version('nvidia-ml-py')} && "
         "mkdir -p /etc/fake-nvml && : > /etc/fake-nvml/state && : > /srv/bench/kmsg && "
         + pci_gpus_shell(count))  # fmt: skip
    gpu = SAME_CHECKS.replace(
        "gpu: {enabled: false}",
        "gpu: {training_venv: /srv/bench/cuda-venv, kernel_log: /srv/bench/kmsg}, "
        "memory: {min_ram_per_gpu: 1MiB}",
    )
    must(fleet, host, f"cat > /srv/bench/gpu.yaml <<'EOF'\n{gpu}EOF")
    argv = list(cases["hostcheck healthcheck"])
    argv[argv.index("/srv/bench/same.yaml")] = "/srv/bench/gpu.yaml"
    return argv


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--nhc", type=Path, required=True, help="nhc of an LBNL NHC checkout")
    parser.add_argument("--repeat", type=int, default=20)
    parser.add_argument(
        "--gpus", type=int, default=0, help="also time the gpu check on N fake GPUs"
    )
    args = parser.parse_args()
    if not (args.nhc.is_file() and (args.nhc.parent / "scripts").is_dir()):
        parser.error(f"--nhc {args.nhc}: not an nhc script with a scripts/ folder beside it")
    wheel = Path(build_wheel(CHECKOUT, Path(tempfile.mkdtemp(prefix="wheel-"))))
    fleet = Fleet(instance="bench-healthcheck", os_kinds="debian12", log=lambda _: None)
    try:
        (host,) = fleet.up(1)
        files = {
            wheel.name: wheel,
            "nhc/nhc": args.nhc,
            "nhc/scripts": args.nhc.parent / "scripts",
            "nhc-quick.conf": HERE / "nhc-quick.conf",
        }
        ssh_in(fleet, host, "mkdir -p /srv/bench && tar xf - -C /srv/bench", tar_of(files))
        must(
            fleet,
            host,
            f"python3 -m venv {VENV} && {VENV}/bin/pip install -q /srv/bench/{wheel.name}",
        )
        must(fleet, host, f"cat > /srv/bench/same.yaml <<'EOF'\n{SAME_CHECKS}EOF")
        common = [f"{VENV}/bin/hostcheck", "--profile", "quick", "--config", "/srv/bench/same.yaml"]
        report = "/srv/bench/report.json"
        full = [common[0], "run", *common[1:], "--reuse-measurements", report]
        fleet.ssh(host, " ".join([*full, "--report", f"json:{report}"]))
        cases = {
            "python3 -c pass": [f"{VENV}/bin/python", "-c", "pass"],
            "hostcheck healthcheck": [
                common[0], "healthcheck", *common[1:], "--measurements", report,
                "--state-dir", "/srv/bench/state",
            ],
            "nhc (nhc-quick.conf)": [
                "/srv/bench/nhc/nhc", "-D", "/srv/bench/nhc-state", "-c",
                "/srv/bench/nhc-quick.conf", "-l", "/srv/bench/nhc-state/log",
                "-a", "INCDIR=/srv/bench/nhc/scripts",
            ],
        }  # fmt: skip
        if args.gpus:
            cases["healthcheck + gpu check"] = add_fake_gpus(fleet, host, args.gpus, cases)
        must(fleet, host, "mkdir -p /srv/bench/nhc-state")
        ssh_in(fleet, host, "cat > /srv/bench/timer.py", TIMER.encode())
        quoted = json.dumps(json.dumps(cases))
        out = must(fleet, host, f"python3 /srv/bench/timer.py {quoted} {args.repeat}", 1800)
        results = json.loads(out.strip().splitlines()[-1])
    finally:
        fleet.down(quiet=True)
    print(f"on a Debian 12 sandbox host, {args.repeat} alternating runs of each:")
    print(f"{'command':24} {'median s':>9} {'min s':>7}  exit codes")
    for name, (median, least, codes) in results.items():
        print(f"{name:24} {median:9.3f} {least:7.3f}  {codes}")
    health = results["hostcheck healthcheck"][0]
    nhc = results["nhc (nhc-quick.conf)"][0]
    if "healthcheck + gpu check" in results:
        with_gpus = results["healthcheck + gpu check"][0]
        print(
            f"\nwith the gpu check on {args.gpus} fake GPUs: {with_gpus:.3f} s median, "
            f"{with_gpus / nhc:.2f}x NHC's quick checks, {with_gpus - health:+.3f} s for the GPUs"
        )
    print(
        f"\nhealth check: {health:.3f} s median "
        f"({'within' if health <= BUDGET_S else 'OVER'} the {BUDGET_S} s goal)\n"
        f"health check / NHC: {health:.3f} / {nhc:.3f} = {health / nhc:.2f}x "
        f"({'within' if health / nhc <= RATIO_GOAL else 'OVER'} the {RATIO_GOAL}x goal)"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
