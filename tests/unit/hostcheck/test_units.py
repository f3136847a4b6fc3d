import json
import math
from pathlib import Path

import pytest
from hostcheck._shared.sizes import format_size, parse_size, tmpfs_size_option
from hypothesis import given
from hypothesis import strategies as st

from hostcheck import units


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("4096", 4096),
        (4096, 4096),
        ("64MiB", 64 * 2**20),
        ("64M", 64 * 2**20),
        ("64m", 64 * 2**20),
        ("1.5G", int(1.5 * 2**30)),
        ("10GB", 10 * 10**9),
        (" 2 TiB ", 2 * 2**40),
        ("0", 0),
    ],
)
def test_parse_size_accepts_what_people_write(text, expected):
    assert parse_size(text) == expected


@pytest.mark.parametrize("bad", ["", "abc", "12 parsecs", "-5", "1e9", True, None, [], -1])
def test_parse_size_refuses_nonsense(bad):
    with pytest.raises(ValueError):
        parse_size(bad)


@given(st.integers(min_value=0, max_value=2**60), st.sampled_from(["", "K", "MiB", "G", "TB"]))
def test_parse_size_scales_integers_exactly(number, unit):
    factor = {"": 1, "K": 1024, "MiB": 2**20, "G": 2**30, "TB": 10**12}[unit]
    assert parse_size(f"{number}{unit}") == number * factor


@given(st.text(max_size=20))
def test_parse_size_either_parses_or_raises_valueerror(text):
    try:
        value = parse_size(text)
    except ValueError:
        return
    assert isinstance(value, int) and value >= 0


def test_size_spec_percent_resolves_against_reference():
    spec = units.parse_size_spec("50%")
    assert spec.percent == 50
    assert spec.tmpfs_bytes(8 * 2**30) == 4 * 2**30
    assert str(spec) == "50% of RAM"
    assert units.parse_size_spec("1GiB").tmpfs_bytes(123) == 2**30


def test_a_percentage_is_what_the_shm_role_gives_for_it():
    """hostcheck's shm.min_size of N% is exactly the /dev/shm the role's shm_size N% mounts: whole
    pages of RAM, rounded up as the kernel rounds (an odd number of pages here)."""
    memtotal = 4075857 * 4096
    assert units.parse_size_spec("50%").tmpfs_bytes(memtotal) == 2037929 * 4096
    assert units.parse_size_spec("12.5%").tmpfs_bytes(memtotal) == 509483 * 4096
    assert units.parse_size_spec("1000").tmpfs_bytes(memtotal) == 4096


@pytest.mark.parametrize("bad", ["0%", "101%", "-3%", "%"])
def test_size_spec_refuses_impossible_percentages(bad):
    with pytest.raises(ValueError):
        units.parse_size_spec(bad)


@pytest.mark.parametrize(
    ("value", "expected"),
    [("unlimited", math.inf), ("infinity", math.inf), (-1, math.inf), ("1024", 1024), (0, 0)],
)
def test_parse_limit(value, expected):
    assert units.parse_limit(value) == expected


@pytest.mark.parametrize("bad", ["lots", -2, "1.5", True, None])
def test_parse_limit_refuses(bad):
    with pytest.raises(ValueError):
        units.parse_limit(bad)


@given(st.integers(min_value=0, max_value=2**62))
def test_limit_round_trip(number):
    assert units.parse_limit(units.format_limit(number)) == number


def test_format_size():
    assert format_size(64 * 2**20) == "64.0 MiB"
    assert format_size(512) == "512 B"
    assert format_size(math.inf) == "unlimited"


@pytest.mark.parametrize(
    ("number", "shown"),
    [
        (0, "0 B"),
        (1023, "1023 B"),
        (1024, "1.0 KiB"),
        (1536 * 2**20, "1.5 GiB"),
        (5 * 2**40, "5.0 TiB"),
        (3 * 2**50, "3072.0 TiB"),
        (-5000, "-4.9 KiB"),
        (1023.6, "1024 B"),
    ],
)
def test_format_size_edges(number, shown):
    """The one formatter of hostcheck, the dataset_stage module and the dataset_staging
    action: TiB is the largest unit; a fraction of a byte rounds to the nearest byte as the
    larger units round to the nearest tenth (dataset_stage's copy used to cut it off)."""
    assert format_size(number) == shown


def test_a_threshold_percentage_may_have_a_fraction_a_tmpfs_size_not():
    """One percentage rule for hostcheck's shm.min_size and the shm role's shm_size: above 0%,
    at most 100%; only tmpfs's size= needs it whole."""
    assert units.parse_size_spec("12.5%").percent == 12.5
    with pytest.raises(ValueError, match=r"^a percentage of RAM is a whole number followed by %"):
        tmpfs_size_option("12.5%")
    assert tmpfs_size_option(" 050 %") == "50%"
    with pytest.raises(ValueError, match=r"^a percentage of RAM must be above 0% and at most 100%"):
        units.parse_size_spec("0.0%")
    with pytest.raises(ValueError, match=r"^a percentage of RAM is a number followed by %"):
        units.parse_size_spec("-3%")


def test_a_finding_is_shown_in_its_unit_and_as_it_is_without_one():
    from hostcheck.units import FINDING_UNITS, format_in

    assert format_in(64 * 1024 * 1024, "bytes") == "64.0 MiB"
    assert format_in(math.inf, "bytes") == "unlimited"
    assert format_in(0.1234, "ratio") == "12.3%"
    assert format_in(2.5e9, "bytes_per_second") == "2500 MB/s"
    assert format_in(20000, "") == "20000"
    assert format_in(True, "bytes") == "True"
    assert format_in("always", "bytes") == "always"
    assert format_in(math.nan, "ratio") == "nan"
    assert set(FINDING_UNITS) == {"bytes", "ratio", "bytes_per_second"}
    schema = json.loads((Path(units.__file__).parent / "report" / "report-v1.json").read_text())
    assert schema["$defs"]["finding"]["properties"]["unit"]["enum"] == ["", *FINDING_UNITS]
