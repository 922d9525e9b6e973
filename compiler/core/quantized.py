"""What a weight-only quantized matmul dispatch computes: the record select writes
(``mmaflow.weight_only``) and the decode family's weight-only kernel reads.

IREE forms one dispatch from a dequantization feeding a matmul (its own dequant-matmul tests, and
a quantized linear layer's export): a ``linalg.generic`` turns packed integer weights W (i4 or i8,
stored N x K, or N x K/G x G) and per-group parameters (a scale, a zero point, ... each N x K/G,
or N for one group per row) into f16 / bf16 weights, and a contraction multiplies the activations
A (M x K, or K when IREE dropped a unit M) by them: ``out[m, n] = sum_k A[m, k] * deq(W[n, k],
params[n, k // G])``. The dequantization's body is whatever the user wrote after the integer's
conversion to float (``(w - zero) * scale``, ``w * scale``, ...); the kernel evaluates that body
itself, in registers, between the weight's load and the matrix instruction.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass

from mmaflow.compiler.core.problem import Binding, DynamicDim, EpilogueInput


@dataclass(frozen=True)
class WeightOnlyMatmul:
    m: int | None  # activation rows (1 where IREE dropped the unit dim; None: dynamic, see ``dynamic``)
    n: int
    k: int
    group: int  # K elements sharing one set of parameters
    q_type: str  # the stored weights' type: "i4" | "i8"
    signed: bool  # how the dequantization converts them (sitofp / uitofp)
    act_type: str  # A's type and the dequantized weights' ("f16" | "bf16")
    acc_type: str  # the contraction's accumulator and output type
    param_types: tuple[str, ...]  # the dequantization's per-group operands, in its operand order
    a: Binding
    w: Binding
    out: Binding
    params: tuple[Binding, ...]
    dynamic: tuple[DynamicDim, ...] = ()  # a dynamic M: its workload ordinal and push constants
    out_type: str | None = None  # the stored type when a truncf or an epilogue follows the contraction (else acc_type)
    # Fused elementwise consumers of the result (a gated activation's other half, a bias), applied in
    # registers before the store: the tensors they read besides it, and their ops (for logs; the body
    # stays in the IR). A lone truncf is ``out_type`` alone, not an epilogue.
    epilogue: tuple[EpilogueInput, ...] = ()
    epilogue_ops: tuple[str, ...] = ()

    def describe(self) -> str:
        q = ("s" if self.signed else "u") + self.q_type[1:]
        m = "?" if self.m is None else self.m
        return (
            f"weight-only {m}x{self.n}x{self.k} {self.act_type} x {q} (groups of {self.group}, "
            f"{len(self.params)} parameter(s) per group) -> {self.acc_type}"
            + (
                ", " + EpilogueInput.describe_all(self.acc_type, self.epilogue, self.epilogue_ops, self.out_type)
                if self.epilogue_ops
                else f", stored {self.out_type}"
                if self.out_type
                else ""
            )
        )

    def where(self) -> str:
        parts = [f"A: {self.a.describe()}", f"W: {self.w.describe()}"]
        parts += [f"param {i}: {p.describe()}" for i, p in enumerate(self.params)]
        parts += [f"epilogue input {i}: {e.at.describe()}" for i, e in enumerate(self.epilogue)]
        return ", ".join(parts + [f"out: {self.out.describe()}"])

    def to_dict(self) -> dict:
        return asdict(self)

    @staticmethod
    def from_dict(d: dict) -> "WeightOnlyMatmul":
        d = dict(d)
        for name in ("a", "w", "out"):
            d[name] = Binding.from_dict(d[name])
        d["params"] = tuple(Binding.from_dict(p) for p in d["params"])
        d["param_types"] = tuple(d["param_types"])
        d["dynamic"] = tuple(DynamicDim.from_dict(x) for x in d.get("dynamic", ()))
        d.setdefault("m", None)
        d.setdefault("out_type", None)
        d["epilogue"] = tuple(EpilogueInput.from_dict(e) for e in d.get("epilogue", ()))
        d["epilogue_ops"] = tuple(d.get("epilogue_ops", ()))
        return WeightOnlyMatmul(**d)
