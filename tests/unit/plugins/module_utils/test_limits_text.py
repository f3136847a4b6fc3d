"""One reading of /proc/<pid>/limits, limits.conf, PAM session stacks and `systemctl show`
(plugins/module_utils/limits_text.py): the ulimits role's actions (the hard ceiling, the
pam_limits state, the systemd defaults) and hostcheck's ulimits check get the same values from
the same text, each with its own spelling of "unlimited"."""

from __future__ import annotations

import math
from pathlib import Path

import pytest
from ansible.errors import AnsibleFilterError
from ansible_collections.hostcheck.gpu_hosts.plugins.plugin_utils.ulimits_rules import (
    RLIM_INFINITY,
    ulimits_conf_entries,
    ulimits_conf_value,
    ulimits_pam_limits,
    ulimits_proc_limits,
    ulimits_rlimit,
    ulimits_systemctl_show,
)
from hostcheck._shared import limits_text

from hostcheck import limits as lim
from hostcheck.units import UNLIMITED

PROC = """\
Limit                     Soft Limit           Hard Limit           Units
Max cpu time              unlimited            unlimited            seconds
Max processes             96365                96365                processes
Max open files            16384                20000                files
Max locked memory         8388608              unlimited            bytes
Max nice priority         0                    0
"""


def test_the_role_and_hostcheck_read_the_same_limits():
    role = ulimits_proc_limits("a banner printed by the login shell\n" + PROC)
    check = lim.proc_items(PROC)
    assert role == {
        "nproc": {"soft": 96365, "hard": 96365},
        "nofile": {"soft": 16384, "hard": 20000},
        "memlock": {"soft": 8388608, "hard": RLIM_INFINITY},
    }
    assert check["memlock"]["hard"] == UNLIMITED == math.inf
    as_role = {
        item: {kind: RLIM_INFINITY if value == UNLIMITED else value for kind, value in v.items()}
        for item, v in check.items()
    }
    assert as_role == role
    assert lim.parse_proc_limits(PROC)["Max nice priority"] == (0, 0)


NR_OPEN = 1048576
# A hand-edited limits.conf: case, blanks, a comment, a `<domain> -` line, a line of three
# fields, a value of two words and a CRLF line end.
LIMITS_CONF = (
    "  *\tSOFT\tNoFile\t16384  # a hand edit\nalice -\nbob soft nofile\n"
    "@gpu hard nofile 20000  4096\r\n"
)


def test_the_role_and_hostcheck_split_limits_conf_alike():
    """As pam_limits (Linux-PAM 1.5) splits a line: fields at spaces and tabs, the value is the
    rest of the line, only a newline ends it. The role keeps the fields as written (limits.yml
    removes a key's lines by matching it so); hostcheck lowercases them as pam_limits does."""
    assert ulimits_conf_entries(LIMITS_CONF) == [
        ["*", "SOFT", "NoFile", "16384"],
        ["@gpu", "hard", "nofile", "20000  4096\r"],
    ]
    lines = lim.parse_limits_conf(LIMITS_CONF, "f")
    assert [(line.lineno, line.domain, line.type, line.item, line.value) for line in lines] == [
        (1, "*", "soft", "nofile", "16384"),
        (2, "alice", "-", None, None),
        (4, "@gpu", "hard", "nofile", "20000  4096\r"),
    ]
    assert lim.parse_conf_value("nofile", lines[2].value) == 20000


@pytest.mark.parametrize(
    ("item", "text", "expected"),
    [
        ("nproc", "-1", UNLIMITED),
        ("nproc", "-", UNLIMITED),
        ("memlock", "unlimited", UNLIMITED),
        ("nofile", "infinity", NR_OPEN),  # pam_limits' no limit for nofile is fs.nr_open
        ("nofile", "+4096", 4096),  # pam_limits reads numbers with strtoul, which takes a '+'
        ("memlock", "+8", 8192),  # KiB
        ("cpu", "2", 120),  # minutes
        ("nofile", "4096 files", 4096),  # strtoul stops at the first non-digit
        ("nofile", str(2**64), UNLIMITED),
        ("nice", "-1", None),  # -1 is no "unlimited" for nice (nor for priority)
        ("nofile", "-5", None),
        ("nofile", "lots", None),
        ("maxlogins", "4", None),  # not an rlimit
    ],
)
def test_limits_conf_values_as_pam_limits_reads_them(item, text, expected):
    assert limits_text.conf_value_rlimit(item, text, UNLIMITED, NR_OPEN) == expected
    assert lim.parse_conf_value(item, text, NR_OPEN) == expected


@pytest.mark.parametrize(
    ("text", "why"), [("-1", "must not be negative"), ("+4096", "expected a positive whole")]
)
def test_the_variables_refuse_signs_that_limits_conf_takes(text, why):
    """limits.conf takes -1 (no limit) and +4096; the role's variables take neither (a sign
    there is a typo more often than a wish), and the role writes 'unlimited' or digits only."""
    assert lim.parse_conf_value("nofile", text, NR_OPEN) is not None
    with pytest.raises(AnsibleFilterError, match=rf"^ulimits_nofile_soft: {why}"):
        ulimits_conf_value(text, "ulimits_nofile_soft", "nofile")
    with pytest.raises(AnsibleFilterError, match=r"^not a limits\.conf value for nofile"):
        ulimits_rlimit(text, "nofile", NR_OPEN)


PAM = {
    "common-session": "session required pam_unix.so\nsession required pam_limits.so\n",
    "sshd": "@include common-session\n",
    "su-l": "session [success=1 default=ignore] pam_succeed_if.so quiet\nsession include su\n",
    "su": "session optional pam_xauth.so\n",
    "cron": "-session optional /usr/lib/security/pam_limits.so\n",
}


def test_the_role_and_hostcheck_see_the_same_pam_stacks():
    grep = "".join(
        f"/etc/pam.d/{name}:{line}\n" for name, text in PAM.items() for line in text.splitlines()
    )
    services = ["sshd", "su-l", "cron", "login"]
    role = ulimits_pam_limits(grep, services)
    assert role == {"sshd": "present", "su-l": "missing", "cron": "present", "login": "absent"}
    for service in services[:3]:
        found = lim.uses_pam_limits(limits_text.pam_modules(service, PAM.get))
        assert (role[service] == "present") == (found is not None), service
    found = lim.uses_pam_limits(limits_text.pam_modules("sshd", PAM.get))
    assert (found.service, found.lineno, found.control) == ("common-session", 2, "required")


def test_the_role_and_hostcheck_read_systemctl_show_alike():
    shown = (
        "DefaultLimitNOFILE=20000\nDefaultLimitNOFILESoft=16384\n"
        f"DefaultLimitMEMLOCK={RLIM_INFINITY}\nDefaultLimitNPROCSoft=infinity\n"
        "DefaultLimitCORE=\nDefaultTimeoutStartUSec=1min 30s\n"
    )
    assert ulimits_systemctl_show(shown) == {
        "DefaultLimitNOFILE": "20000",
        "DefaultLimitNOFILESoft": "16384",
        "DefaultLimitMEMLOCK": "infinity",
        "DefaultLimitNPROCSoft": "infinity",
    }
    assert lim.parse_systemctl_show(shown) == {
        "DefaultLimitNOFILE": 20000,
        "DefaultLimitNOFILESoft": 16384,
        "DefaultLimitMEMLOCK": UNLIMITED,
        "DefaultLimitNPROCSoft": UNLIMITED,
    }


def test_one_file_serves_both():
    from ansible_collections.hostcheck.gpu_hosts.plugins.plugin_utils import ulimits_rules
    from hostcheck._shared import limits_text as packaged

    assert Path(ulimits_rules.limits_text.__file__).resolve() == Path(packaged.__file__).resolve()
    assert lim.shared_limits is packaged
