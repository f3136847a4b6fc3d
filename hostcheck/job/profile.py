"""The profile's `job` section: the thresholds of `hostcheck job` beside the loop's data-wait
(`checks.loop.max_data_wait`, shared with `hostcheck run`); hostcheck.job.waits reads the
stall and rank-skew ones."""

from __future__ import annotations

from hostcheck import config as c

SCHEMA = c.obj(
    {
        "stall_factor": {"type": "number", "minimum": 1},
        "stall_min_wait": c.NON_NEGATIVE,
        "max_rank_skew": c.NON_NEGATIVE,
        # a GPU the job used, busy less than this share of the steady run, fails
        "min_gpu_utilization": c.FRACTION,
    }
)
