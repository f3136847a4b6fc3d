"""The GPU faults that take a node out: row remapping, retired pages, NVLink, a driver NVML
cannot use, Fabric Manager, and Xid/SXid events from the kernel log; each through the gpu check
and the health verdict (what drains, with what reason)."""

import pytest

from hostcheck.checks import gpu
from hostcheck.health.verdict import HEALTHY, UNHEALTHY, decide
from hostcheck.model import Status
from tests.support.fake_nvml import FakeGpu, fake_nvml
from tests.unit.hostcheck.checks.test_gpu import add_pci_gpus, add_torch, config, eight, finding

KMSG = "/dev/kmsg"  # a file in the fixture root, in /dev/kmsg's record format
XID_79 = "NVRM: Xid (PCI:0000:1a:00): 79, pid=991, name=python, GPU has fallen off the bus."


@pytest.fixture
def node(fake_host):
    add_torch(fake_host)
    add_pci_gpus(fake_host, 8)
    fake_host.file("/proc/sys/kernel/random/boot_id", "b0\n")
    fake_host.file("/proc/uptime", "3600.00 7000.00\n")
    fake_host.file(KMSG, "6,1,1,-;Linux version 6.1.0\n")
    return fake_host


def run(node, gpus, **changes):
    return gpu.run_with(node.context(config(**changes)), fake_nvml(gpus))


def verdict(result):
    return decide([result], [], {}, "", {}, 2)


def add_kmsg(node, *lines):
    path = node.root / KMSG.lstrip("/")
    seq = len(path.read_text().splitlines())
    with open(path, "a") as handle:
        for line in lines:
            seq += 1
            handle.write(f"3,{seq},{seq},-;{line}\n")


def test_a_healthy_sxm_node_passes_every_new_reading(node):
    result = run(node, eight())
    assert result.status == Status.PASS, result.summary
    assert finding(result, "gpu0 row remapping").display == (
        "0 rows remapped after corrected, 0 after uncorrected errors"
    )
    assert finding(result, "gpu0 retired pages").status == Status.SKIP
    assert finding(result, "gpu7 nvlink").display == "18 of 18 links up"
    assert finding(result, "xid").display == "no Xid or SXid since boot"
    assert result.data["gpus"][0]["memory_repair"]["remapped_rows"]["pending"] is False


def test_a_pending_row_remap_drains_naming_the_gpu_and_the_reset(node):
    gpus = eight()
    gpus[2].remapped_rows = (0, 1, 1, 0)
    result = run(node, gpus)
    remap = finding(result, "gpu2 row remapping")
    assert remap.status == Status.FAIL
    assert remap.display.startswith(
        "a row remap is pending on 0000:1a:00.0 until the GPU is reset (a GPU reset clears it)"
    )
    decided = verdict(result)
    assert decided.state == UNHEALTHY
    assert "gpu2 row remapping a row remap is pending on 0000:1a:00.0" in decided.summary()


def test_a_failed_row_remap_drains_for_a_replacement(node):
    gpus = eight()
    gpus[5].remapped_rows = (2, 8, 0, 1)
    remap = finding(run(node, gpus), "gpu5 row remapping")
    assert remap.status == Status.FAIL
    assert "a row remap failed on 0000:1d:00.0" in remap.display
    assert "replace the GPU" in remap.remedy


@pytest.mark.parametrize(
    ("pages", "status", "shown"),
    [
        ({"single": 10, "double": 2, "pending": 0}, Status.PASS, "12 pages retired"),
        ({"single": 40, "double": 30, "pending": 0}, Status.FAIL, "70 pages retired"),
        ({"single": 1, "double": 1, "pending": 1}, Status.FAIL, "a page retirement is pending"),
    ],
)
def test_retired_pages_on_a_gpu_before_ampere(node, pages, status, shown):
    gpus = [
        FakeGpu(i, "Tesla V100-SXM2-32GB", remapped_rows=3, retired_pages=pages) for i in range(8)
    ]
    result = run(node, gpus)
    retired = finding(result, "gpu0 retired pages")
    assert retired.status == status
    assert shown in retired.display
    assert finding(result, "gpu0 row remapping").status == Status.SKIP


def test_no_limit_on_retired_pages_only_reports_them(node):
    pages = {"single": 90, "double": 9, "pending": 0}
    gpus = [FakeGpu(i, remapped_rows=3, retired_pages=pages) for i in range(8)]
    retired = finding(run(node, gpus, max_retired_pages=None), "gpu0 retired pages")
    assert retired.status == Status.PASS


def test_a_link_down_drains_after_the_boot_grace(node):
    gpus = eight()
    gpus[4].nvlinks = [1] * 12 + [0] + [1] * 5
    link = finding(run(node, gpus), "gpu4 nvlink")
    assert link.status == Status.FAIL
    assert link.display == "17 of 18 links up on 0000:1c:00.0, down: 12"
    assert link.expected == "18 of 18 up"


def test_a_link_down_just_after_boot_warns(node):
    node.file("/proc/uptime", "42.50 80.00\n")
    gpus = eight()
    gpus[4].nvlinks = [0] * 18
    node.file("/sys/bus/pci/devices/0000:5a:00.0/vendor", "0x10de\n")
    node.file("/sys/bus/pci/devices/0000:5a:00.0/class", "0x068000\n")
    node.command(["systemctl", "is-active", "nvidia-fabricmanager"], "active\n")
    link = finding(run(node, gpus), "gpu4 nvlink")
    assert link.status == Status.WARN
    assert "42 s after boot: links may still be training" in link.display


def test_no_link_up_and_no_nvswitch_is_a_gpu_without_a_bridge(node):
    gpus = eight()
    for g in gpus:
        g.nvlinks = [0] * 12
    result = run(node, gpus)
    assert finding(result, "gpu0 nvlink").status == Status.SKIP
    assert result.status == Status.PASS


def test_a_pcie_only_gpu_has_no_nvlink_finding_to_fail(node):
    gpus = [FakeGpu(i, name="NVIDIA L40S", nvlinks=3) for i in range(8)]
    assert finding(run(node, gpus), "gpu0 nvlink").display == "no NVLink (a PCIe-only GPU)"


@pytest.mark.parametrize(("state", "status"), [("active", Status.PASS), ("inactive", Status.FAIL)])
def test_fabric_manager_is_required_where_nvswitches_are(node, state, status):
    for address in ("0000:5a:00.0", "0000:5b:00.0"):
        node.file(f"/sys/bus/pci/devices/{address}/vendor", "0x10de\n")
        node.file(f"/sys/bus/pci/devices/{address}/class", "0x068000\n")
    rc = 0 if state == "active" else 3
    node.command(["systemctl", "is-active", "nvidia-fabricmanager"], state + "\n", rc=rc)
    result = run(node, eight())
    fabric = finding(result, "fabric manager")
    assert (fabric.status, fabric.measured) == (status, state)
    assert "2 NVSwitches on the PCI bus" in fabric.display
    assert result.data["nvswitches"] == ["0000:5a:00.0", "0000:5b:00.0"]


def test_no_fabric_manager_finding_without_nvswitches(node):
    assert not [f for f in run(node, eight()).findings if f.name == "fabric manager"]


def test_a_driver_nvml_cannot_load_beside_gpus_on_the_bus_is_unhealthy(node):
    nv = fake_nvml(eight(), init_error=18)
    result = gpu.run_with(node.context(config()), nv)
    driver = finding(result, "driver")
    assert driver.status == Status.FAIL
    assert driver.display == (
        "RM has detected an NVML/RM version mismatch. (NVML error 18); "
        "8 NVIDIA GPU(s) on the PCI bus, none usable"
    )
    assert driver.remedy.startswith("reboot the node")
    assert verdict(result).state == UNHEALTHY


def test_fewer_gpus_than_on_the_bus_says_how_many_are_missing(node):
    result = run(node, eight()[:6])
    assert finding(result, "gpus").display == "6 visible to NVML, 8 on the PCI bus: 2 missing"
    assert verdict(result).state == UNHEALTHY


def test_an_xid_79_drains_with_the_gpu_index_bus_and_what_clears_it(node):
    add_kmsg(node, XID_79)
    result = run(node, eight())
    event = finding(result, "gpu2 xid")
    assert event.status == Status.FAIL
    assert event.display == (
        "Xid 79 x1 (GPU has fallen off the bus) on 0000:1a:00.0 since boot (a reboot clears it)"
    )
    assert event.measured == {"79": 1}
    assert "power-cycle" in event.remedy
    assert "gpu: gpu2 xid Xid 79 x1" in verdict(result).summary()


def test_the_same_xid_read_again_counts_once_and_still_drains(node):
    add_kmsg(node, XID_79)
    run(node, eight())
    again = run(node, eight())
    assert finding(again, "gpu2 xid").measured == {"79": 1}
    assert finding(again, "gpu2 xid").status == Status.FAIL
    assert again.data["events"]["kept"] is True


def test_a_job_s_own_xid_does_not_drain_and_an_unknown_one_warns(node):
    add_kmsg(
        node,
        "NVRM: Xid (PCI:0000:18:00): 13, pid=5, Graphics SM Warp Exception",
        "NVRM: Xid (PCI:0000:18:00): 31, pid=5, Ch 00000010, MMU Fault",
        "NVRM: Xid (PCI:0000:19:00): 998, pid=5, something new",
    )
    result = run(node, eight())
    job = finding(result, "gpu0 xid")
    assert job.status == Status.PASS
    assert job.measured == {"13": 1, "31": 1}
    assert finding(result, "gpu1 xid").status == Status.WARN
    assert verdict(result).state == HEALTHY


def test_the_worst_event_of_a_gpu_comes_first(node):
    add_kmsg(
        node,
        "NVRM: Xid (PCI:0000:18:00): 13, pid=5, Graphics Exception",
        "NVRM: Xid (PCI:0000:18:00): 94, pid=5, Contained: SM (0x1)",
        "NVRM: Xid (PCI:0000:18:00): 94, pid=6, Contained: SM (0x1)",
    )
    event = finding(run(node, eight()), "gpu0 xid")
    assert event.status == Status.FAIL
    assert event.display.startswith("Xid 94 x2 (contained uncorrectable ECC error")
    assert event.display.endswith("on 0000:18:00.0 since boot (a GPU reset clears it)")


def test_a_fatal_sxid_drains_naming_the_switch(node):
    node.file("/sys/bus/pci/devices/0000:5a:00.0/vendor", "0x10de\n")
    node.file("/sys/bus/pci/devices/0000:5a:00.0/class", "0x068000\n")
    node.command(["systemctl", "is-active", "nvidia-fabricmanager"], "active\n")
    add_kmsg(node, "nvidia-nvswitch0: SXid (PCI:0000:5a:00.0): 24007, Fatal, Link 44 sourcetrack")
    result = run(node, eight())
    switch = finding(result, "nvswitch sxid")
    assert switch.status == Status.FAIL
    assert "SXid 24007 x1 (fatal NVSwitch error 24007) on 0000:5a:00.0" in switch.display


def test_xids_are_read_when_nvml_cannot_start(node):
    add_kmsg(node, XID_79)
    result = gpu.run_with(node.context(config()), fake_nvml(eight(), init_error=9))
    assert finding(result, "gpu xid").display.startswith("Xid 79 x1")


def test_an_unreadable_kernel_log_skips_the_events_and_says_why(node):
    (node.root / "dev/kmsg").unlink()
    result = run(node, eight())
    event = finding(result, "xid")
    assert event.status == Status.SKIP
    assert event.display.startswith("cannot read /dev/kmsg: ")
    assert result.status == Status.PASS


def test_kernel_log_null_reads_no_events(node):
    result = run(node, eight(), kernel_log=None)
    assert not [f for f in result.findings if f.name.endswith("xid")]
