"""What a .vmfb holds, and `mmaflow verify`: is a .vmfb built with the stock route mmaflow's?

A .vmfb is a zip archive: ``module.fb`` (the VM module) and one flatbuffer per executable format
(``*_cuda_nvptx_fb.fb``: the PTX as a string; ``*_rocm_hsaco_fb.fb``: the HSACO, an ELF).

``iree-compile $(mmaflow flags ...)`` cannot check the final ISA of the kernels it builds: the hook
runs before IREE lowers them. ``mmaflow verify OUT.vmfb --source IN.mlir --target T`` does, after
the fact, two things:

1. it builds IN.mlir in-process as ``mmaflow compile`` does -- which checks every taken kernel's
   ISA (verify.check_isa) -- and requires every executable of OUT.vmfb to be byte-identical to
   the one it built (the two routes share one code path: same input and flags, same bytes);
2. on NVIDIA it also reads the PTX out of OUT.vmfb itself and checks each taken kernel in it,
   so that the verdict on the user's file does not rest on the rebuild alone.
"""

from __future__ import annotations

import io
import struct
import zipfile
from dataclasses import dataclass

from mmaflow.compiler.core.errors import InputError, VerificationError


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


def verify_command(args, source: str) -> int:
    import sys
    from pathlib import Path

    from mmaflow.compiler.driver.bridge import check_launch_shared, compile_module, find_kernel
    from mmaflow.compiler.pipeline.results import CodegenOptions
    from mmaflow.compiler.target.isa import join_kernels, parse_ptx
    from mmaflow.compiler.target.targets import get_target
    from mmaflow.compiler.verify import check_kernel, verified

    target = get_target(args.target)
    path = Path(args.vmfb)
    if not path.is_file():
        raise InputError(f"no such .vmfb: {args.vmfb}")
    user = path.read_bytes()
    archs = built_archs(user)
    if archs and target.iree_arch not in archs:  # built for another GPU: say which, before building anything
        from mmaflow.compiler.target.targets import TARGETS

        names = sorted({next((t.name for t in TARGETS.values() if t.iree_arch == a), a) for a in archs})
        raise VerificationError(
            f"{args.vmfb} was built for {', '.join(names)}, not {target.name}",
            hint=f"verify it with --target {names[0]}, or build it for {target.name}",
        )
    res = compile_module(
        source,
        target.name,
        source_name=args.source,
        extra_flags=args.iree_flag or [],
        options=CodegenOptions(target=target.name),
    )
    problems = compare(user, res.vmfb)
    if problems:
        raise VerificationError(
            f"{args.vmfb} is not what mmaflow builds from {args.source} for {target.name}: " + "; ".join(problems),
            hint="build and verify with the same iree-compile flags (pass yours to verify with --iree-flag)",
        )
    ptx = None
    if target.vendor.isa == "ptx":  # one PTX module per linked executable (a cluster kernel's variant links apart)
        ptx = [ptx_text(blob) for blob in executables(user).values()]

    def user_ptx(exe):
        """(report, text) of ``exe``'s kernels in the user's own PTX (its own kernel's report; the text
        each version's too, ``isa.join_kernels``), None on AMD (the bytes are compared)."""
        if ptx is None:
            return None
        texts = []
        for kernel in exe.kernels():
            found = find_kernel(ptx, kernel, target)
            if len(found) != 1:
                raise VerificationError(f"{exe.name}: its kernel {kernel} is not in the PTX of {args.vmfb}")
            texts.append(found[0])
        joined = join_kernels(texts[0], dict(zip(exe.kernels()[1:], texts[1:])), "ptx")
        return parse_ptx(texts[0], exe.kernel, target), joined

    if ptx is not None:  # the shared memory the file's runtime will launch each kernel with
        check_launch_shared(export_shared_bytes(user), res.taken, target)
    for exe in res.taken:
        own = user_ptx(exe)  # the user's own PTX, checked directly
        if own is not None:
            check_kernel(*own, exe.name, exe.facts)
        line = verified(res.reports[exe.name], exe.facts)
        print(f"mmaflow: verified {exe.name} in {path.name}: {line}", file=sys.stderr)
    left = [e.name for e in res.executables if not e.taken]
    from mmaflow.compiler.core.errors import plural

    print(
        f"mmaflow verify: {path.name} holds mmaflow's verified kernels for {plural(len(res.taken), 'dispatch')} "
        f"(byte-identical executables{', PTX checked in the file' if ptx is not None else ''}); "
        f"{len(left)} left to IREE"
    )
    return 0
