"""Host side of the pillow_simd role: look at a venv, build a pillow-simd wheel, write the
placeholder `pillow` wheel, time resizes. Prints one JSON object; exit 1 with {"msg": ...}.

Runs with the host's python3 (3.6 or newer: RHEL 8 has 3.6), never imports PIL itself (a
build with -mavx2 on a CPU without AVX2 dies with SIGILL): PIL is imported by the venv's
interpreter in a child process.

  probe       --venv V --version X --avx2 yes|no --os-key K --packages-hash H
              [--package-manager M --packages P... --constraints-text T]   (what provisioning
              checks: "drift" lists what differs, "provisioned" is true when nothing does)
              [--runtime [--bench-seconds S] [--recount] [--hostcheck]]   (what verify reads)
  build       --venv V --version X --avx2 yes|no --out DIR --key K [--min-avx2 N]
  placeholder --version X --out DIR
  bench       --python P [--seconds S]
"""

import argparse
import base64
import configparser
import csv
import hashlib
import io
import json
import os
import re
import shutil
import signal
import socket
import stat
import subprocess
import sys
import tempfile
import time
import zipfile

PLACEHOLDER_LOCAL = "pillowsimd"  # local version label: no index can ever serve it
IMAGING = re.compile(r"^PIL/_imaging\.[^/]*\.so$")
# AVX1 already had these "vp" mnemonics on ymm; they are not AVX2 integer operations.
AVX1_VP = ("vperm2f128", "vpermilps", "vpermilpd", "vptest")
AVX2_OTHER = ("vinserti128", "vextracti128", "vbroadcasti128", "vmovntdqa", "vmpsadbw")
OBJDUMP_LINE = re.compile(r"^\s*[0-9a-f]+:\s+([a-z][a-z0-9]*)\s+(\S.*)?$")

RUNTIME = r"""
import json, sys, time
out = {}
import PIL
from PIL import Image, features, _imaging
out["version"] = PIL.__version__
out["imaging"] = _imaging.__file__
out["libjpeg_turbo"] = bool(features.check_feature("libjpeg_turbo"))
out["jpeg_version"] = features.version("jpg")
out["features"] = {f: bool(features.check(f)) for f in
                   ("jpg", "zlib", "libtiff", "webp", "freetype2", "littlecms2", "jpg_2000")}
seconds = float(sys.argv[1])
if seconds > 0:
    w, h = 2048, 1536
    detail = Image.effect_mandelbrot((w // 4, h // 4), (-2.0, -1.2, 1.0, 1.2), 64)
    bands = (Image.linear_gradient("L"), detail, Image.radial_gradient("L"))
    image = Image.merge("RGB", [b.resize((w, h)) for b in bands])
    image.resize((224, 224), Image.BICUBIC)
    count, start = 0, time.perf_counter()
    while time.perf_counter() - start < seconds or count == 0:
        image.resize((224, 224), Image.BICUBIC)
        count += 1
    out["resize_per_s"] = round(count / (time.perf_counter() - start), 1)
    out["resize_job"] = "2048x1536 RGB -> 224x224 BICUBIC, one thread"
print(json.dumps(out))
"""


class Failure(Exception):
    pass


def run(argv, env=None, timeout=None):
    proc = subprocess.Popen(
        argv,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        universal_newlines=True,
        env=env,
    )
    try:
        out, dummy = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        proc.kill()
        out, dummy = proc.communicate()
        return 124, out + f"\n(timed out after {timeout} s)"
    return proc.returncode, out


def record_hash(data):
    digest = hashlib.sha256(data).digest()
    return "sha256=" + base64.urlsafe_b64encode(digest).rstrip(b"=").decode("ascii")


def file_sha256(path):
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def read_text(path):
    try:
        with open(path, encoding="utf-8", errors="replace") as handle:
            return handle.read()
    except OSError:
        return None


def normalize(name):
    return re.sub(r"[-_.]+", "-", name).lower()


def headers(text):
    found = {}
    for line in text.splitlines():
        if not line.strip():
            break
        key, sep, value = line.partition(":")
        if sep and line[:1] not in (" ", "\t") and key.strip() not in found:
            found[key.strip()] = value.strip()
    return found


def record_rows(text):
    rows = []
    for row in csv.reader(io.StringIO(text or "")):
        if row and row[0]:
            rows.append((row[0], row[1] if len(row) > 1 else ""))
    return rows


# --- the venv -------------------------------------------------------------------------


def interpreter_info(python):
    code = (
        "import json, sys, sysconfig;"
        "print(json.dumps({'version': '%d.%d.%d' % sys.version_info[:3],"
        "'tag': 'cp%d%d' % sys.version_info[:2],"
        "'implementation': sys.implementation.name,"
        "'platform': sysconfig.get_platform().replace('-', '_').replace('.', '_'),"
        "'purelib': sysconfig.get_paths()['purelib'],"
        "'platlib': sysconfig.get_paths()['platlib']}))"
    )
    code_rc, out = run([python, "-c", code], timeout=60)
    if code_rc != 0:
        raise Failure(f"{python} cannot run: {out.strip()[-300:]}")
    return json.loads(out.strip().splitlines()[-1])


def venv_state(venv):
    if os.path.isdir(venv):
        return "venv" if os.path.isfile(os.path.join(venv, "pyvenv.cfg")) else "directory"
    return "file" if os.path.lexists(venv) else "missing"


def installed(site_dirs):
    """Every dist-info in the venv: name, version, files it installed (RECORD)."""
    found = []
    for site in site_dirs:
        try:
            entries = sorted(os.listdir(site))
        except OSError:
            continue
        for entry in entries:
            if not entry.endswith(".dist-info"):
                continue
            directory = os.path.join(site, entry)
            meta = headers(read_text(os.path.join(directory, "METADATA")) or "")
            if "Name" not in meta:
                continue
            rows = record_rows(read_text(os.path.join(directory, "RECORD")))
            found.append(
                {
                    "name": meta["Name"],
                    "key": normalize(meta["Name"]),
                    "version": meta.get("Version", "?"),
                    "dir": directory,
                    "site": site,
                    "summary": meta.get("Summary", ""),
                    "files": [p for p, dummy in rows if not p.startswith(entry + "/")],
                    "hashes": dict(rows),
                }
            )
    return found


def global_pip_files():
    """pip's global configuration files, in the order pip reads them (later ones win)."""
    dirs = os.environ.get("XDG_CONFIG_DIRS") or "/etc/xdg"
    files = [os.path.join(d, "pip", "pip.conf") for d in dirs.split(os.pathsep) if d]
    return [*files, "/etc/pip.conf"]


def pip_global_constraints(files=None):
    """The constraint files of the global pip configuration (the files pip reads before a
    user's and the venv's own pip.conf); the venv's pip.conf keeps them and adds its own."""
    files = global_pip_files() if files is None else files
    merged = {}
    for path in files:
        parser = configparser.RawConfigParser()
        try:
            parser.read(path)
        except configparser.Error:
            continue
        for section in ("global", "install"):
            if parser.has_option(section, "constraint"):
                merged[section] = parser.get(section, "constraint").split()
    values = merged.get("install", merged.get("global", []))
    return {"files": [f for f in files if os.path.isfile(f)], "constraints": values}


def effective_pip_config(python):
    """What pip in the venv really uses (pip config list: every file and PIP_* variable)."""
    code_rc, out = run([python, "-m", "pip", "config", "list"], timeout=120)
    values = {}
    for line in out.splitlines():
        key, sep, value = line.partition("=")
        if sep:
            values[key.strip()] = value.strip().strip("'\"")
    return {"rc": code_rc, "config": values}


def objdump_count(path):
    """AVX2 integer instructions on ymm registers in a shared object; None without objdump."""
    if shutil.which("objdump") is None:
        return None
    code_rc, out = run(["objdump", "-d", "--no-show-raw-insn", path], timeout=300)
    if code_rc != 0:
        raise Failure(f"objdump -d {path} failed: {out[-300:]}")
    count = 0
    for line in out.splitlines():
        match = OBJDUMP_LINE.match(line)
        if not match or "ymm" not in (match.group(2) or ""):
            continue
        name = match.group(1)
        if (name.startswith("vp") and not name.startswith(AVX1_VP)) or name in AVX2_OTHER:
            count += 1
    return count


def runtime_info(python, seconds):
    code_rc, out = run([python, "-c", RUNTIME, str(seconds)], timeout=300)
    if code_rc < 0:
        try:
            name = signal.Signals(-code_rc).name
        except ValueError:
            name = f"signal {-code_rc}"
        return {"ok": False, "error": f"import PIL died with {name}"}
    if code_rc != 0:
        return {"ok": False, "error": out.strip()[-600:]}
    info = json.loads(out.strip().splitlines()[-1])
    info["ok"] = True
    return info


def wheel_name(version, interp):
    return "pillow_simd-{}-{}-{}-{}.whl".format(
        version,
        interp["tag"],
        interp["tag"],
        interp["platform"],
    )


def load_sidecar(path):
    text = read_text(path)
    if text is None:
        return None
    try:
        return json.loads(text)
    except ValueError:
        return None


def missing_packages(names, manager):
    """The names the package database has not installed (dpkg-query, or rpm on dnf/yum hosts:
    a name counts as installed when an installed package provides it)."""
    if not names:
        return []
    try:
        if manager == "apt":
            dummy, out = run(
                ["dpkg-query", "-W", "-f=${Package} ${db:Status-Abbrev}\n", "--", *names]
            )
            installed = set()
            for line in out.splitlines():
                name, dummy, status = line.partition(" ")
                if status[1:2] == "i":
                    installed.add(name)
            return [n for n in names if n.split(":", 1)[0] not in installed]
        dummy, out = run(["rpm", "-q", "--whatprovides", "--", *names])
    except OSError:
        return list(names)
    prefix = "no package provides "
    absent = {line[len(prefix) :].strip() for line in out.splitlines() if line.startswith(prefix)}
    return [n for n in names if n in absent]


def mode_problem(path, mode, kind):
    """What keeps `path` from being a `kind` ("file" or "folder") with `mode`; None if nothing."""
    try:
        found = os.stat(path)
    except OSError:
        return f"{path} is missing"
    is_kind = stat.S_ISDIR if kind == "folder" else stat.S_ISREG
    if not is_kind(found.st_mode):
        return f"{path} is not a {kind}"
    if stat.S_IMODE(found.st_mode) != mode:
        return f"{path} has mode {stat.S_IMODE(found.st_mode):04o}, not {mode:04o}"
    return None


def pip_conf_problem(path, wanted):
    """What keeps the venv's pip.conf from naming `wanted` as the constraint of both [global]
    and [install] (the way the role writes it, mode 0644); None if nothing."""
    problem = mode_problem(path, 0o644, "file")
    if problem:
        return problem
    parser = configparser.RawConfigParser()
    try:
        parser.read(path)
    except configparser.Error as exc:
        return f"{path} is not readable as an ini file: {str(exc).splitlines()[0]}"
    for section in ("global", "install"):
        found = parser.get(section, "constraint", fallback=None)
        if found != wanted:
            return f"{path} [{section}] constraint is {found!r}, not {wanted!r}"
    return None


def provisioning_drift(result, args):
    """What the install path would change, in words ([] when the venv is as wanted)."""
    home, venv = result["home"], result["venv"]["path"]
    drift = []
    if args.packages is not None:
        missing = missing_packages(args.packages, args.package_manager)
        if missing:
            drift.append("packages not installed: " + " ".join(missing))
    if result["venv"]["state"] != "venv":
        drift.append("no venv at " + venv)
    for folder in (home, os.path.join(home, "wheels"), result["wheel"]["dir"]):
        drift.append(mode_problem(folder, 0o755, "folder"))
    constraints = result["constraints"]
    problem = mode_problem(constraints["path"], 0o644, "file")
    if not problem and args.constraints_text not in (None, constraints["text"]):
        problem = constraints["path"] + " is not the role's template"
    drift.append(problem)
    wanted = list(dict.fromkeys(result["pip_global"]["constraints"] + [constraints["path"]]))
    drift.append(pip_conf_problem(os.path.join(venv, "pip.conf"), " ".join(wanted)))
    if not result["wheel"]["ok"]:
        drift.append("no wheel built as wanted at " + result["wheel"]["path"])
    if not result["simd_ok"]:
        drift.append(f"PIL is not pillow-simd {args.version} from that wheel")
    if not result["placeholder"]["ok"]:
        drift.append("pillow is not the placeholder " + result["placeholder"]["version"])
    return [item for item in drift if item]


def hostcheck_pillow(venv, avx2, bench_seconds):
    """hostcheck's own pillow check in the venv (None when hostcheck is not installed there)."""
    command = os.path.join(venv, "bin", "hostcheck")
    if not os.path.exists(command):
        return None
    settings = ["require=true", "require_simd=true", f"require_avx2={str(avx2).lower()}"]
    if bench_seconds <= 0:
        settings.append("benchmark_seconds=0")
    argv = [command, "run", "--check", "pillow"]
    for setting in settings:
        argv += ["--set", "pillow." + setting]
    code_rc, out = run(argv, timeout=600)
    return {"argv": argv, "rc": code_rc, "output": out.strip()[-1500:]}


def probe(args):
    venv = args.venv.rstrip("/")
    state = venv_state(venv)
    python = os.path.join(venv, "bin", "python")
    if state == "venv" and os.path.exists(python):
        interp = interpreter_info(python)
    else:
        interp = interpreter_info(shutil.which(args.venv_python) or args.venv_python)
        python = None
    avx2 = args.avx2 == "yes"
    key = "{}-{}-{}-{}-{}".format(
        args.os_key,
        interp["platform"].split("_", 1)[-1],
        interp["tag"],
        "avx2" if avx2 else "sse4",
        args.packages_hash[:8],
    )
    home = os.path.join(venv, "pillow-simd")
    wheel_dir = os.path.join(home, "wheels", key)
    name = wheel_name(args.version, interp)
    wheel = os.path.join(wheel_dir, name)
    sidecar = load_sidecar(wheel + ".json")
    wheel_ok = bool(
        sidecar
        and os.path.isfile(wheel)
        and sidecar.get("wheel_sha256") == file_sha256(wheel)
        and sidecar.get("version") == args.version
        and sidecar.get("avx2") is avx2
    )

    dists = installed(sorted({interp["purelib"], interp["platlib"]})) if python else []
    claimants = [d for d in dists if any(p.split("/", 1)[0] == "PIL" for p in d["files"])]
    placeholder_version = f"{args.version}+{PLACEHOLDER_LOCAL}"
    pillow = [d for d in dists if d["key"] == "pillow" and d not in claimants]
    simd = [d for d in claimants if d["key"] == "pillow-simd"]
    imaging = None
    if len(simd) == 1:
        for path, digest in simd[0]["hashes"].items():
            if IMAGING.match(path):
                on_disk = os.path.join(simd[0]["site"], path)
                data = None
                if os.path.isfile(on_disk):
                    with open(on_disk, "rb") as handle:
                        data = handle.read()
                imaging = {
                    "path": on_disk,
                    "record": path,
                    "record_sha256": digest,
                    "sha256": record_hash(data) if data is not None else None,
                }
    simd_ok = bool(
        len(claimants) == 1
        and simd
        and simd[0]["version"] == args.version
        and wheel_ok
        and imaging
        and imaging["sha256"] == imaging["record_sha256"] == sidecar.get("imaging_sha256")
    )
    placeholder_ok = (
        len(pillow) == 1 and pillow[0]["version"] == placeholder_version and not pillow[0]["files"]
    )
    constraints = os.path.join(home, "constraints.txt")
    constraints_text = read_text(constraints)
    result = {
        "venv": {"path": venv, "state": state, "python": python, "interpreter": interp},
        "key": key,
        "home": home,
        "wheel": {"dir": wheel_dir, "name": name, "path": wheel, "ok": wheel_ok},
        "sidecar": sidecar,
        "claimants": [
            {"name": d["name"], "version": d["version"], "dir": d["dir"]} for d in claimants
        ],
        "remove": sorted({d["name"] for d in claimants if d["key"] != "pillow-simd"}),
        "pillow": [{"name": d["name"], "version": d["version"]} for d in pillow],
        "imaging": imaging,
        "simd_ok": simd_ok,
        "placeholder": {"version": placeholder_version, "ok": placeholder_ok},
        "constraints": {
            "path": constraints,
            "text": constraints_text,
            "lines": (constraints_text or "").splitlines(),
        },
        "pip_global": pip_global_constraints(),
        "pip_env": {
            k: v for k, v in os.environ.items() if k in ("PIP_CONSTRAINT", "PIP_CONFIG_FILE")
        },
    }
    result["drift"] = provisioning_drift(result, args)
    result["provisioned"] = not result["drift"]
    if args.runtime and python:
        result["runtime"] = runtime_info(python, args.bench_seconds)
        result["pip_effective"] = effective_pip_config(python)
        if args.recount and imaging and imaging["sha256"]:
            result["avx2_instructions"] = objdump_count(imaging["path"])
    if args.hostcheck:
        result["hostcheck"] = hostcheck_pillow(venv, avx2, args.bench_seconds)
    return result


# --- build ----------------------------------------------------------------------------


def build(args):
    venv = args.venv.rstrip("/")
    python = os.path.join(venv, "bin", "python")
    avx2 = args.avx2 == "yes"
    env = dict(os.environ)
    # pillow-simd's documented way: its setup.py always adds -msse4; -mavx2 adds AVX2.
    env["CC"] = "cc -mavx2" if avx2 else "cc"
    env.pop("CFLAGS", None)
    started = time.time()
    work = tempfile.mkdtemp(prefix="pillow-simd-build-")
    try:
        argv = [
            python, "-m", "pip", "wheel",
            "--no-deps",
            "--no-cache-dir",  # never reuse a wheel built with other flags
            "--no-binary", "pillow-simd",
            "--wheel-dir", work,
            f"pillow-simd=={args.version}",
        ]  # fmt: skip
        code_rc, log = run(argv, env=env, timeout=args.timeout)
        wheels = [f for f in os.listdir(work) if f.endswith(".whl")]
        if code_rc != 0 or len(wheels) != 1:
            raise Failure(
                "building pillow-simd {} failed ({}, CC={!r}):\n{}".format(
                    args.version, " ".join(argv), env["CC"], log[-3000:]
                )
            )
        built = os.path.join(work, wheels[0])
        with zipfile.ZipFile(built) as archive:
            members = [n for n in archive.namelist() if IMAGING.match(n)]
            if len(members) != 1:
                raise Failure(f"{wheels[0]} has no single PIL/_imaging*.so: {members}")
            data = archive.read(members[0])
        so_path = os.path.join(work, "imaging.so")
        with open(so_path, "wb") as handle:
            handle.write(data)
        count = objdump_count(so_path)
        if count is None:
            raise Failure("objdump is missing: it proves whether the build uses AVX2 (binutils)")
        if avx2 and count < args.min_avx2:
            raise Failure(
                f"CC={env['CC']!r} built {wheels[0]} with only {count} AVX2 ymm instructions"
                f" (at least {args.min_avx2} expected)"
            )
        if not avx2 and count >= args.min_avx2:
            raise Failure(f"the build without -mavx2 has {count} AVX2 ymm instructions")
        sidecar = {
            "name": "pillow-simd",
            "version": args.version,
            "avx2": avx2,
            "avx2_instructions": count,
            "cc": env["CC"],
            "key": args.key,
            "wheel": wheels[0],
            "wheel_sha256": file_sha256(built),
            "imaging": members[0],
            "imaging_sha256": record_hash(data),
            "built_on": socket.gethostname(),
            "built_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
            "build_seconds": round(time.time() - started, 1),
        }
        os.makedirs(args.out, exist_ok=True)
        target = os.path.join(args.out, wheels[0])
        shutil.copyfile(built, target + ".tmp")
        os.replace(target + ".tmp", target)
        with open(target + ".json.tmp", "w") as handle:
            json.dump(sidecar, handle, indent=2, sort_keys=True)
            handle.write("\n")
        os.replace(target + ".json.tmp", target + ".json")  # last: it marks the wheel good
        sidecar["path"] = target
        return sidecar
    finally:
        shutil.rmtree(work, ignore_errors=True)


# --- placeholder ----------------------------------------------------------------------


def placeholder(args):
    """A wheel named pillow that installs no files: it satisfies torchvision's requirement
    on pillow, so pip leaves PIL (pillow-simd's files) alone."""
    version = f"{args.version}+{PLACEHOLDER_LOCAL}"
    info = f"pillow-{version}.dist-info"
    metadata = (
        "Metadata-Version: 2.1\n"
        "Name: pillow\n"
        f"Version: {version}\n"
        f"Summary: Placeholder: PIL in this environment comes from pillow-simd {args.version}\n"
        "Description-Content-Type: text/plain\n"
        "\n"
        "This distribution installs no files. It stands in for stock Pillow so that\n"
        "packages requiring pillow (torchvision ...) are satisfied by pillow-simd, which\n"
        "provides the same PIL package. The venv's pip.conf pins pillow to this version,\n"
        "so pip cannot replace it with stock Pillow. Managed by the Ansible role\n"
        "pillow_simd; change pillow_simd_version there, not with pip.\n"
    )
    files = [
        (info + "/METADATA", metadata.encode()),
        (info + "/WHEEL", b"Wheel-Version: 1.0\nGenerator: pillow_simd role\n"
         b"Root-Is-Purelib: true\nTag: py3-none-any\n"),
    ]  # fmt: skip
    record = "".join(f"{p},{record_hash(d)},{len(d)}\n" for p, d in files)
    files.append((info + "/RECORD", (record + info + "/RECORD,,\n").encode()))
    os.makedirs(args.out, exist_ok=True)
    path = os.path.join(args.out, f"pillow-{version}-py3-none-any.whl")
    with zipfile.ZipFile(path + ".tmp", "w", zipfile.ZIP_DEFLATED) as archive:
        for name, data in files:
            entry = zipfile.ZipInfo(name, (1980, 1, 1, 0, 0, 0))  # same bytes every time
            entry.external_attr = 0o644 << 16
            archive.writestr(entry, data)
    os.replace(path + ".tmp", path)
    return {"path": path, "version": version, "sha256": file_sha256(path)}


def bench(args):
    return runtime_info(args.python, args.seconds)


def main():
    parser = argparse.ArgumentParser(description=__doc__)
    sub = parser.add_subparsers(dest="command")
    p = sub.add_parser("probe")
    p.add_argument("--venv", required=True)
    p.add_argument("--venv-python", default="python3")
    p.add_argument("--version", required=True)
    p.add_argument("--avx2", choices=("yes", "no"), required=True)
    p.add_argument("--os-key", required=True)
    p.add_argument("--packages-hash", required=True)
    p.add_argument("--package-manager", default="apt")
    p.add_argument("--packages", nargs="*")
    p.add_argument("--constraints-text")
    p.add_argument("--runtime", action="store_true")
    p.add_argument("--bench-seconds", type=float, default=1.0)
    p.add_argument("--recount", action="store_true")
    p.add_argument("--hostcheck", action="store_true")
    b = sub.add_parser("build")
    b.add_argument("--venv", required=True)
    b.add_argument("--version", required=True)
    b.add_argument("--avx2", choices=("yes", "no"), required=True)
    b.add_argument("--out", required=True)
    b.add_argument("--key", required=True)
    b.add_argument("--min-avx2", type=int, default=100)
    b.add_argument("--timeout", type=float, default=3600)
    h = sub.add_parser("placeholder")
    h.add_argument("--version", required=True)
    h.add_argument("--out", required=True)
    r = sub.add_parser("bench")
    r.add_argument("--python", required=True)
    r.add_argument("--seconds", type=float, default=1.0)
    args = parser.parse_args()
    commands = {"probe": probe, "build": build, "placeholder": placeholder, "bench": bench}
    if args.command not in commands:
        parser.error("a command is required")
    try:
        result = commands[args.command](args)
    except Failure as exc:
        print(json.dumps({"failed": True, "msg": str(exc)}))
        return 1
    print(json.dumps(result, sort_keys=True))
    return 0


if __name__ == "__main__":
    sys.exit(main())
