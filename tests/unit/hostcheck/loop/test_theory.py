"""The loop's measurements against arithmetic (hostcheck.loop.theory), on this machine.

Calibrated busy samples of cost c, batch b, w workers, a step of s (a wait, as a GPU step
is for the host): throughput about min(w / (c*b), 1 / s) batches/s, data-wait about
max(0, 1 - s*w / (c*b)) of step time; num_workers 0: 1 / (c*b + s). The points fit two
cores (at most two busy workers; the step is a sleep) and make c*b large against the
~1.5 ms a batch's hand-over from a worker costs here, which the model leaves out.

Each point runs in its own session (see loop_point.py) and gets up to five tries: this
machine is shared, and a try spoiled by other processes shows as time the workers waited for
a CPU. A point off the model in a try that was not spoiled fails the test; a point whose every
try was spoiled could not be measured, and the test skips saying so.
"""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from hostcheck.loop import theory
from tests.paths import CHECKOUT as REPO

# Out of the gate: it measures the loop against arithmetic (a minute of CPU);
# tests/selection.py runs it when these paths change, make test-all always.
COVERS = (
    "hostcheck/loop/*",
    "plugins/module_utils/*",
    "hostcheck/units.py",
    "hostcheck/interrupt.py",
    "tests/support/loop_point.py",
)

LOOP_POINT = REPO / "tests" / "support" / "loop_point.py"
TOLERANCE = 0.15
TRIES = 5
# a try whose workers waited this many cores' worth of time for a CPU measured the machine's
# other load, not the loop (a clean-clone make test saw 0.22 cores of waiting cost 2 workers
# 18 % of their throughput, beyond TOLERANCE; a fresh clone's gate saw 0.096 cores cost one worker
# 18 % too)
SPOILED_CPU_WAIT = 0.05

# (cost s, batch, workers, step s, prefetcher)
POINTS = [
    (0.005, 8, 0, 0.020, False),  # no workers: load, then step
    (0.010, 8, 1, 0.040, False),  # one worker, slower than the step
    (0.010, 16, 2, 0.050, True),  # two workers, slower than the step
    (0.005, 8, 2, 0.040, True),  # two workers, faster than the step: no wait
]


def run_points(points: list[dict]) -> list[dict]:
    done = subprocess.run(
        [sys.executable, str(LOOP_POINT), json.dumps(points)],
        capture_output=True,
        text=True,
        timeout=300,
        start_new_session=True,
        check=False,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    return json.loads(done.stdout)


def wait_tolerance(model: float) -> float:
    """15 % of the modelled data-wait, and never under 3 points of step time (a modelled
    wait of zero still leaves the hand-over's few hundred microseconds)."""
    return max(TOLERANCE * model, 0.03)


def settings_for(cost, batch, workers, step, prefetcher) -> dict:
    return {
        "device": "cpu",
        "sample": "busy",
        "sample_cost_s": cost,
        "batch_size": batch,
        "num_workers": workers,
        "step_time": step,
        "prefetcher": prefetcher,
        "seconds": 1.2,
        "sample_shape": [3, 32, 32],
        "startup_both": False,
    }


def judge(point: tuple, result: dict) -> tuple[bool, str]:
    model = theory.predict(*point)
    assert result["failure"] is None, result["failure"]
    assert result["batches"] >= 8
    ratio = result["batches_per_s"] / model.batches_per_s
    wait_off = abs(result["data_wait_fraction"] - model.data_wait_fraction)
    ok = abs(ratio - 1) <= TOLERANCE and wait_off <= wait_tolerance(model.data_wait_fraction)
    return ok, (
        f"{point}: throughput {result['batches_per_s']:.2f}/{model.batches_per_s:.2f} = "
        f"{ratio:.3f}, data-wait {result['data_wait_fraction']:.3f} vs "
        f"{model.data_wait_fraction:.3f}, workers waited for a CPU "
        f"{result['worker_cpu_wait_cores']} cores, the loop {result['loop_cpu_wait_cores']:.3f}"
        f" ({result['share']})"
    )


def spoiled(result: dict) -> bool:
    """The workers, or the loop's own thread, waited for a CPU (a full run at load 8 measured
    one worker at 0.80 of the model while the workers had waited only 0.018 cores)."""
    waited = (result.get("worker_cpu_wait_cores") or 0) + result["loop_cpu_wait_cores"]
    return waited > SPOILED_CPU_WAIT


def test_throughput_and_data_wait_follow_the_arithmetic():
    """All points in one process (one torch import); a point off by more than 15 % is
    measured again, up to five tries in all."""
    pending = list(POINTS)
    tries: dict[tuple, list[str]] = {p: [] for p in POINTS}
    clean: dict[tuple, int] = {p: 0 for p in POINTS}  # tries not spoiled by other load
    for _ in range(TRIES):
        results = run_points([settings_for(*p) for p in pending])
        still = []
        for point, result in zip(pending, results):
            ok, line = judge(point, result)
            tries[point].append(line)
            clean[point] += not spoiled(result)
            if not ok:
                still.append(point)
        pending = still
        if not pending:
            break
    failed = [point for point in pending if clean[point]]
    assert not failed, "measured vs model:\n" + "\n".join(
        line for point in failed for line in tries[point]
    )
    if pending:
        pytest.skip(
            f"other load kept the workers or the loop from a CPU (over {SPOILED_CPU_WAIT} cores)"
            f" in every try of {len(pending)} point(s): " + "; ".join(tries[pending[0]])
        )
