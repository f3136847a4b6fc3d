"""The ulimits role's probe module (plugins/modules/ulimits_probe.py) on a tree standing in for
a host's root: files and folders read, owners and modes, systemd, logins, systemctl show."""

from __future__ import annotations

import os

from ansible_collections.hostcheck.gpu_hosts.plugins.modules import ulimits_probe

LIMITS_FILE = "/etc/security/limits.d/90-hostcheck-training.conf"


def params(**given) -> dict:
    return {"read": [], "stat": [], "logins": [], "systemctl_show": [], **given}


def tree(root, files: dict) -> str:
    for path, text in files.items():
        target = root / path.lstrip("/")
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(text)
    return str(root)


def test_files_and_the_files_of_a_folder_are_read_and_missing_ones_left_out(tmp_path):
    root = tree(
        tmp_path,
        {
            "/proc/sys/fs/nr_open": "1048576\n",
            "/etc/pam.d/sshd": "session required pam_limits.so\n",
            "/etc/pam.d/login": "",
        },
    )
    (tmp_path / "etc/pam.d/sub").mkdir()
    read = ["/proc/sys/fs/nr_open", "/etc/pam.d", LIMITS_FILE]
    assert ulimits_probe.probe(params(read=read), root)["files"] == {
        "/proc/sys/fs/nr_open": "1048576\n",
        "/etc/pam.d/login": "",
        "/etc/pam.d/sshd": "session required pam_limits.so\n",
    }


def test_owner_and_mode_of_what_exists(tmp_path):
    root = tree(tmp_path, {LIMITS_FILE: "x\n"})
    os.chmod(tmp_path / LIMITS_FILE.lstrip("/"), 0o600)
    stat = ulimits_probe.probe(params(stat=[LIMITS_FILE, "/etc/security", "/nowhere"]), root)[
        "stat"
    ]
    assert stat[LIMITS_FILE] == {
        "type": "file",
        "uid": os.getuid(),
        "gid": os.getgid(),
        "mode": "0600",
    }
    assert stat["/etc/security"]["type"] == "directory"
    assert stat["/nowhere"] == {"type": None}


def test_systemctl_show_only_where_systemd_runs(tmp_path):
    found = ulimits_probe.probe(params(systemctl_show=["DefaultLimitNOFILE"]), str(tmp_path))
    assert found["systemd"] is False
    assert found["systemctl_show"] is None


def test_each_user_logs_in_once_and_unknown_users_are_said(tmp_path):
    seen = []

    def login(user):
        seen.append(user)
        return {"exists": user != "ghost"}

    found = ulimits_probe.probe(params(logins=["root", "ghost", "root"]), str(tmp_path), login)
    assert found["logins"] == {"root": {"exists": True}, "ghost": {"exists": False}}
    assert seen == ["root", "ghost"]


def test_a_user_that_does_not_exist_is_not_logged_in():
    assert ulimits_probe.login("no-such-user-hostcheck") == {"exists": False}


def test_a_command_that_cannot_start_is_a_result_not_a_crash():
    done = ulimits_probe.run(["/nonexistent/runuser"])
    assert done["rc"] is None
    assert "No such file" in done["stderr"]
