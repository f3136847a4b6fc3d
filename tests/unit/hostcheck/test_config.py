"""Profile layering and validation, against a schema made of the shm check's section."""

import pytest

from hostcheck import config as c
from hostcheck.checks import shm

SCHEMA = c.build_schema({"shm": shm.SCHEMA})
BASE = """\
description: base
require_gpu: false
checks:
  shm:
    enabled: true
    severity: fail
    min_size: 50%
    min_free: 1GiB
    loader: {workers: null, prefetch_factor: 2, batch_bytes: null, ranks: 1}
"""


@pytest.fixture
def base(tmp_path):
    path = tmp_path / "base.yaml"
    path.write_text(BASE)
    return path


def write(tmp_path, name, text):
    path = tmp_path / name
    path.write_text(text)
    return str(path)


def test_loads_a_complete_profile(base):
    profile = c.load_profile(str(base), SCHEMA)
    assert profile.section("shm")["min_size"] == "50%"
    assert profile.require_gpu is False
    assert profile.sources == [str(base)]


def test_extends_merges_deeply(tmp_path, base):
    child = write(tmp_path, "child.yaml", f"extends: {base}\nchecks:\n  shm:\n    min_free: 2GiB\n")
    profile = c.load_profile(child, SCHEMA)
    assert profile.section("shm")["min_free"] == "2GiB"
    assert profile.section("shm")["min_size"] == "50%"
    assert profile.sources == [str(base), child]


def test_config_file_and_set_override_in_order(tmp_path, base):
    override = write(tmp_path, "site.yaml", "checks:\n  shm:\n    min_size: 8GiB\n")
    profile = c.load_profile(
        str(base), SCHEMA, [override], ["shm.min_size=16GiB", "shm.loader.workers=8"]
    )
    assert profile.section("shm")["min_size"] == "16GiB"
    assert profile.section("shm")["loader"]["workers"] == 8
    assert profile.sources[-2:] == ["--set shm.min_size=16GiB", "--set shm.loader.workers=8"]


def test_set_top_level_key(base):
    profile = c.load_profile(str(base), SCHEMA, [], ["require_gpu=true"])
    assert profile.require_gpu is True


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("checks:\n  shm:\n    min_sise: 1GiB\n", r"x.yaml: shm.min_sise: unknown key"),
        ("checks:\n  shmm: {}\n", r"x.yaml: shmm: unknown key"),
        ("checks:\n  shm:\n    min_size: lots\n", r"x.yaml: shm.min_size: not a size: 'lots'"),
        (
            "checks:\n  shm:\n    min_size: 150%\n",
            r"x.yaml: shm.min_size: a percentage of RAM must be",
        ),
        ("checks:\n  shm:\n    loader: {ranks: 0}\n", r"x.yaml: shm.loader.ranks: 0 is less"),
        ("checks:\n  shm:\n    loader: {ranks: two}\n", r"x.yaml: shm.loader.ranks: 'two' is not"),
        ("checks:\n  shm:\n    severity: loud\n", r"x.yaml: shm.severity: 'loud' is not one of"),
        ("require_gpu: maybe\n", r"x.yaml: require_gpu: 'maybe' is not of type 'boolean'"),
        ("- a\n- b\n", r"x.yaml: expected a mapping"),
        ("checks: [\n", r"x.yaml: line \d+: not valid YAML"),
    ],
)
def test_errors_name_file_and_key(tmp_path, base, text, message):
    bad = write(tmp_path, "x.yaml", text)
    with pytest.raises(c.ConfigError, match=message):
        c.load_profile(str(base), SCHEMA, [bad])


def test_incomplete_profile_names_the_missing_key(tmp_path):
    partial = write(tmp_path, "p.yaml", "checks:\n  shm:\n    min_size: 1GiB\n")
    with pytest.raises(c.ConfigError, match=r"p.yaml .*: (require_gpu|shm\.\w+): missing$"):
        c.load_profile(partial, SCHEMA)


def test_bad_set_names_the_option(base):
    with pytest.raises(c.ConfigError, match=r"--set shm.min_free: shm.min_free: not a size"):
        c.load_profile(str(base), SCHEMA, [], ["shm.min_free=plenty"])
    with pytest.raises(c.ConfigError, match=r"--set shm.min_free: expected KEY=VALUE"):
        c.load_profile(str(base), SCHEMA, [], ["shm.min_free"])


def test_missing_file_and_extends_loop(tmp_path):
    with pytest.raises(c.ConfigError, match=r"nope.yaml: no such profile or file"):
        c.load_profile(str(tmp_path / "nope.yaml"), SCHEMA)
    loop = write(tmp_path, "loop.yaml", "extends: LOOP\n")
    (tmp_path / "loop.yaml").write_text(f"extends: {loop}\n")
    with pytest.raises(c.ConfigError, match="extends itself"):
        c.load_profile(loop, SCHEMA)


def test_config_file_with_its_own_base_replaces_the_profile(tmp_path, base):
    other = write(tmp_path, "other.yaml", BASE.replace("min_free: 1GiB", "min_free: 5GiB"))
    site = write(tmp_path, "site.yaml", f"extends: {other}\n")
    profile = c.load_profile(str(base), SCHEMA, [site])
    assert profile.section("shm")["min_free"] == "5GiB"


def test_split_key_with_quoted_dotted_names():
    assert c.split_key('sysctl.expect."vm.swappiness".max') == [
        "sysctl",
        "expect",
        "vm.swappiness",
        "max",
    ]
    assert c.split_key("shm.loader.workers") == ["shm", "loader", "workers"]
    for bad in ("shm..min_size", ".shm", 'a."b'):
        with pytest.raises(c.ConfigError, match="malformed key"):
            c.split_key(bad)
