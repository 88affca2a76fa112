"""The kernels a CUDA library's own device code defines, read from the library as data.

A library built by nvcc carries its device code in the `.nv_fatbin` section: fat binaries, each
a list of entries, of which the ELF ones (cubins, one per architecture) hold a symbol table
where every kernel is a function symbol marked as an entry point (STO_CUDA_ENTRY). Their names
are mangled exactly as CUPTI names a kernel it saw run, extern "C" kernels included.

Why these and not the names the host code registers (course/kernel_names.py reads those from
`.rodata`): any string constant lands in `.rodata`, so a library could name there a kernel of
PyTorch's it never compiled; an entry in a cubin is a kernel compiled into the library. What
neither can tell apart is a kernel compiled under the very name of one that another library
launches (docs/security.md). A compressed entry cannot be read here: `library_entries` says so,
and the caller falls back to the registered names.
"""

from __future__ import annotations

import struct

from course.kernel_names import elf_sections

FATBIN_MAGIC = 0xBA55ED50
_ELF_ENTRY = 2  # an entry's kind: 1 PTX, 2 ELF
_STT_FUNC, _STO_CUDA_ENTRY = 2, 0x10


def _fatbin_entries(section: bytes):
    """(kind, payload) of every entry of the fat binaries laid end to end in `section`."""
    at = 0
    while at + 16 <= len(section):
        magic, _, header, size = struct.unpack_from("<IHHQ", section, at)
        if magic != FATBIN_MAGIC or header < 16:
            return
        entry, end = at + header, min(at + header + size, len(section))
        while entry + 16 <= end:
            kind, _, entry_header, payload = struct.unpack_from("<HHIQ", section, entry)
            if entry_header < 16:
                return
            yield kind, section[entry + entry_header : entry + entry_header + payload]
            entry += entry_header + payload
        at = (end + 7) & ~7  # each fat binary starts 8-aligned


def cubin_entries(cubin: bytes) -> set[str]:
    """The kernels (entry functions) of one cubin."""
    sections = elf_sections(cubin)
    symbols, names = sections.get(".symtab", b""), sections.get(".strtab", b"")
    found = set()
    for at in range(0, len(symbols) - 23, 24):
        name, info, other, _, _, _ = struct.unpack_from("<IBBHQQ", symbols, at)
        if info & 0xF == _STT_FUNC and other & _STO_CUDA_ENTRY:
            found.add(names[name : names.find(b"\0", name)].decode("ascii", "replace"))
    found.discard("")
    return found


def library_entries(path: str) -> tuple[set[str], int]:
    """(the mangled names of the kernels in the library's cubins, how many ELF entries could not
    be read: compressed ones)."""
    with open(path, "rb") as handle:
        data = handle.read()
    found, unreadable = set(), 0
    for kind, payload in _fatbin_entries(elf_sections(data).get(".nv_fatbin", b"")):
        if kind != _ELF_ENTRY:
            continue
        if payload[:4] != b"\x7fELF":
            unreadable += 1
            continue
        found |= cubin_entries(payload)
    return found, unreadable
