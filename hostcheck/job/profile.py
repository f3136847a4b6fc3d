"""The profile's `job` section: the thresholds of `hostcheck job` beside the loop's data-wait
(`checks.loop.max_data_wait`, shared with `hostcheck run`)."""

from __future__ import annotations

from hostcheck import config as c

SCHEMA = c.obj(
    {
        # a GPU the job used, busy less than this share of the steady run, fails
        "min_gpu_utilization": c.FRACTION,
    }
)
