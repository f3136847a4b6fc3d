"""Run one configuration of the loop and print its result as JSON.

    python loop_point.py '{"sample": "busy", "sample_cost_s": 0.01, ...}'

Started by the tests in a session of its own (start_new_session=True): with the kernel's
autogroup scheduling, CPU time is shared between sessions first, so on a shared machine the
experiment asks for a larger share of its own session (/proc/self/autogroup, root only).
That is experimental control for checking arithmetic; hostcheck itself never does it.
"""

import json
import sys


def raise_share() -> str:
    try:
        with open("/proc/self/autogroup", "w") as handle:
            handle.write("-15")
        return "autogroup nice -15"
    except OSError as exc:
        return f"autogroup unchanged ({exc.strerror})"


def main() -> int:
    share = raise_share()
    from hostcheck.loop import measure
    from hostcheck.loop.settings import LoopSettings

    kwargs = json.loads(sys.argv[1])
    if "sample_shape" in kwargs:
        kwargs["sample_shape"] = tuple(kwargs["sample_shape"])
    result = measure.run(LoopSettings(**kwargs))
    data = result.to_dict()
    data["share"] = share
    json.dump(data, sys.stdout)
    return 0


if __name__ == "__main__":
    sys.exit(main())
