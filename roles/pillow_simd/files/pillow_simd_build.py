"""Build a pillow-simd wheel for the pillow_simd role in the venv's interpreter, prove its AVX2
choice with objdump, and keep it with its build record (the .json beside it) in --out.

  pillow_simd_build.py --venv V --version X --avx2 yes|no --out DIR --key K [--min-avx2 N]

Runs after pillow_simd_common.py (see there how).
"""

import argparse
import json
import os
import shutil
import socket
import sys
import tempfile
import time
import zipfile

from pillow_simd_common import (
    IMAGING,
    Failure,
    file_sha256,
    main,
    objdump_count,
    record_hash,
    run,
)


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


def parser():
    p = argparse.ArgumentParser(description=__doc__)
    p.add_argument("--venv", required=True)
    p.add_argument("--version", required=True)
    p.add_argument("--avx2", choices=("yes", "no"), required=True)
    p.add_argument("--out", required=True)
    p.add_argument("--key", required=True)
    p.add_argument("--min-avx2", type=int, default=100)
    p.add_argument("--timeout", type=float, default=3600)
    return p


if __name__ == "__main__":
    sys.exit(main(parser(), build))
