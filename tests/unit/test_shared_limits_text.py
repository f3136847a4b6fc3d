"""One reading of /proc/<pid>/limits, PAM session stacks and `systemctl show`
(plugins/module_utils/limits_text.py): the ulimits role's filters (the hard ceiling, the
pam_limits state, the systemd defaults) and hostcheck's ulimits check get the same values from
the same text, each with its own spelling of "unlimited"."""

from __future__ import annotations

import math
from pathlib import Path

from ansible_collections.hostcheck.gpu_hosts.plugins.filter.ulimits import (
    RLIM_INFINITY,
    ulimits_pam_limits,
    ulimits_proc_limits,
    ulimits_systemctl_show,
)

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
        found = lim.uses_pam_limits(lim.pam_modules(service, PAM.get))
        assert (role[service] == "present") == (found is not None), service
    found = lim.uses_pam_limits(lim.pam_modules("sshd", PAM.get))
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
    from ansible_collections.hostcheck.gpu_hosts.plugins.filter import ulimits as role_filters
    from hostcheck._shared import limits_text as packaged

    assert Path(role_filters.limits_text.__file__).resolve() == Path(packaged.__file__).resolve()
    assert lim.shared_limits is packaged
