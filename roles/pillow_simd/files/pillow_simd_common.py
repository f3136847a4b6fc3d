"""What the pillow_simd role's host-side scripts share: running a command, the hashes that
wheels and RECORD files use, counting AVX2 instructions in a shared object, and importing PIL in
a venv's interpreter to time resizes. Each script (pillow_simd_probe.py, pillow_simd_build.py,
pillow_simd_placeholder.py, pillow_simd_bench.py) prints one JSON object; exit 1 with
{"msg": ...}.

The role runs a script with the host's python3 (3.6 or newer: RHEL 8 has 3.6) as one program
on standard input, this file first and the script after it (python3 -), so nothing is copied to
the host; the tests run the scripts from this folder. The scripts never import PIL themselves
(a build with -mavx2 on a CPU without AVX2 dies with SIGILL): PIL is imported by the venv's
interpreter in a child process.
"""

import base64
import hashlib
import json
import re
import shutil
import signal
import subprocess
import sys

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
    # per second of this thread's CPU time: what else keeps the host busy does not count
    count, start = 0, time.thread_time()
    while time.thread_time() - start < seconds or count == 0:
        image.resize((224, 224), Image.BICUBIC)
        count += 1
    out["resize_per_s"] = round(count / (time.thread_time() - start), 1)
    out["resize_job"] = "2048x1536 RGB -> 224x224 BICUBIC, one thread, per CPU-second"
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


def main(parser, command):
    """Run `command` on the parsed arguments and print its result as JSON."""
    args = parser.parse_args()
    try:
        result = command(args)
    except Failure as exc:
        print(json.dumps({"failed": True, "msg": str(exc)}))
        return 1
    print(json.dumps(result, sort_keys=True))
    return 0


# Run as one program with a script after it, the script's "from pillow_simd_common import"
# finds these names in this program itself.
sys.modules.setdefault("pillow_simd_common", sys.modules[__name__])
