"""A thin fake of pynvml: GPUs as plain data, and a stand-in module with only the functions
hostcheck's gpu check and the loop's link reading call."""

import types
from dataclasses import dataclass, field
from typing import ClassVar

import pynvml

IDLE = pynvml.nvmlClocksThrottleReasonGpuIdle


class FakeNVMLError(Exception):
    TEXT: ClassVar[dict[int, str]] = {
        3: "Not Supported",
        9: "Driver Not Loaded",
        2: "Invalid Argument",
        12: "NVML Shared Library Not Found",
        15: "GPU is lost",
        18: "RM has detected an NVML/RM version mismatch.",
    }

    def __init__(self, value):
        super().__init__(value)
        self.value = value

    def __str__(self):
        return self.TEXT.get(self.value, f"NVML Error with code {self.value}")


@dataclass
class FakeGpu:
    index: int
    name: str = "NVIDIA H100 80GB HBM3"
    persistence: int = 1
    gen: int = 1  # idle GPUs train their link down
    max_gen: int = 5
    width: int = 16
    max_width: int = 16
    events: int = IDLE
    ecc_mode: object = (1, 1)  # (current, pending); an int error code: not supported
    ecc: dict = field(default_factory=dict)
    lost: bool = False
    # (corrected, uncorrected, pending, failure) as nvmlDeviceGetRemappedRows; an int: error code
    remapped_rows: object = (0, 0, 0, 0)
    # {"single": n, "double": n, "pending": 0 or 1}; an int: error code (Ampere and newer: 3)
    retired_pages: object = 3
    # 1 up, 0 down, per link (an SXM H100 has 18); an int: error code (PCIe only: 3)
    nvlinks: object = field(default_factory=lambda: [1] * 18)

    @property
    def bus_id(self):
        return f"00000000:{0x18 + self.index:02X}:00.0"


def fake_nvml(gpus, driver="550.54.15", cuda=12040, init_error=None, events_api=True):
    """A stand-in for the pynvml module with only the functions the check calls."""
    calls = {"init": 0, "shutdown": 0}

    def check(code):
        if code:
            raise FakeNVMLError(code)

    def init():
        calls["init"] += 1
        check(init_error)

    def handle(index):
        check(15 if gpus[index].lost else 0)
        return gpus[index]

    def ecc_mode(h):
        if isinstance(h.ecc_mode, int):
            raise FakeNVMLError(h.ecc_mode)
        return list(h.ecc_mode)

    def answer(value):
        if isinstance(value, int):
            raise FakeNVMLError(value)
        return value

    def retired(h, cause):
        pages = answer(h.retired_pages)
        return [0x1000 * i for i in range(pages["single" if cause == 0 else "double"])]

    def nvlink(h, link):
        links = answer(h.nvlinks)
        if link >= len(links):
            raise FakeNVMLError(2)
        return links[link]

    nv = types.SimpleNamespace(
        NVMLError=FakeNVMLError,
        calls=calls,
        nvmlInit=init,
        nvmlShutdown=lambda: calls.__setitem__("shutdown", calls["shutdown"] + 1),
        nvmlSystemGetDriverVersion=lambda: driver,
        nvmlSystemGetCudaDriverVersion_v2=lambda: cuda,
        nvmlDeviceGetCount=lambda: len(gpus),
        nvmlDeviceGetHandleByIndex=handle,
        nvmlDeviceGetName=lambda h: h.name,
        nvmlDeviceGetUUID=lambda h: f"GPU-0000{h.index}",
        nvmlDeviceGetPciInfo=lambda h: types.SimpleNamespace(busId=h.bus_id.encode()),
        nvmlDeviceGetPersistenceMode=lambda h: h.persistence,
        nvmlDeviceGetCurrPcieLinkGeneration=lambda h: h.gen,
        nvmlDeviceGetMaxPcieLinkGeneration=lambda h: h.max_gen,
        nvmlDeviceGetGpuMaxPcieLinkGeneration=lambda h: h.max_gen,
        nvmlDeviceGetCurrPcieLinkWidth=lambda h: h.width,
        nvmlDeviceGetMaxPcieLinkWidth=lambda h: h.max_width,
        nvmlDeviceGetCurrentClocksThrottleReasons=lambda h: h.events,
        nvmlDeviceGetEccMode=ecc_mode,
        nvmlDeviceGetTotalEccErrors=lambda h, kind, counter: h.ecc.get((kind, counter), 0),
        nvmlDeviceGetRemappedRows=lambda h: tuple(answer(h.remapped_rows)),
        nvmlDeviceGetRetiredPages=retired,
        nvmlDeviceGetRetiredPagesPendingStatus=lambda h: answer(h.retired_pages)["pending"],
        nvmlDeviceGetNvLinkState=nvlink,
    )
    if events_api:
        nv.nvmlDeviceGetCurrentClocksEventReasons = lambda h: h.events
    return nv
