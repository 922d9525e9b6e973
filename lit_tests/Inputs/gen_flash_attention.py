"""Replace an attention dispatch by mmaflow's flash-attention kernel (mma.sync, MFMA, WMMA) and hand it back.

    iree-compile attn.mlir --compile-to=executable-sources ... -o src.mlir
    python lit_tests/Inputs/gen_flash_attention.py src.mlir [--target sm_80] [--causal] [--stages 1|2]
        [--warpgroups 1|2] > kernel.mlir

The dispatch's one ``iree_linalg_ext.attention`` is replaced by the kernel of
``compiler/kernels/attention/nvidia.py`` (``rewrite_dispatch``: Q, K, V and O at their bindings and byte
offsets), then handed back with ``stages.hand_back.install`` (no_pipeline translation_info,
the constant grid, minctasm, the variant's target), ready for ``iree-compile
--compile-from=executable-sources`` (``lit_tests/isa/flash_attention.test``).
"""

import argparse
from pathlib import Path

from mmaflow.compiler.core.mlir import new_context, ops_named, parse_module
from mmaflow.compiler.kernels.attention.nvidia import rewrite_dispatch
from mmaflow.compiler.pipeline.hand_back import constant_grid, install
from mmaflow.compiler.target.targets import get_target


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("source")
    parser.add_argument("--target", default="sm_80")
    parser.add_argument("--causal", action="store_true")
    parser.add_argument("--stages", type=int, default=None, help="NVIDIA: 2 (default) or 1; AMD: 1")
    parser.add_argument("--warpgroups", type=int, default=None, help="sm_90a's wgmma kernel: 1 or 2")
    args = parser.parse_args()
    ctx = new_context()
    module = parse_module(Path(args.source).read_text(), ctx, source=args.source)
    funcs = [f for f in ops_named(module.operation, "func.func") if ops_named(f, "iree_linalg_ext.attention")]
    (fn,) = funcs
    name = fn.attributes["sym_name"]
    inner = fn.parent
    options = {} if args.warpgroups is None else {"warpgroups": args.warpgroups}
    plan = rewrite_dispatch(fn, target=args.target, causal=args.causal, stages=args.stages, **options)
    (kernel,) = [f for f in ops_named(inner, "func.func") if f.attributes["sym_name"] == name]
    install(
        kernel,
        get_target(args.target),
        workgroup_size=plan.workgroup_size,
        subgroup_size=plan.wave_size,
        grid=constant_grid(plan.grid),
    )
    assert module.operation.verify()
    print(module)


if __name__ == "__main__":
    main()
