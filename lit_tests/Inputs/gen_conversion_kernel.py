"""Print the RDNA3 wave32 hand-back fixture with attention's P conversion between two WMMAs.

The fixture (``handback_wmma_gfx1100.mlir``) computes D = A B with one WMMA. Here a first WMMA
computes S^T = A B (standing for K Q^T), ``compiler/kernels/common/convert_emit.py`` converts its accumulator
to an A operand with the planned register route (``compiler/target/convert.py``), and the fixture's
WMMA multiplies that by B: the chain of a flash-attention step, for IREE to lower
(``lit_tests/isa/conversion.test``, docs/PERFORMANCE.md).

    python lit_tests/Inputs/gen_conversion_kernel.py [--route registers|lds] > kernel.mlir

``--route lds``: the plan's LDS round trip instead, for comparison.
"""

import argparse
from pathlib import Path

from iree.compiler import ir
from iree.compiler.dialects import amdgpu, arith

from mmaflow.compiler.core.mlir import new_context, ops_named, parse_module
from mmaflow.compiler.kernels.common.convert_emit import emit_lds_route, emit_register_route
from mmaflow.compiler.target.convert import attention_conversion
from mmaflow.compiler.target.targets import get_target


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--route", choices=["registers", "lds"], default="registers")
    route = parser.parse_args().route
    ctx = new_context()
    module = parse_module((Path(__file__).parent / "handback_wmma_gfx1100.mlir").read_text(), ctx)
    (wmma,) = ops_named(module.operation, "amdgpu.wmma")
    (tid,) = ops_named(module.operation, "gpu.thread_id")
    intr = get_target("gfx1100").intrinsic("WMMA_F32_16x16x16_F16")
    conv = attention_conversion(intr, transposed=True, vendor="amd", family="rdna3")
    with ctx, wmma.location, ir.InsertionPoint(wmma):
        a, b, c = list(wmma.operands)[:3]
        s_t = amdgpu.wmma(16, 16, 16, a, b, c)
        lane = arith.remui(tid.results[0], arith.constant(ir.IndexType.get(), intr.wave_size))
        emit = emit_register_route if route == "registers" else emit_lds_route
        (p,) = emit(conv.plan, [s_t], lane, elem_type=ir.VectorType(a.type).element_type)
    wmma.operands[0] = p
    assert module.operation.verify()
    print(module)


if __name__ == "__main__":
    main()
