"""Installed distributions' metadata has one reader (plugins/module_utils/distributions.py, the
package's hostcheck._shared.distributions): hostcheck and the hostcheck role's probe see the same
names and versions in a venv."""

from __future__ import annotations

from pathlib import Path

from ansible_collections.hostcheck.gpu_hosts.plugins.modules import hostcheck_probe
from hostcheck._shared import distributions

from hostcheck.checks.pillow.distinfo import installed_dists
from hostcheck.system import System

METADATA = (
    "Metadata-Version: 2.1\n"
    "Name: Pillow_SIMD\n"
    "Version: 9.5.0.post1\n"
    "Summary: a summary\n"
    "  continued on a second line\n"
    "Requires-Dist: olefile\n"
    "Requires-Dist: numpy ; extra == 'tests'\n"
    "\n"
    "Name: not a header: the description\n"
)


def test_headers_first_value_and_every_value():
    assert distributions.parse_metadata(METADATA)["Name"] == "Pillow_SIMD"
    assert distributions.parse_metadata(METADATA)["Summary"] == "a summary"
    assert distributions.header_values(METADATA, "Requires-Dist") == [
        "olefile",
        "numpy ; extra == 'tests'",
    ]
    assert distributions.header_values(METADATA, "Name") == ["Pillow_SIMD"]


def test_the_probe_and_the_package_read_a_venv_alike(tmp_path):
    site = tmp_path / "venv" / "lib" / "python3.11" / "site-packages"
    info = site / "Pillow_SIMD-9.5.0.post1.dist-info"
    info.mkdir(parents=True)
    (info / "METADATA").write_text(METADATA)
    (info / "RECORD").write_text("PIL/__init__.py,sha256=x,1\n")
    found = hostcheck_probe.read_venv(str(tmp_path / "venv"))
    (dist,) = installed_dists(System(), str(site))
    assert found["distributions"] == {dist.key: dist.version} == {"pillow-simd": "9.5.0.post1"}


def test_the_module_and_the_package_use_one_file():
    from ansible_collections.hostcheck.gpu_hosts.plugins.module_utils import (
        distributions as shipped,
    )

    assert Path(shipped.__file__).resolve() == Path(distributions.__file__).resolve()
    assert hostcheck_probe.parse_metadata is shipped.parse_metadata
