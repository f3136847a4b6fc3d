"""Write the pillow_simd role's placeholder `pillow` wheel to --out.

  pillow_simd_placeholder.py --version X --out DIR

Runs after pillow_simd_common.py (see there how).
"""

import argparse
import os
import sys
import zipfile

from pillow_simd_common import PLACEHOLDER_LOCAL, file_sha256, main, record_hash


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


def parser():
    p = argparse.ArgumentParser(description=__doc__)
    p.add_argument("--version", required=True)
    p.add_argument("--out", required=True)
    return p


if __name__ == "__main__":
    sys.exit(main(parser(), placeholder))
