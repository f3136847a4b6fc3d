"""Pillow-SIMD: which distribution provides PIL, libjpeg-turbo, AVX2 in the build, resize rate.

PIL is imported inside run() only: hostcheck does not depend on Pillow, and a dependency
on it would make pip pull stock Pillow back over pillow-simd. Its helpers stand beside it:
`distinfo` (which installed distributions claim PIL) and `simdscan` (AVX2 in the build).
"""

from __future__ import annotations

import io
import os
import posixpath
import sys
import time
from dataclasses import dataclass, field

from hostcheck import config as c
from hostcheck._shared.distributions import record_hash
from hostcheck.checks.base import CheckContext, CheckSpec
from hostcheck.checks.pillow import simdscan
from hostcheck.checks.pillow.distinfo import InstalledDist, installed_dists
from hostcheck.model import CheckResult, Finding, Status
from hostcheck.system import System

CHECK_ID = "pillow"
PACKAGE = "PIL"
SIMD = "pillow-simd"
FIX = "run: ansible-playbook site.yml --tags pillow_simd"
FIX_SIMD = f"set pillow_simd_enabled: true (role pillow_simd) and {FIX}"
FIX_AVX2 = f"set pillow_simd_avx2: true (role pillow_simd) to rebuild with -mavx2 and {FIX}"
FIX_NO_AVX2 = f"set pillow_simd_avx2: false (role pillow_simd): this CPU has no AVX2; {FIX}"
FIX_LIBRARIES = "pip install capstone pyelftools (hostcheck's dependencies) in this venv"
FIX_TWO = (
    f"pip uninstall -y pillow pillow-simd in the training venv, then {FIX} "
    "(pillow_simd_enabled reinstalls pillow-simd alone)"
)

# The benchmark job: a camera-sized RGB image to a typical network input.
SOURCE_SIZE = (2048, 1536)
TARGET_SIZE = (224, 224)
JPEG_QUALITY = 90
FILTERS = ("bilinear", "bicubic", "lanczos")

SCHEMA = c.obj(
    {
        "require": {"type": "boolean"},
        "require_simd": {"type": "boolean"},
        "require_libjpeg_turbo": {"type": "boolean"},
        "require_avx2": {"type": "boolean"},
        "avx2_min_instructions": c.POSITIVE_INT,
        "count_avx2": {"type": "boolean"},
        "benchmark_seconds": c.NON_NEGATIVE,
        "benchmark_filter": {"enum": list(FILTERS)},
        "min_resize_per_s": c.nullable(c.NON_NEGATIVE),
        "min_decode_per_s": c.nullable(c.NON_NEGATIVE),
    }
)


@dataclass
class PilInfo:
    """What importing PIL in this interpreter tells."""

    version: str
    package_dir: str  # directory of the imported PIL package
    imaging_path: str | None  # the _imaging C extension
    libjpeg_turbo: bool | None  # None: this Pillow cannot tell
    jpeg_version: str | None  # libjpeg API version, e.g. 6.2 / 8.0
    turbo_version: str | None
    python: str = field(default_factory=lambda: sys.executable)


def _feature(call, *args):
    try:
        return call(*args)
    except Exception:  # old Pillow: unknown feature name or missing function
        return None


def probe_pil() -> PilInfo | str:
    """Import PIL; the error text when it cannot be imported."""
    try:
        import PIL
        from PIL import _imaging, features
    except Exception as exc:  # ImportError, or a broken build (undefined symbol ...)
        return f"{type(exc).__name__}: {exc}"
    turbo = _feature(features.check_feature, "libjpeg_turbo")
    return PilInfo(
        version=getattr(PIL, "__version__", "?"),
        package_dir=os.path.dirname(os.path.abspath(PIL.__file__)),
        imaging_path=getattr(_imaging, "__file__", None),
        libjpeg_turbo=None if turbo is None else bool(turbo),
        jpeg_version=_feature(features.version, "jpg"),
        turbo_version=_feature(features.version, "libjpeg_turbo"),
    )


# --- which distribution -----------------------------------------------------------------


@dataclass
class Provenance:
    claimants: list[InstalledDist]
    provider: InstalledDist | None  # whose _imaging is the one on disk
    hash_matches: dict[str, bool | None]  # claimant label -> its RECORD hash matches disk
    imaging_hash: str | None


def provenance(system: System, info: PilInfo) -> Provenance:
    site_dir = posixpath.dirname(info.package_dir)
    claimants = installed_dists(system, site_dir, PACKAGE)
    imaging_hash = None
    matches: dict[str, bool | None] = {}
    if info.imaging_path:
        relative = posixpath.relpath(info.imaging_path, site_dir)
        try:
            imaging_hash = record_hash(system.path(info.imaging_path).read_bytes())
        except OSError:
            imaging_hash = None
        for dist in claimants:
            entry = dist.entry(relative)
            known = entry is not None and entry.hash is not None and imaging_hash is not None
            matches[dist.label()] = (entry.hash == imaging_hash) if known else None
    if len(claimants) == 1:
        provider = claimants[0]
    else:
        on_disk = [d for d in claimants if matches.get(d.label())]
        provider = on_disk[0] if len(on_disk) == 1 else None
    return Provenance(claimants, provider, matches, imaging_hash)


def distribution_findings(cfg: dict, info: PilInfo, prov: Provenance) -> list[Finding]:
    source = f"RECORD of the *.dist-info in {posixpath.dirname(info.package_dir)}"
    want = SIMD if cfg["require_simd"] else "pillow or pillow-simd"
    provider = prov.provider
    if provider is None:
        names = ", ".join(d.label() for d in prov.claimants) or "no installed distribution"
        dist = Finding(
            "distribution",
            Status.WARN,
            None,
            want,
            display=f"unknown ({names} claim PIL; none matches the _imaging on disk)"
            if prov.claimants
            else "unknown (no installed distribution claims PIL)",
            source=source,
            remedy=FIX_SIMD,
        )
    else:
        is_simd = provider.key == SIMD
        status = Status.FAIL if cfg["require_simd"] and not is_simd else Status.PASS
        display = provider.label()
        if prov.hash_matches.get(provider.label()) is False:
            status = max(status, Status.WARN, key=lambda s: s.rank)
            display += " (its _imaging differs from RECORD: replaced after install)"
        dist = Finding(
            "distribution",
            status,
            {"name": provider.name, "version": provider.version},
            want,
            display=display,
            source=source,
            remedy=FIX_SIMD,
        )
    labels = [d.label() for d in prov.claimants]
    two = len(labels) > 1
    claimed = Finding(
        "claimed by",
        Status.WARN if two else Status.PASS,
        labels,
        "one distribution",
        display=" and ".join(labels) if two else (labels[0] + " only" if labels else "none"),
        source=source,
        remedy=FIX_TWO,
    )
    return [dist, claimed]


# --- libjpeg-turbo, AVX2 --------------------------------------------------------------------


def jpeg_finding(cfg: dict, info: PilInfo) -> Finding:
    turbo = info.libjpeg_turbo
    if turbo:
        status = Status.PASS
        display = f"yes, {info.turbo_version or '?'} (libjpeg API {info.jpeg_version})"
    else:
        status = Status.FAIL if cfg["require_libjpeg_turbo"] else Status.PASS
        if turbo is None:
            status = Status.WARN if cfg["require_libjpeg_turbo"] else Status.PASS
            display = f"cannot tell (Pillow {info.version} has no libjpeg_turbo feature)"
        else:
            display = f"no: plain libjpeg {info.jpeg_version or '(none)'}"
    return Finding(
        "libjpeg-turbo",
        status,
        turbo,
        "libjpeg-turbo" if cfg["require_libjpeg_turbo"] else "report only",
        display=display,
        source="PIL.features.check_feature('libjpeg_turbo'), features.version('jpg')",
        remedy=f"rebuild against libjpeg-turbo (its -dev package): {FIX_SIMD}",
    )


def cpu_flags(cpuinfo: str) -> set[str] | None:
    """The flags of the first CPU in /proc/cpuinfo; None when there is no flags line."""
    for line in cpuinfo.splitlines():
        key, sep, value = line.partition(":")
        if sep and key.strip() == "flags":
            return set(value.split())
    return None


@dataclass
class Avx2Scan:
    counts: dict[str, int]
    method: str  # the `source` text
    machine: str | None = None  # EM_X86_64 ...
    error: str | None = None

    @property
    def total(self) -> int:
        return sum(self.counts.values())


def scan_build(system: System, path: str) -> Avx2Scan:
    """AVX2 ymm integer instructions in the extension, counted by disassembling it."""
    try:
        data = system.path(path).read_bytes()
    except OSError as exc:
        return Avx2Scan({}, f"read {path}", error=f"cannot read: {exc.strerror}")
    try:
        elf = simdscan.elf_code(data)
        if elf.machine != simdscan.X86_64:
            return Avx2Scan({}, f"ELF headers of {path}", machine=elf.machine)
        counts = simdscan.count_avx2(elf)
    except simdscan.ElfError as exc:
        return Avx2Scan({}, f"ELF headers of {path}", error=str(exc))
    except simdscan.MissingLibrary as exc:
        return Avx2Scan({}, f"disassemble {path}", error=f"{exc}: {FIX_LIBRARIES}")
    names = "+".join(name for name, _, _ in elf.sections)
    method = f"capstone disassembly of {names} ({elf.size} bytes) of {path}"
    return Avx2Scan(dict(counts), method, machine=elf.machine)


def avx2_findings(cfg: dict, system: System, info: PilInfo) -> tuple[list[Finding], dict]:
    flags = cpu_flags(system.read("/proc/cpuinfo") or "")
    cpu_avx2 = None if flags is None else "avx2" in flags
    cpu = Finding(
        "cpu avx2",
        Status.SKIP if cpu_avx2 is None else Status.PASS,
        cpu_avx2,
        "report only",
        display={None: "no x86 flags in /proc/cpuinfo", True: "yes", False: "no"}[cpu_avx2],
        source="/proc/cpuinfo flags",
    )
    data: dict = {"cpu_avx2": cpu_avx2}
    if not info.imaging_path:
        build = Finding("avx2 build", Status.SKIP, None, display="no _imaging extension found")
        return [build, cpu], data
    if not (cfg["count_avx2"] or cfg["require_avx2"]):
        build = Finding("avx2 build", Status.SKIP, None, display="not counted (count_avx2: false)")
        return [build, cpu], data
    scan = scan_build(system, info.imaging_path)
    data.update(
        avx2_method=scan.method,
        avx2_instructions=scan.total,
        avx2_mnemonics=dict(sorted(scan.counts.items(), key=lambda kv: -kv[1])[:12]),
        elf_machine=scan.machine,
    )
    need = cfg["avx2_min_instructions"]
    expected = f">= {need} AVX2 ymm integer instructions" if cfg["require_avx2"] else None
    if scan.error or scan.machine != simdscan.X86_64:
        reason = scan.error or f"not an x86-64 build (ELF machine {scan.machine})"
        # a build that must be proven and cannot be: not assessed, never a silent skip
        status = Status.ERROR if scan.error and cfg["require_avx2"] else Status.SKIP
        build = Finding("avx2 build", status, None, expected, reason, scan.method)
        return [build, cpu], data
    uses = scan.total >= need
    data["avx2_build"] = uses
    status, remedy = Status.PASS, FIX_AVX2
    if uses and cpu_avx2 is False:
        status, remedy = Status.FAIL, FIX_NO_AVX2
    elif not uses and cpu_avx2 and cfg["require_avx2"]:
        status = Status.FAIL
    verdict = "uses AVX2" if uses else "no AVX2"
    build = Finding(
        "avx2 build",
        status,
        scan.total,
        expected or "report only",
        display=f"{verdict} ({scan.total} ymm integer instructions, threshold {need})",
        source=scan.method,
        remedy=remedy,
    )
    if uses and cpu_avx2 is False:
        build.display += "; this CPU has no AVX2: resize dies with SIGILL"
    return [build, cpu], data


# --- benchmark -------------------------------------------------------------------------


def _test_image():
    from PIL import Image

    width, height = SOURCE_SIZE
    small = (width // 4, height // 4)
    detail = Image.effect_mandelbrot(small, (-2.0, -1.2, 1.0, 1.2), 64)
    bands = (Image.linear_gradient("L"), detail, Image.radial_gradient("L"))
    return Image.merge("RGB", [b.resize(SOURCE_SIZE) for b in bands])


def _rate(job, seconds: float) -> tuple[float, int]:
    job()  # warm-up
    count = 0
    start = time.perf_counter()
    elapsed = 0.0
    while elapsed < seconds or count == 0:
        job()
        count += 1
        elapsed = time.perf_counter() - start
    return count / elapsed, count


def measure_rates(seconds: float, filter_name: str) -> dict:
    """Images per second of resize and of JPEG decode, one thread, `seconds` each."""
    from PIL import Image

    resample = getattr(Image, filter_name.upper())
    image = _test_image()
    buffer = io.BytesIO()
    image.save(buffer, "JPEG", quality=JPEG_QUALITY)
    jpeg = buffer.getvalue()

    def resize() -> None:
        image.resize(TARGET_SIZE, resample)

    def decode() -> None:
        Image.open(io.BytesIO(jpeg)).load()

    resize_rate, resizes = _rate(resize, seconds)
    decode_rate, decodes = _rate(decode, seconds)
    return {
        "resize_per_s": resize_rate,
        "resizes": resizes,
        "decode_per_s": decode_rate,
        "decodes": decodes,
        "jpeg_bytes": len(jpeg),
    }


def _benchmark_data(cfg: dict, rates: dict | None) -> dict | None:
    return None if rates is None else {"job": _job_text(cfg["benchmark_filter"]), **rates}


def _job_text(filter_name: str) -> str:
    (w, h), (tw, th) = SOURCE_SIZE, TARGET_SIZE
    return f"{w}x{h} RGB -> {tw}x{th} {filter_name.upper()}"


def rate_findings(cfg: dict, rates: dict) -> list[Finding]:
    job = _job_text(cfg["benchmark_filter"])
    w, h = SOURCE_SIZE
    found = []
    for name, key, minimum, what in (
        ("resize rate", "resize_per_s", cfg["min_resize_per_s"], f"resize {job}"),
        ("decode rate", "decode_per_s", cfg["min_decode_per_s"], f"decode {w}x{h} JPEG"),
    ):
        rate = rates[key]
        ok = minimum is None or rate >= minimum
        found.append(
            Finding(
                name,
                Status.PASS if ok else Status.FAIL,
                round(rate, 1),
                "report only" if minimum is None else f">= {minimum:g}/s",
                display=f"{rate:.0f}/s ({what}, one thread)",
                source=f"in-process benchmark, {cfg['benchmark_seconds']:g} s",
                remedy=FIX_AVX2 if key == "resize_per_s" else FIX_SIMD,
            )
        )
    return found


# --- the check -------------------------------------------------------------------------


def run(ctx: CheckContext) -> CheckResult:
    cfg = ctx.config
    info = probe_pil()
    if isinstance(info, str):
        data = {"python": sys.executable, "import_error": info}
        if not cfg["require"]:
            return CheckResult.skipped(CHECK_ID, f"PIL is not importable here: {info}", data)
        missing = Finding(
            "import PIL",
            Status.FAIL,
            info,
            "importable",
            display=f"not importable in {sys.executable}: {info}",
            source="import PIL",
            remedy=FIX_SIMD,
        )
        return CheckResult.from_findings(CHECK_ID, [missing], data)
    return evaluate(ctx, info)


def evaluate(ctx: CheckContext, info: PilInfo) -> CheckResult:
    cfg = ctx.config
    prov = provenance(ctx.system, info)
    findings = distribution_findings(cfg, info, prov)
    findings.append(jpeg_finding(cfg, info))
    avx2, avx2_data = avx2_findings(cfg, ctx.system, info)
    findings.extend(avx2)
    rates = None
    if cfg["benchmark_seconds"] > 0:
        try:
            rates = measure_rates(cfg["benchmark_seconds"], cfg["benchmark_filter"])
        except Exception as exc:
            findings.append(
                Finding("resize rate", Status.ERROR, None, display=f"benchmark failed: {exc}")
            )
        else:
            findings.extend(rate_findings(cfg, rates))
    else:
        findings.append(
            Finding("resize rate", Status.SKIP, None, display="not measured (benchmark_seconds 0)")
        )
    data = {
        "python": info.python,
        "pil_version": info.version,
        "pil_dir": info.package_dir,
        "imaging_path": info.imaging_path,
        "imaging_sha256": prov.imaging_hash,
        "distribution": None
        if prov.provider is None
        else {"name": prov.provider.name, "version": prov.provider.version},
        "claimants": [
            {
                "name": d.name,
                "version": d.version,
                "metadata_dir": d.metadata_dir,
                "imaging_hash_matches": prov.hash_matches.get(d.label()),
            }
            for d in prov.claimants
        ],
        "libjpeg_turbo": info.libjpeg_turbo,
        "jpeg_version": info.jpeg_version,
        "libjpeg_turbo_version": info.turbo_version,
        **avx2_data,
        "benchmark": _benchmark_data(cfg, rates),
    }
    return CheckResult.from_findings(CHECK_ID, findings, data)


SPEC = CheckSpec(
    id=CHECK_ID,
    title="Pillow-SIMD build: distribution, libjpeg-turbo, AVX2, resize rate",
    explain=(
        "Measures which installed distribution provides the PIL package (from the RECORD "
        "files of the dist-info directories, with the sha256 of the _imaging extension to "
        "tell whose files are on disk: pillow or pillow-simd, and whether both claim PIL, "
        "as when torchvision pulls stock Pillow back over pillow-simd), whether JPEG goes "
        "through libjpeg-turbo, whether the _imaging extension uses AVX2 (integer "
        "instructions on ymm registers, counted by disassembling its code with capstone, "
        "the same way on every host) and whether the CPU has it, and, for "
        "benchmark_seconds, how many images "
        "per second one thread resizes and decodes. DataLoader workers spend much of their "
        "time in PIL decode and resize; Pillow-SIMD built with AVX2 resizes several times "
        "faster than stock Pillow, while JPEG decode is no faster (both use libjpeg-turbo), "
        "so the gain shows in resize-heavy pipelines and disappears silently when a later "
        "pip install brings stock Pillow back."
    ),
    run=run,
    schema=SCHEMA,
    roles=("pillow_simd",),
)
