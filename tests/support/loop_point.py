"""Run one configuration of the loop and print its result as JSON.

    python loop_point.py '{"sample": "busy", "sample_cost_s": 0.01, ...}'
    python loop_point.py '[{...}, {...}]'      (several: a list of results)

Started by the tests in a session of its own (start_new_session=True): with the kernel's
autogroup scheduling, CPU time is shared between sessions first, so on a shared machine the
experiment asks for a larger share of its own session (/proc/self/autogroup, root only).
That is experimental control for checking arithmetic; hostcheck itself never does it.
"""

import json
import sys
import time


def raise_share() -> str:
    try:
        with open("/proc/self/autogroup", "w") as handle:
            handle.write("-15")
        return "autogroup nice -15"
    except OSError as exc:
        return f"autogroup unchanged ({exc.strerror})"


def runqueue_wait_s() -> float:
    """Time the loop's own thread (the one taking batches) has waited for a CPU: a loaded
    machine delays its wake-ups after each step too, not only the workers."""
    with open("/proc/self/schedstat") as handle:
        return int(handle.read().split()[1]) / 1e9


def main() -> int:
    share = raise_share()
    from hostcheck.loop import measure
    from hostcheck.loop.settings import LoopSettings

    def one(kwargs: dict) -> dict:
        if "sample_shape" in kwargs:
            kwargs["sample_shape"] = tuple(kwargs["sample_shape"])
        waited, started = runqueue_wait_s(), time.monotonic()
        data = measure.run(LoopSettings(**kwargs)).to_dict()
        elapsed = time.monotonic() - started
        data["loop_cpu_wait_cores"] = (runqueue_wait_s() - waited) / elapsed
        data["share"] = share
        return data

    asked = json.loads(sys.argv[1])
    json.dump([one(k) for k in asked] if isinstance(asked, list) else one(asked), sys.stdout)
    return 0


if __name__ == "__main__":
    sys.exit(main())
