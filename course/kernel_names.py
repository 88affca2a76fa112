"""Which GPU kernels a submission defines, read from its files as data (never loaded), and
what the profiler's name of a kernel says about whose it is.

"Your own kernel ran" means a kernel the submission's own files define: a CUDA library
registers each of its kernels with the runtime under its mangled name, a string in the
library's read-only data; a Triton kernel is a function decorated with `triton.jit`. The
profiler names kernels demangled ("void (anonymous namespace)::relu_bias_kernel<float>(...)"),
so both sides are compared by the kernel's own identifier.
"""

from __future__ import annotations

import ast
import os
import re
import stat
import struct

_MANGLED = re.compile(rb"_Z[A-Za-z0-9_]+")
MAX_FILE_BYTES = 256 << 20  # a file past this defines no kernel: it is not read
_TRANSFERS = ("Memcpy", "Memset")  # how the profiler names copies and fills the driver does


def elf_sections(data: bytes) -> dict[str, bytes]:
    """{section name: its bytes} of a 64-bit little-endian ELF file (a library, a cubin); {}
    for anything else, or where its headers point outside it."""
    if len(data) < 64 or data[:4] != b"\x7fELF" or data[4] != 2 or data[5] != 1:
        return {}
    (table,) = struct.unpack_from("<Q", data, 0x28)
    entry_size, count, names_index = struct.unpack_from("<HHH", data, 0x3A)
    headers = []
    for index in range(count):
        start = table + index * entry_size
        if entry_size < 64 or start + 64 > len(data):
            return {}
        name, _, _, _, offset, size = struct.unpack_from("<IIQQQQ", data, start)
        headers.append((name, offset, size))
    if names_index >= len(headers):
        return {}
    names = data[headers[names_index][1] : headers[names_index][1] + headers[names_index][2]]
    return {
        names[name : names.find(b"\0", name)].decode("ascii", "replace"): data[offset : offset + size]
        for name, offset, size in headers
    }


def mangled_identifier(mangled: str) -> str:
    """The unqualified name of an Itanium-mangled function: _ZN2ns6kernelIfEEvPT_ -> 'kernel'.
    Reads only the name's parts (<length><identifier>...), up to its template arguments."""
    at = 2
    while at < len(mangled) and mangled[at] in "NLrVK":  # nested, internal linkage, cv-qualifiers
        at += 1
    last = ""
    while at < len(mangled) and mangled[at].isdigit():
        digits = re.match(r"\d+", mangled[at:]).group()
        at += len(digits)
        last = mangled[at : at + int(digits)]
        at += int(digits)
    return last


def library_kernels(path: str) -> set[str]:
    """The identifiers of the kernels a CUDA library registers: the mangled names in its
    read-only data. (A kernel declared extern "C" has no mangled name and is not found.)"""
    with open(path, "rb") as handle:
        data = handle.read()
    found = set()
    for name, contents in elf_sections(data).items():
        if name.startswith(".rodata"):
            found.update(mangled_identifier(m.decode("ascii")) for m in _MANGLED.findall(contents))
    found.discard("")
    return found


def triton_kernels(path: str) -> set[str]:
    """The functions of a Python file decorated with triton.jit (or any decorator named *jit)."""
    with open(path, encoding="utf-8", errors="replace") as handle:
        try:
            tree = ast.parse(handle.read())
        except SyntaxError:
            return set()
    found = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.FunctionDef):
            for decorator in node.decorator_list:
                target = decorator.func if isinstance(decorator, ast.Call) else decorator
                if ast.unparse(target).split(".")[-1] == "jit":
                    found.add(node.name)
    return found


def plain_file(path: str) -> bool:
    """A regular file, not a link, of a size worth reading: the submission made these files."""
    try:
        status = os.lstat(path)
    except OSError:
        return False
    return stat.S_ISREG(status.st_mode) and status.st_size <= MAX_FILE_BYTES


def defined_kernels(paths: list[str]) -> frozenset[str]:
    """The identifiers of the kernels that the libraries (.so) and Python files among `paths`
    define. A file that cannot be read or parsed defines none."""
    found: set[str] = set()
    for path in paths:
        if not plain_file(path):
            continue
        try:
            if path.endswith(".so"):
                found |= library_kernels(path)
            elif path.endswith(".py"):
                found |= triton_kernels(path)
        except (OSError, ValueError, struct.error, RecursionError, MemoryError):
            continue
    return frozenset(found)


def submission_files(library: str, prefix: str, source_dir: str) -> list[str]:
    """A built submission's files that may define kernels: its jit library, the libraries its
    wheel installed under `prefix`, and its Python sources."""
    paths = [library] if library else []
    for root in filter(None, (prefix, source_dir)):
        for folder, _, names in os.walk(root):
            paths += [os.path.join(folder, n) for n in sorted(names) if n.endswith((".so", ".py"))]
    return paths


def _qualified_name(kernel: str) -> str:
    """A profiled kernel's name without its parameters, template arguments and anonymous
    namespaces: 'void ns::(anonymous namespace)::scale<float>(float*)' -> 'void ns::::scale'."""
    return kernel.replace("(anonymous namespace)", "").split("(")[0].split("<")[0].strip()


def identifier(kernel: str) -> str:
    """The identifier of a kernel as the profiler names it: 'void ns::(anonymous
    namespace)::scale<float>(float*)' -> 'scale'."""
    name = _qualified_name(kernel)
    return name.split()[-1].split("::")[-1] if name else ""


def is_transfer(kernel: str) -> bool:
    """A copy or fill the driver does (cudaMemcpy, cudaMemset): no kernel's work."""
    return kernel.startswith(_TRANSFERS)


def is_torch_kernel(kernel: str) -> bool:
    """Judged by the kernel's own name, not its parameter types (an accessor is at::...)."""
    name = _qualified_name(kernel)
    return "at::" in name or "cub::" in name or "c10::" in name


def is_torch_copy_or_fill(kernel: str) -> bool:
    """One of PyTorch's kernels that only copy or fill (a .contiguous(), a zeros): allowed
    beside a student's own kernel, unlike its compute kernels."""
    return is_torch_kernel(kernel) and ("copy" in kernel or "Fill" in kernel or "fill" in kernel)
