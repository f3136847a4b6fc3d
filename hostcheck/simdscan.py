"""Whether machine code uses AVX2: integer instructions on 256-bit (ymm) registers.

AVX (AVX1) has only floating-point operations on ymm registers; integer operations on
ymm (vpmaddwd, vpshufb, vpaddd, vpermd, vpbroadcastd ...) arrived with AVX2. A build
compiled with -mavx2 (Pillow-SIMD's resize and convert paths) is full of them; a generic
x86-64 build (stock Pillow wheels) has none.

Two ways to count them, both pure functions:
- `count_objdump(text)`: the output of `objdump -d` (AT&T syntax, as objdump prints by
  default), counting AVX2-or-newer mnemonics whose operands name a ymm register;
- `scan_vex(code)`: the raw bytes of the executable ELF sections (`elf_code(data)`),
  counting VEX-encoded instructions with VEX.L=1 whose opcode is one of AVX2's integer
  operations. This linear byte scan does not disassemble, so a few bytes of other
  instructions can look like one (a handful per megabyte in generic code); compiled
  AVX2 code gives hundreds to thousands.
"""

from __future__ import annotations

import re
import struct
from collections import Counter
from dataclasses import dataclass
from typing import NamedTuple

# Mnemonics starting with "vp" that AVX1 already had for ymm (they are not integer ops).
_AVX1_VP = ("vperm2f128", "vpermilps", "vpermilpd", "vptest")
# AVX2 instructions on ymm whose mnemonic does not start with "vp".
_AVX2_OTHER = frozenset(
    {
        "vinserti128",
        "vextracti128",
        "vbroadcasti128",
        "vmovntdqa",
        "vmpsadbw",
        "vgatherdps",
        "vgatherdpd",
        "vgatherqps",
        "vgatherqpd",
    }
)
_OBJDUMP_LINE = re.compile(
    r"^\s*[0-9a-f]+:\s+(?:\{[a-z]+\}\s+)?([a-z][a-z0-9]*)\s+(\S.*)?$", re.IGNORECASE
)


def is_avx2_ymm(mnemonic: str, operands: str) -> bool:
    """An AVX2-or-newer integer instruction on a ymm register (AT&T or Intel syntax)."""
    if "ymm" not in operands.lower():
        return False
    name = mnemonic.lower()
    if name.startswith(_AVX1_VP):
        return False
    return name.startswith("vp") or name in _AVX2_OTHER


def count_objdump(text: str) -> Counter:
    """Mnemonic -> count of AVX2 ymm integer instructions in `objdump -d` output."""
    found: Counter = Counter()
    for line in text.splitlines():
        match = _OBJDUMP_LINE.match(line)
        if match and is_avx2_ymm(match.group(1), match.group(2) or ""):
            found[match.group(1).lower()] += 1
    return found


# --- ELF ------------------------------------------------------------------------------

EM_X86_64 = 62
_SHT_NOBITS = 8
_SHF_EXECINSTR = 0x4


class ElfError(ValueError):
    """Not an ELF file this module can read."""


@dataclass(frozen=True)
class ElfCode:
    machine: int  # e_machine: 62 is x86-64
    sections: tuple[tuple[str, int, int], ...]  # executable sections: (name, offset, size)

    def code(self, data: bytes) -> bytes:
        return b"".join(data[offset : offset + size] for _, offset, size in self.sections)


def elf_code(data: bytes) -> ElfCode:
    """The executable sections of a 64-bit little-endian ELF file, from its section headers."""
    if len(data) < 64 or data[:4] != b"\x7fELF":
        raise ElfError("not an ELF file")
    if data[4] != 2 or data[5] != 1:
        raise ElfError("not a 64-bit little-endian ELF file")
    machine = struct.unpack_from("<H", data, 0x12)[0]
    shoff = struct.unpack_from("<Q", data, 0x28)[0]
    shentsize, shnum, shstrndx = struct.unpack_from("<HHH", data, 0x3A)
    if shoff == 0 or shnum == 0:
        raise ElfError("ELF file without section headers")
    if shentsize < 64 or shoff + shnum * shentsize > len(data):
        raise ElfError("ELF section header table outside the file")
    headers = []
    for index in range(shnum):
        name, kind, flags, _addr, offset, size = struct.unpack_from(
            "<IIQQQQ", data, shoff + index * shentsize
        )
        headers.append((name, kind, flags, offset, size))
    names = b""
    if shstrndx < shnum:
        _, _, _, str_offset, str_size = headers[shstrndx]
        names = data[str_offset : str_offset + str_size]
    sections = []
    for name, kind, flags, offset, size in headers:
        if not flags & _SHF_EXECINSTR or kind == _SHT_NOBITS:
            continue
        if offset + size > len(data):
            raise ElfError("ELF section outside the file")
        end = names.find(b"\0", name)
        label = names[name : end if end >= 0 else len(names)].decode("ascii", "replace")
        sections.append((label or "?", offset, size))
    return ElfCode(machine=machine, sections=tuple(sections))


# --- VEX byte scan ----------------------------------------------------------------------


class VexOp(NamedTuple):
    name: str  # mnemonic (a family name where ModRM.reg or VEX.W picks the member)
    uses_vvvv: bool  # False: VEX.vvvv must be 1111b
    w: int | None  # the VEX.W the instruction requires, None if either
    modrm: str | None  # "reg": register operand only (mod 11); "mem": memory only


def _table() -> dict[tuple[int, int, int], VexOp]:
    """(map, pp, opcode) -> VexOp for every AVX2 instruction on 256-bit integer vectors.
    map: 1 = 0F, 2 = 0F38, 3 = 0F3A; pp: 1 = 66 (all of them but vpshufhw/vpshuflw)."""
    table: dict[tuple[int, int, int], VexOp] = {}

    def add(mapping: int, pp: int, opcode: int, name: str, vvvv=True, w=None, modrm=None):
        table[(mapping, pp, opcode)] = VexOp(name, vvvv, w, modrm)

    two_operand_0f = {
        0x60: "vpunpcklbw", 0x61: "vpunpcklwd", 0x62: "vpunpckldq", 0x63: "vpacksswb",
        0x64: "vpcmpgtb", 0x65: "vpcmpgtw", 0x66: "vpcmpgtd", 0x67: "vpackuswb",
        0x68: "vpunpckhbw", 0x69: "vpunpckhwd", 0x6A: "vpunpckhdq", 0x6B: "vpackssdw",
        0x6C: "vpunpcklqdq", 0x6D: "vpunpckhqdq", 0x74: "vpcmpeqb", 0x75: "vpcmpeqw",
        0x76: "vpcmpeqd", 0xD1: "vpsrlw", 0xD2: "vpsrld", 0xD3: "vpsrlq", 0xD4: "vpaddq",
        0xD5: "vpmullw", 0xD8: "vpsubusb", 0xD9: "vpsubusw", 0xDA: "vpminub", 0xDB: "vpand",
        0xDC: "vpaddusb", 0xDD: "vpaddusw", 0xDE: "vpmaxub", 0xDF: "vpandn", 0xE0: "vpavgb",
        0xE1: "vpsraw", 0xE2: "vpsrad", 0xE3: "vpavgw", 0xE4: "vpmulhuw", 0xE5: "vpmulhw",
        0xE8: "vpsubsb", 0xE9: "vpsubsw", 0xEA: "vpminsw", 0xEB: "vpor", 0xEC: "vpaddsb",
        0xED: "vpaddsw", 0xEE: "vpmaxsw", 0xEF: "vpxor", 0xF1: "vpsllw", 0xF2: "vpslld",
        0xF3: "vpsllq", 0xF4: "vpmuludq", 0xF5: "vpmaddwd", 0xF6: "vpsadbw", 0xF8: "vpsubb",
        0xF9: "vpsubw", 0xFA: "vpsubd", 0xFB: "vpsubq", 0xFC: "vpaddb", 0xFD: "vpaddw",
        0xFE: "vpaddd",
    }  # fmt: skip
    for opcode, name in two_operand_0f.items():
        add(1, 1, opcode, name)
    add(1, 1, 0x70, "vpshufd", vvvv=False)
    add(1, 2, 0x70, "vpshufhw", vvvv=False)
    add(1, 3, 0x70, "vpshuflw", vvvv=False)
    for opcode in (0x71, 0x72, 0x73):  # shift by immediate: vvvv is the destination
        add(1, 1, opcode, f"vpshift-imm-{opcode:02x}", modrm="reg")
    add(1, 1, 0xD7, "vpmovmskb", vvvv=False, modrm="reg")

    three_operand_0f38 = {
        0x00: "vpshufb", 0x01: "vphaddw", 0x02: "vphaddd", 0x03: "vphaddsw",
        0x04: "vpmaddubsw", 0x05: "vphsubw", 0x06: "vphsubd", 0x07: "vphsubsw",
        0x08: "vpsignb", 0x09: "vpsignw", 0x0A: "vpsignd", 0x0B: "vpmulhrsw",
        0x28: "vpmuldq", 0x29: "vpcmpeqq", 0x2B: "vpackusdw", 0x37: "vpcmpgtq",
        0x38: "vpminsb", 0x39: "vpminsd", 0x3A: "vpminuw", 0x3B: "vpminud", 0x3C: "vpmaxsb",
        0x3D: "vpmaxsd", 0x3E: "vpmaxuw", 0x3F: "vpmaxud", 0x40: "vpmulld", 0x45: "vpsrlv",
        0x47: "vpsllv",
    }  # fmt: skip
    for opcode, name in three_operand_0f38.items():
        add(2, 1, opcode, name)
    add(2, 1, 0x16, "vpermps", w=0)
    add(2, 1, 0x36, "vpermd", w=0)
    add(2, 1, 0x46, "vpsravd", w=0)
    add(2, 1, 0x8C, "vpmaskmov", modrm="mem")
    add(2, 1, 0x8E, "vpmaskmov", modrm="mem")
    for opcode in (0x90, 0x91, 0x92, 0x93):
        add(2, 1, opcode, "vgather", modrm="mem")
    one_operand_0f38 = {
        0x1C: "vpabsb", 0x1D: "vpabsw", 0x1E: "vpabsd", 0x20: "vpmovsxbw", 0x21: "vpmovsxbd",
        0x22: "vpmovsxbq", 0x23: "vpmovsxwd", 0x24: "vpmovsxwq", 0x25: "vpmovsxdq",
        0x30: "vpmovzxbw", 0x31: "vpmovzxbd", 0x32: "vpmovzxbq", 0x33: "vpmovzxwd",
        0x34: "vpmovzxwq", 0x35: "vpmovzxdq",
    }  # fmt: skip
    for opcode, name in one_operand_0f38.items():
        add(2, 1, opcode, name, vvvv=False)
    add(2, 1, 0x2A, "vmovntdqa", vvvv=False, modrm="mem")
    for opcode, name in ((0x58, "vpbroadcastd"), (0x59, "vpbroadcastq"),
                         (0x78, "vpbroadcastb"), (0x79, "vpbroadcastw")):  # fmt: skip
        add(2, 1, opcode, name, vvvv=False, w=0)
    add(2, 1, 0x5A, "vbroadcasti128", vvvv=False, w=0, modrm="mem")

    add(3, 1, 0x00, "vpermq", vvvv=False, w=1)
    add(3, 1, 0x01, "vpermpd", vvvv=False, w=1)
    add(3, 1, 0x02, "vpblendd", w=0)
    add(3, 1, 0x0E, "vpblendw")
    add(3, 1, 0x0F, "vpalignr")
    add(3, 1, 0x38, "vinserti128", w=0)
    add(3, 1, 0x39, "vextracti128", vvvv=False, w=0)
    add(3, 1, 0x42, "vmpsadbw")
    add(3, 1, 0x46, "vperm2i128", w=0)
    add(3, 1, 0x4C, "vpblendvb", w=0)
    return table


AVX2_VEX_256 = _table()
# Valid ModRM.reg values of the shift-by-immediate groups (71: psrlw/psraw/psllw ...).
_SHIFT_GROUPS = {0x71: {2, 4, 6}, 0x72: {2, 4, 6}, 0x73: {2, 3, 6, 7}}


def _decode_vex(code: bytes, i: int) -> str | None:
    """The AVX2 256-bit mnemonic of a VEX instruction starting at code[i], if it is one."""
    if code[i] == 0xC5:
        if i + 3 >= len(code):
            return None
        payload = code[i + 1]
        mapping, w, opcode, modrm = 1, 0, code[i + 2], code[i + 3]
    else:  # 0xC4
        if i + 4 >= len(code):
            return None
        mapping = code[i + 1] & 0x1F
        if mapping not in (1, 2, 3):
            return None
        payload = code[i + 2]
        w, opcode, modrm = payload >> 7, code[i + 3], code[i + 4]
    if not payload & 0x04:  # VEX.L = 0: a 128-bit (xmm) instruction
        return None
    op = AVX2_VEX_256.get((mapping, payload & 0x03, opcode))
    if op is None:
        return None
    name, uses_vvvv, want_w, rule = op
    if not uses_vvvv and (payload >> 3) & 0x0F != 0x0F:  # unused vvvv must be 1111b
        return None
    if want_w is not None and w != want_w:
        return None
    is_reg = modrm >> 6 == 3
    if (rule == "reg" and not is_reg) or (rule == "mem" and is_reg):
        return None
    if opcode in _SHIFT_GROUPS and mapping == 1 and (modrm >> 3) & 7 not in _SHIFT_GROUPS[opcode]:
        return None
    return name


def scan_vex(code: bytes) -> Counter:
    """Mnemonic -> count of byte positions that decode as an AVX2 256-bit integer
    instruction (a linear scan, see the module docstring)."""
    found: Counter = Counter()
    for prefix in (0xC4, 0xC5):
        start = code.find(prefix)
        while start >= 0:
            name = _decode_vex(code, start)
            if name is not None:
                found[name] += 1
            start = code.find(prefix, start + 1)
    return found
