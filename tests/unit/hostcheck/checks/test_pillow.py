from __future__ import annotations

import base64
import contextlib
import csv
import hashlib
import importlib.metadata
import os
import shutil
import struct
import subprocess
import sys
from pathlib import Path

import pytest
from hostcheck._shared import distributions
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from hostcheck import config as c
from hostcheck.checks import pillow
from hostcheck.checks.base import CheckContext
from hostcheck.checks.pillow import distinfo, simdscan
from hostcheck.checks.pillow.distinfo import RecordEntry
from hostcheck.model import Status
from hostcheck.system import System

SITE = "/venv/lib/python3.11/site-packages"
SO_NAME = "_imaging.cpython-311-x86_64-linux-gnu.so"
SO = f"{SITE}/PIL/{SO_NAME}"
CPUINFO_AVX2 = "processor\t: 0\nflags\t\t: fpu sse2 avx avx2 fma\n\nprocessor\t: 1\nflags\t: fpu\n"
CPUINFO_NO_AVX2 = "processor\t: 0\nflags\t\t: fpu sse2 sse4_2 avx\n"
VPADDD_YMM = bytes.fromhex("c5fdfec1")  # vpaddd %ymm1,%ymm0,%ymm0
VPADDD_XMM = bytes.fromhex("c5f9fec1")  # vpaddd %xmm1,%xmm0,%xmm0
VADDPS_YMM = bytes.fromhex("c5fc58c1")  # vaddps %ymm1,%ymm0,%ymm0 (AVX1, float)

CONFIG = {
    "require": True,
    "require_simd": True,
    "require_libjpeg_turbo": True,
    "require_avx2": True,
    "avx2_min_instructions": 100,
    "count_avx2": True,
    "benchmark_seconds": 0,
    "benchmark_filter": "bicubic",
    "min_resize_per_s": None,
    "min_decode_per_s": None,
}

# The profile sections proposed for the shipped profiles (see the report); validated below.
PROFILES = {
    "default": {
        **CONFIG,
        "require": False,
        "require_simd": False,
        "require_avx2": False,
        "require_libjpeg_turbo": True,
        "benchmark_seconds": 1,
    },
    "gpu-node": {**CONFIG, "benchmark_seconds": 2, "min_resize_per_s": 150},
    "quick": {**CONFIG, "require": False, "count_avx2": False, "benchmark_seconds": 0},
}


def cfg(**changes):
    return {**CONFIG, **changes}


# --- fixtures -------------------------------------------------------------------------


def make_elf(sections: list[tuple[str, int, bytes]], machine: int = 62) -> bytes:
    """A 64-bit little-endian ELF file with the given (name, flags, bytes) sections."""
    names = b"\0"
    offsets = []
    for name, _, _ in [*sections, (".shstrtab", 0, b"")]:
        offsets.append(len(names))
        names += name.encode() + b"\0"
    body = b""
    placed = []
    for name_off, (_, flags, data) in zip(offsets, sections):
        placed.append((name_off, 1, flags, 64 + len(body), len(data)))
        body += data
    placed.append((offsets[-1], 3, 0, 64 + len(body), len(names)))
    body += names
    shoff = 64 + len(body)
    shnum = len(placed) + 1
    header = b"\x7fELF" + bytes([2, 1, 1]) + b"\0" * 9
    header += struct.pack("<HHIQQQIHHHHHH", 3, machine, 1, 0, 0, shoff, 0, 64, 0, 0, 64, shnum,
                          shnum - 1)  # fmt: skip
    table = b"\0" * 64
    for name_off, kind, flags, offset, size in placed:
        table += struct.pack("<IIQQQQIIQQ", name_off, kind, flags, 0, offset, size, 0, 0, 1, 0)
    return header + body + table


def sha(data: bytes) -> str:
    return "sha256=" + base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()


def add_dist(host, dirname: str, name: str, version: str, so_bytes: bytes | None) -> None:
    host.file(f"{SITE}/{dirname}/METADATA", f"Metadata-Version: 2.1\nName: {name}\n"
              f"Version: {version}\nSummary: imaging\n\nLong: description\n")  # fmt: skip
    rows = [f"PIL/__init__.py,{sha(b'init')},4"]
    if so_bytes is not None:
        rows.append(f"PIL/{SO_NAME},{sha(so_bytes)},{len(so_bytes)}")
    rows.append(f"{dirname}/RECORD,,")
    host.file(f"{SITE}/{dirname}/RECORD", "\n".join(rows) + "\n")


def put_so(host, data: bytes) -> None:
    target = host.root / SO.lstrip("/")
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_bytes(data)


def info(**changes) -> pillow.PilInfo:
    values = {
        "version": "9.5.0.post1",
        "package_dir": f"{SITE}/PIL",
        "imaging_path": SO,
        "libjpeg_turbo": True,
        "jpeg_version": "6.2",
        "turbo_version": "2.1.5",
        "python": "/venv/bin/python",
    }
    values.update(changes)
    return pillow.PilInfo(**values)


@pytest.fixture
def simd_host(fake_host):
    """pillow-simd alone, built with AVX2 (300 ymm integer instructions)."""
    so = make_elf([(".text", 6, VPADDD_YMM * 300)])
    put_so(fake_host, so)
    add_dist(fake_host, "Pillow_SIMD-9.5.0.post1.dist-info", "Pillow-SIMD", "9.5.0.post1", so)
    fake_host.file("/proc/cpuinfo", CPUINFO_AVX2)
    return fake_host


@pytest.fixture
def stock_host(fake_host):
    """Stock pillow alone, generic x86-64 build."""
    so = make_elf([(".text", 6, VADDPS_YMM * 50 + VPADDD_XMM * 50)])
    put_so(fake_host, so)
    add_dist(fake_host, "pillow-10.4.0.dist-info", "pillow", "10.4.0", so)
    fake_host.file("/proc/cpuinfo", CPUINFO_AVX2)
    return fake_host


def finding(result, name):
    return next(f for f in result.findings if f.name == name)


# --- the check on fixture hosts ---------------------------------------------------------


def test_pillow_simd_with_avx2_passes(simd_host):
    result = pillow.evaluate(simd_host.context(cfg()), info())
    assert result.status == Status.PASS
    dist = finding(result, "distribution")
    assert dist.measured == {"name": "Pillow-SIMD", "version": "9.5.0.post1"}
    assert finding(result, "claimed by").measured == ["Pillow-SIMD 9.5.0.post1"]
    build = finding(result, "avx2 build")
    assert build.measured == 300
    assert build.source.startswith("capstone disassembly")
    assert result.data["avx2_mnemonics"] == {"vpaddd": 300}
    assert result.data["claimants"][0]["imaging_hash_matches"] is True
    assert finding(result, "cpu avx2").measured is True
    assert finding(result, "resize rate").status == Status.SKIP


def test_stock_pillow_fails_when_simd_required(stock_host):
    result = pillow.evaluate(stock_host.context(cfg()), info(version="10.4.0"))
    assert result.status == Status.FAIL
    dist = finding(result, "distribution")
    assert dist.status == Status.FAIL
    assert dist.measured == {"name": "pillow", "version": "10.4.0"}
    build = finding(result, "avx2 build")
    assert (build.status, build.measured) == (Status.FAIL, 0)
    assert "pillow_simd_enabled" in result.remedy
    assert "pillow_simd_avx2: true" in result.remedy
    assert "ansible-playbook site.yml --tags pillow_simd" in result.remedy


def test_stock_pillow_is_reported_only_when_not_required(stock_host):
    config = cfg(require_simd=False, require_avx2=False)
    result = pillow.evaluate(stock_host.context(config), info(version="10.4.0"))
    assert result.status == Status.PASS
    assert finding(result, "distribution").measured["name"] == "pillow"
    assert result.data["avx2_build"] is False


def test_stock_pillow_installed_over_simd_is_seen_from_record_hashes(fake_host):
    """torchvision's dependency reinstalls pillow: both dist-infos claim PIL, the files on
    disk are pillow's."""
    simd_so = make_elf([(".text", 6, VPADDD_YMM * 300)])
    stock_so = make_elf([(".text", 6, VPADDD_XMM * 300)])
    put_so(fake_host, stock_so)
    add_dist(fake_host, "pillow_simd-9.5.0.post1.dist-info", "Pillow-SIMD", "9.5.0.post1", simd_so)
    add_dist(fake_host, "pillow-11.0.0.dist-info", "pillow", "11.0.0", stock_so)
    fake_host.file("/proc/cpuinfo", CPUINFO_AVX2)
    result = pillow.evaluate(fake_host.context(cfg()), info(version="11.0.0"))
    dist = finding(result, "distribution")
    assert (dist.status, dist.measured["name"]) == (Status.FAIL, "pillow")
    claimed = finding(result, "claimed by")
    assert claimed.status == Status.WARN
    assert sorted(claimed.measured) == ["Pillow-SIMD 9.5.0.post1", "pillow 11.0.0"]
    matches = {d["name"]: d["imaging_hash_matches"] for d in result.data["claimants"]}
    assert matches == {"Pillow-SIMD": False, "pillow": True}
    assert "pip uninstall -y pillow pillow-simd" in result.remedy


def test_two_claimants_with_simd_files_on_disk_warn(fake_host):
    simd_so = make_elf([(".text", 6, VPADDD_YMM * 300)])
    put_so(fake_host, simd_so)
    add_dist(fake_host, "pillow_simd-9.5.0.post1.dist-info", "Pillow-SIMD", "9.5.0.post1", simd_so)
    add_dist(fake_host, "pillow-11.0.0.dist-info", "pillow", "11.0.0", b"other build")
    fake_host.file("/proc/cpuinfo", CPUINFO_AVX2)
    result = pillow.evaluate(fake_host.context(cfg()), info())
    assert result.status == Status.WARN
    assert finding(result, "distribution").status == Status.PASS
    assert finding(result, "distribution").measured["name"] == "Pillow-SIMD"
    assert finding(result, "claimed by").status == Status.WARN


def test_no_distribution_claims_pil(simd_host):
    shutil.rmtree(simd_host.root / SITE.lstrip("/") / "Pillow_SIMD-9.5.0.post1.dist-info")
    result = pillow.evaluate(simd_host.context(cfg()), info())
    dist = finding(result, "distribution")
    assert (dist.status, dist.measured) == (Status.WARN, None)
    assert "no installed distribution claims PIL" in dist.display
    assert finding(result, "claimed by").measured == []


def test_file_replaced_after_install_warns(simd_host):
    put_so(simd_host, make_elf([(".text", 6, VPADDD_YMM * 301)]))
    result = pillow.evaluate(simd_host.context(cfg()), info())
    dist = finding(result, "distribution")
    assert dist.status == Status.WARN
    assert "replaced after install" in dist.display
    assert result.data["claimants"][0]["imaging_hash_matches"] is False


def test_not_importable_skips_or_fails(monkeypatch, fake_host):
    monkeypatch.setattr(pillow, "probe_pil", lambda: "ModuleNotFoundError: No module named 'PIL'")
    skipped = pillow.run(fake_host.context(cfg(require=False)))
    assert skipped.status == Status.SKIP
    assert "No module named 'PIL'" in skipped.summary
    failed = pillow.run(fake_host.context(cfg(require=True)))
    assert failed.status == Status.FAIL
    assert finding(failed, "import PIL").measured == "ModuleNotFoundError: No module named 'PIL'"
    assert "pillow_simd_enabled" in failed.remedy


def test_counted_by_disassembling_the_extension(simd_host):
    result = pillow.evaluate(simd_host.context(cfg()), info())
    build = finding(result, "avx2 build")
    assert (build.status, build.measured) == (Status.PASS, 300)
    assert build.source == f"capstone disassembly of .text (1200 bytes) of {SO}"
    assert result.data["avx2_mnemonics"] == {"vpaddd": 300}


def test_not_counted_when_the_profile_says_so_unless_avx2_is_required(simd_host):
    result = pillow.evaluate(simd_host.context(cfg(count_avx2=False, require_avx2=False)), info())
    build = finding(result, "avx2 build")
    assert (build.status, build.display) == (Status.SKIP, "not counted (count_avx2: false)")
    required = pillow.evaluate(simd_host.context(cfg(count_avx2=False, require_avx2=True)), info())
    assert finding(required, "avx2 build").measured == 300


@pytest.mark.parametrize(("required", "status"), [(False, Status.SKIP), (True, Status.ERROR)])
def test_without_the_disassembler_it_says_how_to_get_it(monkeypatch, simd_host, required, status):
    def missing(code):
        raise simdscan.MissingLibrary("capstone is not installed (No module named 'capstone')")

    monkeypatch.setattr(simdscan, "count_avx2", missing)
    result = pillow.evaluate(simd_host.context(cfg(require_avx2=required)), info())
    build = finding(result, "avx2 build")
    assert build.status == status
    assert build.display.startswith("capstone is not installed")
    assert "pip install capstone pyelftools" in build.display


def test_threshold_comes_from_profile(simd_host):
    result = pillow.evaluate(simd_host.context(cfg(avx2_min_instructions=301)), info())
    build = finding(result, "avx2 build")
    assert (build.status, build.measured) == (Status.FAIL, 300)
    assert result.data["avx2_build"] is False


def test_avx2_build_on_cpu_without_avx2_fails(simd_host):
    simd_host.file("/proc/cpuinfo", CPUINFO_NO_AVX2)
    result = pillow.evaluate(simd_host.context(cfg(require_avx2=False)), info())
    build = finding(result, "avx2 build")
    assert build.status == Status.FAIL
    assert "SIGILL" in build.display
    assert "pillow_simd_avx2: false" in result.remedy
    assert finding(result, "cpu avx2").measured is False


def test_generic_build_on_cpu_without_avx2_passes(stock_host):
    stock_host.file("/proc/cpuinfo", CPUINFO_NO_AVX2)
    add_dist(stock_host, "pillow-10.4.0.dist-info", "Pillow-SIMD", "9.0.0", None)
    result = pillow.evaluate(stock_host.context(cfg()), info())
    assert finding(result, "avx2 build").status == Status.PASS
    assert finding(result, "distribution").status == Status.PASS


def test_non_x86_build_and_cpu_skip_avx2(simd_host):
    put_so(simd_host, make_elf([(".text", 6, b"\x1f\x20\x03\xd5" * 8)], machine=183))
    simd_host.file("/proc/cpuinfo", "processor\t: 0\nFeatures\t: fp asimd\n")
    result = pillow.evaluate(simd_host.context(cfg()), info())
    build = finding(result, "avx2 build")
    assert build.status == Status.SKIP
    assert "not an x86-64 build (ELF machine EM_AARCH64)" in build.display
    assert finding(result, "cpu avx2").status == Status.SKIP


def test_unreadable_extension_skips_avx2(simd_host):
    (simd_host.root / SO.lstrip("/")).write_bytes(b"not an elf")
    result = pillow.evaluate(simd_host.context(cfg()), info())
    assert finding(result, "avx2 build").display == "not an ELF file"


@pytest.mark.parametrize(
    ("turbo", "required", "status"),
    [
        (True, True, Status.PASS),
        (False, True, Status.FAIL),
        (None, True, Status.WARN),
        (False, False, Status.PASS),
    ],
)
def test_libjpeg_turbo(simd_host, turbo, required, status):
    config = cfg(require_libjpeg_turbo=required)
    result = pillow.evaluate(simd_host.context(config), info(libjpeg_turbo=turbo))
    jpeg = finding(result, "libjpeg-turbo")
    assert (jpeg.status, jpeg.measured) == (status, turbo)
    assert result.data["libjpeg_turbo"] is turbo


def test_benchmark_against_profile_minimum(monkeypatch, simd_host):
    calls = []

    def fake_rates(seconds, filter_name):
        calls.append((seconds, filter_name))
        return {"resize_per_s": 120.04, "resizes": 240, "decode_per_s": 80.0, "decodes": 160,
                "jpeg_bytes": 1000}  # fmt: skip

    monkeypatch.setattr(pillow, "measure_rates", fake_rates)
    config = cfg(benchmark_seconds=2, benchmark_filter="lanczos", min_resize_per_s=150)
    result = pillow.evaluate(simd_host.context(config), info())
    assert calls == [(2, "lanczos")]
    resize = finding(result, "resize rate")
    assert (resize.status, resize.measured, resize.expected) == (Status.FAIL, 120.0, ">= 150/s")
    assert "LANCZOS" in resize.display
    decode = finding(result, "decode rate")
    assert (decode.status, decode.measured, decode.expected) == (Status.PASS, 80.0, "report only")
    assert result.data["benchmark"]["resizes"] == 240
    passing = pillow.evaluate(simd_host.context({**config, "min_resize_per_s": 100}), info())
    assert finding(passing, "resize rate").status == Status.PASS


def test_benchmark_off_is_not_run(monkeypatch, simd_host):
    monkeypatch.setattr(pillow, "measure_rates", lambda *a: pytest.fail("benchmark ran"))
    result = pillow.evaluate(simd_host.context(cfg(benchmark_seconds=0)), info())
    assert result.data["benchmark"] is None


def test_broken_benchmark_is_an_error(monkeypatch, simd_host):
    def broken(seconds, filter_name):
        raise MemoryError("no room")

    monkeypatch.setattr(pillow, "measure_rates", broken)
    result = pillow.evaluate(simd_host.context(cfg(benchmark_seconds=1)), info())
    assert result.status == Status.ERROR
    assert "no room" in finding(result, "resize rate").display


def test_measure_rates_with_installed_pil():
    pytest.importorskip("PIL")
    rates = pillow.measure_rates(0.05, "bilinear")
    assert rates["resizes"] >= 1 and rates["decodes"] >= 1
    assert rates["resize_per_s"] > 0 and rates["decode_per_s"] > 0
    assert rates["jpeg_bytes"] > 10_000  # a real picture, not a flat colour


def test_module_import_does_not_import_pil():
    code = "import sys, hostcheck.checks.pillow; print('PIL' in sys.modules)"
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert done.stdout.strip() == "False"


def test_proposed_profile_sections_validate():
    schema = c.build_schema({"pillow": pillow.SCHEMA})
    for name, section in PROFILES.items():
        section = {"enabled": True, "severity": "fail", **section}
        document = {"require_gpu": name == "gpu-node", "checks": {"pillow": section}}
        c.validate(document, schema, name, complete=True)
    with pytest.raises(c.ConfigError, match="benchmark_filter"):
        bad = {**CONFIG, "enabled": True, "severity": "fail", "benchmark_filter": "nearest"}
        c.validate({"require_gpu": False, "checks": {"pillow": bad}}, schema, "x", complete=True)
    with pytest.raises(c.ConfigError, match="min_resize_per_s"):
        bad = {**CONFIG, "enabled": True, "severity": "fail", "min_resize_per_s": -1}
        c.validate({"require_gpu": False, "checks": {"pillow": bad}}, schema, "x", complete=True)


# --- simdscan ---------------------------------------------------------------------------


def test_counts_only_avx2_ymm_integer_instructions_and_steps_over_data():
    code = b"".join(
        [
            VPADDD_YMM,
            VPADDD_XMM,
            VADDPS_YMM,
            bytes.fromhex("c4e27d00c1"),  # vpshufb ymm0, ymm0, ymm1
            b"\x06\x07",  # invalid in 64-bit mode: data between functions, stepped over
            bytes.fromhex("c4e3fd00c1d8"),  # vpermq ymm0, ymm1, 0xd8
            bytes.fromhex("c4e37d39c101"),  # vextracti128 xmm1, ymm0, 1
            bytes.fromhex("c4e37d19c101"),  # vextractf128 (AVX1): not counted
            bytes.fromhex("c4e27d17c0"),  # vptest (AVX1): not counted
            bytes.fromhex("c5fc77"),  # vzeroall (AVX1): not counted
        ]
    )
    elf = simdscan.elf_code(make_elf([(".text", 6, code)]))
    counts = simdscan.count_avx2(elf)
    assert counts == {"vpaddd": 1, "vpshufb": 1, "vpermq": 1, "vextracti128": 1}


AVX2_C = """
#include <immintrin.h>
void mix(__m256i *a, const __m256i *b, const __m256i *idx, int n) {
    for (int i = 0; i < n; i++) {
        __m256i x = _mm256_add_epi32(a[i], b[i]);
        x = _mm256_shuffle_epi8(x, b[i]);
        x = _mm256_madd_epi16(x, a[i]);
        a[i] = _mm256_permutevar8x32_epi32(x, idx[i]);
    }
}
"""
GENERIC_C = "float sum(const float *v, int n) { float s = 0; while (n--) s += v[n]; return s; }\n"


def objdump_count(path: Path) -> int:
    """AVX2 ymm integer instructions by binutils' objdump (AT&T syntax), the same rule."""
    out = subprocess.run(
        ["objdump", "-d", "--no-show-raw-insn", str(path)],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    count = 0
    for line in out.splitlines():
        fields = line.split("\t")
        if len(fields) >= 2 and fields[0].strip().endswith(":"):
            mnemonic, _, operands = fields[1].strip().partition(" ")
            count += simdscan.is_avx2_ymm(mnemonic, operands)
    return count


@pytest.mark.parametrize("flags", [["-mavx2"], []], ids=["avx2", "generic"])
def test_the_count_agrees_with_objdump_on_compiled_code(tmp_path, flags):
    if shutil.which("gcc") is None or shutil.which("objdump") is None:
        pytest.skip("gcc and objdump (binutils) are needed to compile and disassemble")
    source = tmp_path / "mix.c"
    source.write_text(AVX2_C if flags else GENERIC_C)
    so = tmp_path / "mix.so"
    subprocess.run(
        ["gcc", "-O2", "-shared", "-fPIC", *flags, str(source), "-o", str(so)], check=True
    )
    counted = simdscan.count_avx2(simdscan.elf_code(so.read_bytes()))
    assert sum(counted.values()) == objdump_count(so)
    assert (sum(counted.values()) >= 4) is bool(flags)


def test_elf_code_finds_executable_sections():
    elf = make_elf([(".data", 3, b"\xc5\xfd\xfe\xc1"), (".text", 6, b"code"), (".init", 6, b"i")])
    found = simdscan.elf_code(elf)
    assert found.machine == "EM_X86_64"
    assert [(name, code) for name, _, code in found.sections] == [
        (".text", b"code"),
        (".init", b"i"),
    ]
    assert found.size == 5


@pytest.mark.parametrize(
    ("data", "message"),
    [
        (b"", "not an ELF file"),
        (b"MZ\x90\0" + b"\0" * 60, "not an ELF file"),
        (b"\x7fELF" + b"\xff" * 60, "unreadable ELF file: Invalid EI_CLASS"),
    ],
)
def test_elf_code_rejects(data, message):
    with pytest.raises(simdscan.ElfError, match=message):
        simdscan.elf_code(data)


VALID_ELF = make_elf([(".text", 6, VPADDD_YMM * 4), (".data", 3, b"data")])


@given(
    st.binary(max_size=4096),
    st.lists(st.tuples(st.integers(0, len(VALID_ELF) - 1), st.integers(0, 255)), max_size=8),
)
def test_elf_code_only_raises_elf_error(data, edits):
    """Arbitrary bytes, and a valid ELF file with some bytes changed: the result or an
    ElfError, never another exception."""
    mutated = bytearray(VALID_ELF)
    for position, value in edits:
        mutated[position] = value
    for candidate in (data, bytes(mutated)):
        with contextlib.suppress(simdscan.ElfError):
            found = simdscan.elf_code(candidate)
            assert all(len(code) <= len(candidate) for _, _, code in found.sections)


@given(st.binary(max_size=2048), st.lists(st.tuples(st.sampled_from([2, 3, 6]), st.binary())))
def test_elf_code_round_trip(text, others):
    sections = [(".text", 6, text)] + [(f".s{i}", f, d) for i, (f, d) in enumerate(others)]
    elf = make_elf(sections)
    expected = [d for _, f, d in sections if f & 4]
    assert [code for _, _, code in simdscan.elf_code(elf).sections] == expected


KNOWN = [VPADDD_YMM, bytes.fromhex("c4e27d00c1"), bytes.fromhex("c4e37d39c101")]


@settings(max_examples=30)
@given(st.lists(st.sampled_from(KNOWN), max_size=50), st.integers(0, 5))
def test_each_instruction_counted_once(instructions, padding):
    nops = b"\x90" * padding
    code = nops + nops.join(instructions) + nops
    counted = simdscan.count_avx2(simdscan.elf_code(make_elf([(".text", 6, code)])))
    assert sum(counted.values()) == len(instructions)


# --- cpuinfo, distinfo parsers ------------------------------------------------------------

FLAG = st.text(alphabet="abcdefghijklmnopqrstuvwxyz0123456789_", min_size=1, max_size=12)


@given(st.sets(FLAG, max_size=40))
def test_cpu_flags_round_trip(flags):
    text = f"processor\t: 0\nvendor_id\t: GenuineIntel\nflags\t\t: {' '.join(sorted(flags))}\n"
    assert pillow.cpu_flags(text) == flags


@given(st.text(max_size=500))
def test_cpu_flags_never_crashes(text):
    result = pillow.cpu_flags(text)
    assert result is None or isinstance(result, set)


def test_cpu_flags_absent():
    assert pillow.cpu_flags("processor\t: 0\nFeatures\t: fp asimd\n") is None


PATH_CHARS = st.characters(blacklist_characters="\r\n\x00", blacklist_categories=("Cs",))
ENTRY = st.builds(
    RecordEntry,
    path=st.text(PATH_CHARS, min_size=1, max_size=40).filter(lambda p: p.strip() == p),
    hash=st.none() | st.binary(max_size=64).map(distributions.record_hash),
    size=st.none() | st.integers(0, 2**40),
)


@given(st.lists(ENTRY, max_size=20))
def test_record_round_trip(entries):
    assert distinfo.parse_record(distinfo.format_record(entries)) == entries


@given(st.text(max_size=1000))
def test_parse_record_never_crashes(text):
    for entry in distinfo.parse_record(text):
        assert entry.path


@given(st.lists(st.lists(st.text(alphabet="ab,²\\ '", max_size=8), min_size=1, max_size=4)))
def test_parse_record_reads_unquoted_lines_as_csv(rows):
    lines = [",".join(r) for r in rows]
    expected = []
    for row in csv.reader(lines):
        if row and row[0]:
            size = row[2] if len(row) > 2 and row[2].isascii() and row[2].isdigit() else None
            expected.append(RecordEntry(row[0], (row[1] if len(row) > 1 else "") or None,
                                        None if size is None else int(size)))  # fmt: skip
    assert distinfo.parse_record("\n".join(lines)) == expected


def test_installed_dists_reads_only_records_that_claim_the_package(fake_host):
    add_dist(fake_host, "pillow-11.0.0.dist-info", "pillow", "11.0.0", b"so")
    fake_host.file(f"{SITE}/torch-2.1.dist-info/METADATA", "Name: torch\nVersion: 2.1\n")
    fake_host.file(f"{SITE}/torch-2.1.dist-info/RECORD", "torch/__init__.py,,\n" * 1000)
    fake_host.file(f"{SITE}/evil-1.dist-info/METADATA", "Name: evil\nVersion: 1\n")
    fake_host.file(f"{SITE}/evil-1.dist-info/RECORD", "notPIL/x.py,,\n")
    system = fake_host.system()
    assert [d.name for d in distinfo.installed_dists(system, SITE)] == ["evil", "pillow", "torch"]
    only = distinfo.installed_dists(system, SITE, "PIL")
    assert [(d.name, d.version, len(d.entries)) for d in only] == [("pillow", "11.0.0", 3)]


@given(st.binary(max_size=256))
def test_record_hash_is_urlsafe_sha256(data):
    text = distributions.record_hash(data)
    assert text.startswith("sha256=") and "=" not in text[7:]
    digest = base64.urlsafe_b64decode(text[7:] + "=")
    assert digest == hashlib.sha256(data).digest()


HEADER = st.text(alphabet="ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz-", min_size=1)
VALUE = st.text(alphabet=st.characters(blacklist_categories=("Cc", "Cs", "Zl", "Zp")), max_size=30)


@given(st.dictionaries(HEADER, VALUE.map(str.strip), max_size=10), st.text(max_size=200))
def test_metadata_round_trip(headers, body):
    text = "".join(f"{k}: {v}\n" for k, v in headers.items()) + "\n" + body
    assert distributions.parse_metadata(text) == headers


@given(st.text(max_size=1000))
def test_parse_metadata_never_crashes(text):
    assert isinstance(distributions.parse_metadata(text), dict)


@given(st.text(alphabet="abcXYZ09-_.", min_size=1, max_size=20))
def test_normalize_name_is_idempotent(name):
    once = distributions.normalize_name(name)
    assert distributions.normalize_name(once) == once
    assert once == once.lower()


def test_normalize_name_variants():
    names = {"Pillow-SIMD", "pillow_simd", "pillow.simd", "PILLOW--SIMD"}
    assert {distributions.normalize_name(n) for n in names} == {"pillow-simd"}


def test_egg_info_is_read_from_top_level(fake_host):
    fake_host.file(f"{SITE}/Pillow_SIMD-7.0.0.post3-py3.9.egg-info/PKG-INFO",
                   "Metadata-Version: 1.2\nName: Pillow-SIMD\nVersion: 7.0.0.post3\n")  # fmt: skip
    fake_host.file(f"{SITE}/Pillow_SIMD-7.0.0.post3-py3.9.egg-info/top_level.txt", "PIL\n")
    fake_host.file(f"{SITE}/other-1.0.dist-info/METADATA", "Name: other\nVersion: 1.0\n")
    fake_host.file(f"{SITE}/other-1.0.dist-info/RECORD", "other/__init__.py,,\n")
    dists = distinfo.installed_dists(fake_host.system(), SITE)
    assert [(d.name, d.version, d.claims("PIL")) for d in dists] == [
        ("Pillow-SIMD", "7.0.0.post3", True),
        ("other", "1.0", False),
    ]


# --- this machine -------------------------------------------------------------------------


def _real_config() -> dict:
    return cfg(require=False, require_simd=False, require_avx2=False)


@pytest.mark.real
def test_real_distribution_matches_pip_show_and_importlib_metadata():
    pytest.importorskip("PIL")
    pip = Path(sys.executable).parent / "pip"
    if not pip.exists():
        pytest.skip(f"no pip next to {sys.executable}")
    result = pillow.run(CheckContext(system=System(), config=_real_config()))
    assert result.status != Status.ERROR, result.summary
    dist = finding(result, "distribution")
    name = dist.measured["name"]
    shown = subprocess.run([str(pip), "show", name], capture_output=True, text=True, check=True)
    fields = dict(line.split(": ", 1) for line in shown.stdout.splitlines() if ": " in line)
    assert distributions.normalize_name(fields["Name"]) == distributions.normalize_name(name)
    assert fields["Version"] == dist.measured["version"]
    assert importlib.metadata.version(name) == dist.measured["version"]
    if not hasattr(importlib.metadata, "packages_distributions"):
        return  # Python 3.9: pip show and importlib.metadata.version agreed above
    providers = importlib.metadata.packages_distributions().get("PIL", [])
    expected = sorted(distributions.normalize_name(p) for p in set(providers))
    claimed = sorted(distributions.normalize_name(d["name"]) for d in result.data["claimants"])
    assert claimed == expected


@pytest.mark.real
def test_real_avx2_count_agrees_with_objdump():
    pytest.importorskip("PIL")
    if shutil.which("objdump") is None:
        pytest.skip("objdump (binutils) is not installed")
    result = pillow.run(CheckContext(system=System(), config=_real_config()))
    assert result.data["avx2_method"].startswith("capstone disassembly of .")
    imaging = result.data["avx2_method"].rsplit(" of ", 1)[1]
    assert result.data["avx2_instructions"] == objdump_count(Path(imaging))
    cpuinfo = subprocess.run(["cat", "/proc/cpuinfo"], capture_output=True, text=True).stdout
    first = next(line for line in cpuinfo.splitlines() if line.startswith("flags"))
    assert result.data["cpu_avx2"] == (" avx2 " in first + " ")


@pytest.mark.real
def test_real_pillow_simd_build_is_seen_as_avx2():
    """Set HOSTCHECK_TEST_SIMD_SITE to the site-packages of a venv holding pillow-simd built
    with CC='cc -mavx2' to check the detector flips on a real SIMD build."""
    site = os.environ.get("HOSTCHECK_TEST_SIMD_SITE")
    if not site:
        pytest.skip("HOSTCHECK_TEST_SIMD_SITE not set (no pillow-simd build to look at)")
    so = next(Path(site, "PIL").glob("_imaging.*.so"))
    probe = info(package_dir=str(Path(site, "PIL")), imaging_path=str(so))
    result = pillow.evaluate(CheckContext(system=System(), config=cfg()), probe)
    assert finding(result, "distribution").measured["name"].lower() == "pillow-simd"
    assert result.data["avx2_build"] is True
    scan = pillow.scan_build(System(), str(so))
    assert scan.total >= CONFIG["avx2_min_instructions"]


@settings(suppress_health_check=[HealthCheck.function_scoped_fixture], max_examples=20)
@given(st.integers(0, 40))
def test_the_count_is_the_measured_value(simd_host, n):
    put_so(simd_host, make_elf([(".text", 6, VPADDD_YMM * n + VADDPS_YMM * 3)]))
    result = pillow.evaluate(simd_host.context(cfg(avx2_min_instructions=20)), info())
    build = finding(result, "avx2 build")
    assert build.measured == n
    assert result.data["avx2_build"] is (n >= 20)
