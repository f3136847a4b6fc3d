"""Look at a venv for the pillow_simd role: what provisioning checks ("drift" lists what
differs, "provisioned" is true when nothing does) and, with --runtime, what verify reads.

  pillow_simd_probe.py --venv V --version X --avx2 yes|no --os-key K --packages-hash H
      [--package-manager M --packages P... --constraints-text T]
      [--runtime [--bench-seconds S] [--recount] [--hostcheck]]

Runs after pillow_simd_common.py (see there how).
"""

import argparse
import configparser
import csv
import io
import json
import os
import re
import shutil
import stat
import sys

from pillow_simd_common import (
    IMAGING,
    PLACEHOLDER_LOCAL,
    Failure,
    file_sha256,
    main,
    objdump_count,
    read_text,
    record_hash,
    run,
    runtime_info,
)


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


def parser():
    p = argparse.ArgumentParser(description=__doc__)
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
    return p


if __name__ == "__main__":
    sys.exit(main(parser(), probe))
