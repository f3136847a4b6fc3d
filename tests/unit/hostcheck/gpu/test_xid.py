import pytest

from hostcheck.gpu import xid


@pytest.mark.parametrize(
    ("message", "code", "bus"),
    [
        (
            "NVRM: Xid (PCI:0000:3b:00): 79, pid=1234, name=python, GPU has fallen off the bus.",
            79,
            "0000:3b:00.0",
        ),
        ("NVRM: Xid (0000:03:00): 14, Channel 00000001", 14, "0000:03:00.0"),
        ("NVRM: Xid (PCI:0001:B1:00.1): 48, pid='<unknown>', DBE", 48, "0001:b1:00.1"),
        ("[  12.345] NVRM: Xid (PCI:00000000:18:00): 94, pid=7, Contained", 94, "0000:18:00.0"),
    ],
)
def test_xid_lines_are_parsed_with_the_bus_as_sysfs_names_it(message, code, bus):
    event = xid.parse(message)
    assert (event.kind, event.code, event.bus_id) == ("xid", code, bus)


def test_the_rest_of_the_line_is_kept():
    event = xid.parse("NVRM: Xid (PCI:0000:3b:00): 79, pid=1234, name=python, GPU has fallen off")
    assert event.text == "pid=1234, name=python, GPU has fallen off"


@pytest.mark.parametrize(
    ("message", "fatal", "action"),
    [
        ("nvidia-nvswitch3: SXid (PCI:0000:c1:00.0): 24007, Fatal, Link 44", True, xid.DRAIN),
        ("nvidia-nvswitch0: SXid (PCI:0000:05:00.0): 12028, Non-fatal, Link 32", False, xid.WARN),
    ],
)
def test_sxid_lines_say_whether_they_are_fatal(message, fatal, action):
    event = xid.parse(message)
    assert (event.kind, event.fatal, event.rule.action) == ("sxid", fatal, action)
    assert event.bus_id.startswith("0000:")


@pytest.mark.parametrize(
    "message",
    [
        "usb 1-1: new high-speed USB device number 2 using xhci_hcd",
        "NVRM: loading NVIDIA UNIX x86_64 Kernel Module  550.54.15",
        "NVRM: Xid without a bus",
    ],
)
def test_other_lines_are_no_event(message):
    assert xid.parse(message) is None


@pytest.mark.parametrize(
    ("code", "action", "cleared_by"),
    [
        (79, xid.DRAIN, xid.REBOOT),
        (48, xid.DRAIN, xid.GPU_RESET),
        (94, xid.DRAIN, xid.GPU_RESET),
        (95, xid.DRAIN, xid.GPU_RESET),
        (64, xid.DRAIN, xid.PERSON),
        (74, xid.DRAIN, xid.GPU_RESET),
        (119, xid.DRAIN, xid.REBOOT),
        (63, xid.WARN, xid.GPU_RESET),
        (92, xid.WARN, ""),
        (13, xid.JOB, ""),
        (31, xid.JOB, ""),
        (43, xid.JOB, ""),
        (45, xid.JOB, ""),
    ],
)
def test_the_table_decides_by_code(code, action, cleared_by):
    rule = xid.rule(code)
    assert (rule.action, rule.cleared_by) == (action, cleared_by)
    assert rule.meaning


def test_an_unknown_code_warns_and_points_to_the_catalog():
    rule = xid.rule(999)
    assert rule.action == xid.WARN
    assert "999" in rule.meaning
    assert "xid-errors" in rule.remedy


def test_every_rule_that_drains_has_a_remedy_and_says_what_clears_it():
    for rule in xid.XIDS.values():
        assert rule.action in (xid.DRAIN, xid.WARN, xid.JOB)
        if rule.action == xid.DRAIN:
            assert rule.remedy and rule.cleared_by in (xid.GPU_RESET, xid.REBOOT, xid.PERSON)
