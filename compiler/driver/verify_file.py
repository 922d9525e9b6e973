"""`mmaflow verify`: is a .vmfb built with the stock route mmaflow's?

``iree-compile $(mmaflow flags ...)`` cannot check the final ISA of the kernels it builds: the hook
runs before IREE lowers them. ``mmaflow verify OUT.vmfb --source IN.mlir --target T`` does, after
the fact, three things:

1. it builds IN.mlir in-process as ``mmaflow compile`` does -- which checks every taken kernel's
   ISA (verify.check_isa) -- and requires every executable of OUT.vmfb to be byte-identical to
   the one it built (the two routes share one code path: same input and flags, same bytes);
2. on NVIDIA it also reads the PTX out of OUT.vmfb itself and checks each taken kernel in it,
   so that the verdict on the user's file does not rest on the rebuild alone;
3. on NVIDIA, the shared memory OUT.vmfb's exports launch each taken kernel with fits a workgroup's.
"""

from __future__ import annotations

import sys
from pathlib import Path

from mmaflow.compiler.core.errors import InputError, VerificationError, plural
from mmaflow.compiler.driver.bridge import check_launch_shared, compile_module, find_kernel
from mmaflow.compiler.driver.vmfb import built_archs, compare, executables, export_shared_bytes, ptx_text
from mmaflow.compiler.pipeline.results import CodegenOptions
from mmaflow.compiler.target.isa import join_kernels, parse_ptx
from mmaflow.compiler.target.targets import TARGETS, get_target
from mmaflow.compiler.verify import check_kernel, verified


def verify_command(args, source: str) -> int:
    target = get_target(args.target)
    path = Path(args.vmfb)
    if not path.is_file():
        raise InputError(f"no such .vmfb: {args.vmfb}")
    user = path.read_bytes()
    archs = built_archs(user)
    if archs and target.iree_arch not in archs:  # built for another GPU: say which, before building anything
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
    print(
        f"mmaflow verify: {path.name} holds mmaflow's verified kernels for {plural(len(res.taken), 'dispatch')} "
        f"(byte-identical executables{', PTX checked in the file' if ptx is not None else ''}); "
        f"{len(left)} left to IREE"
    )
    return 0
