"""What a .vmfb holds: its executables, a CUDA executable's PTX and exports, the GPUs it was built for.

A .vmfb is a zip archive: ``module.fb`` (the VM module) and one file per executable
(``*_cuda_nvptx_fb.fb``: a header, then IREE's CUDA ``ExecutableDef`` flatbuffer holding the PTX
and each export's launch parameters; ``*_rocm_hsaco_fb.fb``: the HSACO, an ELF). `mmaflow verify`
(``verify_file.py``) and the compile's launch check (``bridge.check_launch_shared``) read it here.
"""

from __future__ import annotations

import io
import struct
import zipfile
from dataclasses import dataclass

from mmaflow.compiler.core.errors import InputError


def executables(vmfb: bytes) -> dict[str, bytes]:
    """Executable flatbuffers of a .vmfb, by archive entry name."""
    try:
        archive = zipfile.ZipFile(io.BytesIO(vmfb))
    except zipfile.BadZipFile:
        raise InputError("not a .vmfb (IREE's zip archive of flatbuffers)") from None
    names = [n for n in archive.namelist() if n.endswith(".fb") and n != "module.fb"]
    if "module.fb" not in archive.namelist():
        raise InputError("not a .vmfb: no module.fb in the archive")
    return {n: archive.read(n) for n in names}


def ptx_text(blob: bytes) -> str:
    """The PTX of a CUDA executable flatbuffer: a length-prefixed, NUL-terminated string holding
    ``.version`` and ``.target`` (the prefix is checked against the string found)."""
    at = blob.find(b".version ")
    if at < 0:
        raise InputError("the CUDA executable holds no PTX")
    end = blob.find(b"\x00", at)
    start = at
    while start > 4 and (blob[start - 1] in (9, 10) or 32 <= blob[start - 1] < 127):
        start -= 1
    for s in range(start, at + 1):  # the string starts where its length prefix says it ends
        if s >= 4 and struct.unpack_from("<I", blob, s - 4)[0] == end - s:
            return blob[s:end].decode()
    raise InputError("the CUDA executable's PTX string has no valid length prefix")


@dataclass(frozen=True)
class CudaExport:
    """One export of a CUDA executable, as the runtime launches it."""

    kernel: str
    block: tuple[int, int, int]
    shared_bytes: int  # the dynamic shared memory each workgroup launches with


def cuda_exports(blob: bytes) -> list[CudaExport]:
    """The exports of a CUDA executable (``*_cuda_nvptx_fb.fb``): a 64-byte header (``CDA1``, version
    0, at byte 8 the content's length) before the content, IREE's ``ExecutableDef`` flatbuffer
    (identifier ``CDA1``; field 0: its exports; an ``ExportDef``'s fields: module ordinal, kernel
    name, block dims, block shared memory size -- iree/schemas/cuda_executable_def.fbs). Every
    offset is checked against the content: bytes that are not such an executable are an InputError."""
    try:
        if len(blob) < 64 or blob[:4] != b"CDA1" or struct.unpack_from("<I", blob, 4)[0] != 0:
            raise ValueError("no CDA1 header")
        (length,) = struct.unpack_from("<Q", blob, 8)
        if not 8 <= length <= len(blob) - 64:
            raise ValueError(f"content length {length} past the {len(blob)} bytes")
        fb = blob[64 : 64 + length]
        if fb[4:8] != b"CDA1":
            raise ValueError("no CDA1 flatbuffer")

        def at(off: int, size: int) -> int:
            if off < 0 or off + size > len(fb):
                raise ValueError(f"offset {off} out of the {len(fb)}-byte flatbuffer")
            return off

        def u32(off: int) -> int:
            return struct.unpack_from("<I", fb, at(off, 4))[0]

        def fields(table: int) -> list[int]:  # each field's position in the table (None: absent)
            vtable = at(table - struct.unpack_from("<i", fb, at(table, 4))[0], 4)
            size = struct.unpack_from("<H", fb, vtable)[0]
            at(vtable, size)
            offsets = [struct.unpack_from("<H", fb, vtable + 4 + 2 * i)[0] for i in range((size - 4) // 2)]
            return [table + o if o else None for o in offsets] + [None] * 4

        def follow(field: int | None) -> int:  # a field's uoffset to a table, vector or string
            if field is None:
                raise ValueError("a required field is absent")
            return field + u32(field)

        root = u32(0)
        exports = follow(fields(root)[0])
        out = []
        for i in range(u32(exports)):
            table = follow(exports + 4 + 4 * i)
            f = fields(table)
            name = follow(f[1])
            size = u32(name)
            if fb[at(name + 4, size + 1) + size] != 0:
                raise ValueError("a kernel name without its NUL")
            block = struct.unpack_from("<III", fb, at(f[2], 12)) if f[2] is not None else (1, 1, 1)
            shared = u32(f[3]) if f[3] is not None else 0
            out.append(CudaExport(fb[name + 4 : name + 4 + size].decode(), block, shared))
        return out
    except (ValueError, struct.error) as e:
        raise InputError(f"not a CUDA executable IREE 3.13 writes ({e})") from None


def export_shared_bytes(vmfb: bytes) -> dict[str, int]:
    """Each CUDA kernel of a .vmfb: the shared memory the runtime launches it with."""
    return {e.kernel: e.shared_bytes for n, b in executables(vmfb).items() if "_cuda_" in n for e in cuda_exports(b)}


def built_archs(vmfb: bytes) -> set[str]:
    """The GPU architectures a .vmfb's executables were built for, read from them: the ``.target``
    of a CUDA executable's PTX (``sm_80``), the ``amdhsa.target`` of a ROCm executable's HSACO
    (``...-amdhsa-unknown-gfx942``). Executables of other formats add nothing."""
    import re

    archs = set()
    for name, blob in executables(vmfb).items():
        if "_cuda_" in name:
            m = re.search(r"^\s*\.target\s+(sm_\w+)", ptx_text(blob), re.M)
            archs |= {m.group(1)} if m else set()
        else:
            archs |= {a.decode() for a in re.findall(rb"amdhsa-[a-z]*-?(gfx[0-9a-f]+)", blob)}
    return archs


def compare(user: bytes, ours: bytes) -> list[str]:
    """Executables that differ between two .vmfb files (empty: identical)."""
    a, b = executables(user), executables(ours)
    problems = [f"{n}: only in the built file" for n in sorted(set(a) - set(b))]
    problems += [f"{n}: missing from the built file" for n in sorted(set(b) - set(a))]
    problems += [
        f"{n}: differs ({len(a[n])} bytes in the file, {len(b[n])} as mmaflow builds it)"
        for n in sorted(set(a) & set(b))
        if a[n] != b[n]
    ]
    return problems
