"""Whether machine code uses AVX2: integer instructions on 256-bit (ymm) registers.

AVX (AVX1) has only floating-point operations on ymm registers; integer operations on
ymm (vpmaddwd, vpshufb, vpaddd, vpermd, vpbroadcastd ...) arrived with AVX2. A build
compiled with -mavx2 (Pillow-SIMD's resize and convert paths) is full of them; a generic
x86-64 build (stock Pillow wheels) has none.

They are counted one way on every host: pyelftools finds the executable sections of the
ELF file and the capstone disassembler decodes them (bytes it cannot decode, such as data
between functions, are stepped over), so the same binary gives the same count wherever it
is checked. Both libraries are hostcheck's dependencies.
"""

from __future__ import annotations

import io
from collections import Counter
from dataclasses import dataclass

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
X86_64 = "EM_X86_64"


def is_avx2_ymm(mnemonic: str, operands: str) -> bool:
    """An AVX2-or-newer integer instruction on a ymm register."""
    if "ymm" not in operands.lower():
        return False
    name = mnemonic.lower()
    if name.startswith(_AVX1_VP):
        return False
    return name.startswith("vp") or name in _AVX2_OTHER


class ElfError(ValueError):
    """Not an ELF file that can be read."""


class MissingLibrary(RuntimeError):
    """capstone or pyelftools is not installed."""


@dataclass(frozen=True)
class ElfCode:
    machine: str  # e_machine as pyelftools names it: EM_X86_64, EM_AARCH64 ...
    sections: tuple[tuple[str, int, bytes], ...]  # executable sections: (name, address, bytes)

    @property
    def size(self) -> int:
        return sum(len(code) for _, _, code in self.sections)


def elf_code(data: bytes) -> ElfCode:
    """The executable sections of an ELF file."""
    try:
        from elftools.elf.constants import SH_FLAGS
        from elftools.elf.elffile import ELFFile
    except ImportError as exc:
        raise MissingLibrary(f"pyelftools is not installed ({exc})") from None
    if data[:4] != b"\x7fELF":
        raise ElfError("not an ELF file")
    try:
        elf = ELFFile(io.BytesIO(data))
        sections = tuple(
            (section.name or "?", section["sh_addr"], section.data())
            for section in elf.iter_sections()
            if section["sh_flags"] & SH_FLAGS.SHF_EXECINSTR and section["sh_type"] != "SHT_NOBITS"
        )
        machine = str(elf["e_machine"])
    except Exception as exc:  # pyelftools raises many kinds on a damaged file
        raise ElfError(f"unreadable ELF file: {exc or type(exc).__name__}") from None
    return ElfCode(machine=machine, sections=sections)


def count_avx2(code: ElfCode) -> Counter:
    """Mnemonic -> count of AVX2 ymm integer instructions in the executable sections."""
    try:
        import capstone
    except ImportError as exc:
        raise MissingLibrary(f"capstone is not installed ({exc})") from None
    decoder = capstone.Cs(capstone.CS_ARCH_X86, capstone.CS_MODE_64)
    decoder.skipdata = True
    found: Counter = Counter()
    for _, address, data in code.sections:
        for _, _, mnemonic, operands in decoder.disasm_lite(data, address):
            if "ymm" in operands and is_avx2_ymm(mnemonic, operands):
                found[mnemonic] += 1
    return found
