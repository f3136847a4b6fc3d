"""The compiled profile schema (hostcheck/compiled/, written by hostcheck.schema_build): up to
date with the checks' schemas, accepting exactly what jsonschema accepts, and the reason
`hostcheck run` never imports jsonschema for a valid profile."""

from __future__ import annotations

import copy
import json
import subprocess
import sys

import jsonschema
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from hostcheck import config as c
from hostcheck.commands.common import profile_schema

SCHEMA = profile_schema()
DEFAULT = c.load_profile("default", SCHEMA).values


def jsonschema_accepts(document, complete: bool) -> bool:
    schema = c.require_all(SCHEMA) if complete else SCHEMA
    validator = jsonschema.Draft202012Validator(schema, format_checker=c._format_checker())
    return not any(True for _ in validator.iter_errors(document))


def paths(value, prefix=()):
    """Every key path of a nested mapping."""
    if isinstance(value, dict):
        for key, item in value.items():
            yield (*prefix, key)
            yield from paths(item, (*prefix, key))


PATHS = sorted(paths(DEFAULT))
VALUES = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(-(2**40), 2**40),
    st.floats(allow_nan=False, allow_infinity=False),
    st.sampled_from(["64GiB", "50%", "150%", "unlimited", "-1", "lots", "", "warn", "fail"]),
    st.text(max_size=8),
    st.lists(st.integers(0, 9), max_size=3),
    st.dictionaries(st.sampled_from(["min", "max", "equals", "x"]), st.integers(), max_size=2),
)


def test_the_compiled_files_are_current():
    done = subprocess.run(
        [sys.executable, "-m", "hostcheck.schema_build", "--check"], capture_output=True, text=True
    )
    assert done.returncode == 0, done.stdout + done.stderr


@settings(max_examples=300, deadline=None)
@given(st.lists(st.tuples(st.sampled_from(PATHS), VALUES), min_size=1, max_size=3), st.booleans())
def test_accepts_what_jsonschema_accepts(changes, complete):
    document = copy.deepcopy(DEFAULT)
    for path, value in changes:
        cursor = document
        for key in path[:-1]:
            if not isinstance(cursor.get(key), dict):
                cursor[key] = {}
            cursor = cursor[key]
        cursor[path[-1]] = value
    assert c._passes_compiled(document, SCHEMA, complete) == jsonschema_accepts(document, complete)


@pytest.mark.parametrize("complete", [False, True])
def test_unknown_and_missing_keys(complete):
    unknown = copy.deepcopy(DEFAULT)
    unknown["checks"]["shm"]["min_sise"] = "1GiB"
    missing = copy.deepcopy(DEFAULT)
    del missing["checks"]["loop"]["seconds"]
    assert c._passes_compiled(unknown, SCHEMA, complete) is False
    assert c._passes_compiled(missing, SCHEMA, complete) is (not complete)
    assert c._passes_compiled(DEFAULT, SCHEMA, complete) is True


def test_another_schema_goes_to_jsonschema():
    other = c.build_schema({"shm": {"properties": {}}})
    assert c._passes_compiled({"checks": {"shm": {}}}, other, False) is False


def test_a_builtin_profile_whose_yaml_changed_is_parsed_again(monkeypatch):
    read = c.builtin_profile_text
    changed = read("quick").replace("benchmark_seconds: 0", "benchmark_seconds: 2")
    assert changed != read("quick")
    monkeypatch.setattr(
        c, "builtin_profile_text", lambda name: changed if name == "quick" else read(name)
    )
    assert c.load_profile("quick", SCHEMA).section("pillow")["benchmark_seconds"] == 2


def test_loaded_profiles_do_not_share_the_compiled_documents():
    c.load_profile("default", SCHEMA).section("shm")["min_size"] = "1TiB"
    assert c.load_profile("default", SCHEMA).section("shm")["min_size"] == "2GiB"


def test_a_valid_run_imports_neither_jsonschema_nor_torch(tmp_path):
    config = tmp_path / "config.yaml"
    config.write_text("checks:\n  shm:\n    min_size: 1GiB\n")
    probe = (
        "import sys; from hostcheck.cli import main\n"
        f"code = main(['run', '--profile', 'quick', '--config', {str(config)!r}, "
        f"'--report', 'json:{tmp_path}/r.json'])\n"
        "print(json.dumps(sorted(m for m in ('jsonschema', 'torch') if m in sys.modules)))"
    )
    done = subprocess.run(
        [sys.executable, "-c", "import json\n" + probe], capture_output=True, text=True
    )
    assert json.loads(done.stdout.splitlines()[-1]) == [], done.stderr
    bad = tmp_path / "bad.yaml"
    bad.write_text("checks:\n  shm:\n    min_size: lots\n")
    refused = subprocess.run(
        [sys.executable, "-m", "hostcheck", "run", "--profile", "quick", "--config", str(bad)],
        capture_output=True,
        text=True,
    )
    assert refused.returncode == 2
    assert f"{bad}: shm.min_size: not a size: 'lots'" in refused.stderr
