"""dpkg-query's status lines as os_packages_missing and package_manager_ready read them."""

from __future__ import annotations

from ansible_collections.hostcheck.gpu_hosts.plugins.module_utils.dpkg_status import (
    QUERY,
    dpkg_states,
)


def test_each_line_gives_the_package_its_state_and_error_flag():
    output = "gcc ii \nlibc6 iU \nlibc6 iiR\nzlib1g-dev un \nodd\n"
    assert dpkg_states(output) == [
        ("gcc", "i", " "),
        ("libc6", "U", " "),
        ("libc6", "i", "R"),
        ("zlib1g-dev", "n", " "),
        ("odd", "", ""),
    ]


def test_the_query_prints_a_package_and_its_status_letters_per_line():
    assert QUERY == ["dpkg-query", "-W", "-f=${Package} ${db:Status-Abbrev}\n"]
