"""Time resizes with the PIL of an interpreter (what the pillow_simd role's verify measures).

  pillow_simd_bench.py --python P [--seconds S]

Runs after pillow_simd_common.py (see there how).
"""

import argparse
import sys

from pillow_simd_common import main, runtime_info


def bench(args):
    return runtime_info(args.python, args.seconds)


def parser():
    p = argparse.ArgumentParser(description=__doc__)
    p.add_argument("--python", required=True)
    p.add_argument("--seconds", type=float, default=1.0)
    return p


if __name__ == "__main__":
    sys.exit(main(parser(), bench))
