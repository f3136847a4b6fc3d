"""The loop's shape and workload: the `loop` section of a profile, as a data class.

No torch here: the check, the CLI and the profile schema import this module.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

from hostcheck import config as c
from hostcheck._shared.sizes import parse_size

DEVICES = ("auto", "cpu", "cuda")
SAMPLES = ("jpeg", "busy", "sleep")
START_METHODS = ("fork", "forkserver", "spawn")

SCHEMA = c.obj(
    {
        "device": {"enum": list(DEVICES)},
        "sample": {"enum": list(SAMPLES)},
        "sample_cost_us": {"type": "number", "minimum": 0},
        "image_size": {"type": "integer", "minimum": 8, "maximum": 4096},
        "jpeg_size": {
            "type": "array",
            "items": {"type": "integer", "minimum": 16, "maximum": 8192},
            "minItems": 2,
            "maxItems": 2,
        },
        "dataset_path": c.nullable({"type": "string", "minLength": 1}),
        "batch_size": c.POSITIVE_INT,
        "num_workers": c.nullable({"type": "integer", "minimum": 0, "maximum": 512}),
        "ranks": c.nullable(c.POSITIVE_INT),
        "pin_memory": {"type": "boolean"},
        "prefetch_factor": c.POSITIVE_INT,
        "persistent_workers": {"type": "boolean"},
        "prefetcher": {"type": "boolean"},
        "step_time": {"type": "number", "minimum": 0, "maximum": 60},
        "seconds": {"type": "number", "exclusiveMinimum": 0, "maximum": 3600},
        "warmup_batches": {"type": "integer", "minimum": 0},
        "timeout": {"type": "number", "exclusiveMinimum": 0},
        "max_data_wait": c.FRACTION,
        "min_link_fraction": c.FRACTION,
        "bandwidth_bytes": c.SIZE,
        "bandwidth_repeats": c.POSITIVE_INT,
        "sweep_tolerance": c.FRACTION,
    }
)


@dataclass
class LoopSettings:
    """One configuration of the loop. Field names follow the DataLoader's arguments."""

    device: str = "auto"
    sample: str = "jpeg"
    sample_cost_s: float = 0.002  # busy and sleep samples
    image_size: int = 224
    jpeg_size: tuple[int, int] = (640, 480)
    dataset_path: str | None = None
    batch_size: int = 32
    num_workers: int = 1
    pin_memory: bool = True
    prefetch_factor: int = 2
    persistent_workers: bool = True
    prefetcher: bool = True
    step_time: float = 0.1
    seconds: float = 3.0
    warmup_batches: int = 2
    timeout: float = 60.0
    # not in profiles: for experiments and tests
    sample_shape: tuple[int, ...] | None = None  # busy/sleep samples; None: 3 x size x size
    sample_dtype: str = "uint8"  # uint8 | float32
    start_method: str = "fork"
    startup_both: bool = True  # also measure epoch start-up with the other persistent_workers
    min_batches: int = 6  # measured batches at least
    max_batches: int = 100_000
    check_open_files: bool = True  # refuse to start when the nofile limit is surely too low

    def replace(self, **changes: object) -> LoopSettings:
        return dataclasses.replace(self, **changes)

    def loader_kwargs(self) -> dict:
        """The DataLoader arguments this configuration stands for (as a user would write)."""
        kwargs: dict = {
            "batch_size": self.batch_size,
            "num_workers": self.num_workers,
            "pin_memory": self.pin_memory,
        }
        if self.num_workers > 0:
            kwargs["prefetch_factor"] = self.prefetch_factor
            kwargs["persistent_workers"] = self.persistent_workers
        return kwargs

    def label(self) -> str:
        parts = [f"workers={self.num_workers}", f"pin={'on' if self.pin_memory else 'off'}"]
        parts.append(f"prefetcher={'on' if self.prefetcher else 'off'}")
        if self.num_workers:
            parts.append(f"prefetch_factor={self.prefetch_factor}")
        return " ".join(parts)


def from_section(section: dict, num_workers: int) -> LoopSettings:
    """Settings from a validated `loop` profile section; `num_workers` resolves its null."""
    workers = section.get("num_workers")
    return LoopSettings(
        device=section["device"],
        sample=section["sample"],
        sample_cost_s=section["sample_cost_us"] / 1e6,
        image_size=section["image_size"],
        jpeg_size=tuple(section["jpeg_size"]),
        dataset_path=section["dataset_path"],
        batch_size=section["batch_size"],
        num_workers=num_workers if workers is None else workers,
        pin_memory=section["pin_memory"],
        prefetch_factor=section["prefetch_factor"],
        persistent_workers=section["persistent_workers"],
        prefetcher=section["prefetcher"],
        step_time=section["step_time"],
        seconds=section["seconds"],
        warmup_batches=section["warmup_batches"],
        timeout=section["timeout"],
    )


def bandwidth_bytes(section: dict) -> int:
    return parse_size(section["bandwidth_bytes"])
