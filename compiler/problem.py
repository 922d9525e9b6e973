"""What the Select stage found: one matmul-like contraction, described independently of its IR."""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass


@dataclass(frozen=True)
class EpilogueInput:
    """A tensor the fused epilogue reads besides the accumulator, e.g. a bias."""

    binding: int  # hal binding index
    type: str  # element type
    shape: tuple  # its full shape
    dims: tuple  # the output dimension each axis follows: "b", "m" or "n" (bias over columns: ("n",))


@dataclass(frozen=True)
class DynamicDim:
    """A dimension known only at run time, and how the kernel gets it."""

    dim: str  # "m", "n", "k" or "batch"
    ordinals: tuple  # its indices in the dispatch's workload (A's K and B's K may be two entries)
    constants: tuple  # per workload ordinal, the push constants holding it: (low 32 bits, high 32 bits or None)
    divisor: int = 1  # a divisor the program promises (util.assume.int udiv), 1 if none

    @property
    def ordinal(self) -> int:
        """The workload entry the grid is computed from."""
        return self.ordinals[0]


@dataclass(frozen=True)
class Contraction:
    m: int | None  # None: dynamic (see ``dynamic``)
    n: int | None
    k: int | None
    batch: int | None  # 1 when there is no batch dimension
    a_type: str  # element types as MLIR spells them
    b_type: str
    c_type: str  # result (= accumulator) element type
    a_transposed: bool = False  # A stored K x M
    b_transposed: bool = False  # B stored N x K
    unsigned_a: bool = False  # integer inputs zero-extended (arith.extui) rather than sign-extended
    unsigned_b: bool = False
    bindings: tuple | None = None  # hal binding index of A, B and C in the dispatch, when known
    batched: bool = False  # a batch loop exists (possibly of extent 1)
    # Fused elementwise consumers (the epilogue), applied in registers before the store:
    out_type: str | None = None  # stored element type when the epilogue changes it (f32 acc -> f16)
    epilogue: tuple = ()  # EpilogueInput of every extra tensor the epilogue reads
    epilogue_ops: tuple = ()  # the epilogue's ops in order (for logs; the body itself stays in the IR)
    dynamic: tuple = ()  # DynamicDim of every dimension that is None above

    # Configuring a dynamic dimension as if it were this large (tiles for big problems).
    DYNAMIC_ESTIMATE = 4096

    @property
    def is_dynamic(self) -> bool:
        return bool(self.dynamic)

    def dynamic_dim(self, dim: str) -> DynamicDim | None:
        return next((d for d in self.dynamic if d.dim == dim), None)

    def multiple_of(self, dim: str) -> int:
        """What the size of ``dim`` is known to be a multiple of: itself when static, the
        program's divisibility promise when dynamic."""
        size = getattr(self, dim)
        return size if size is not None else self.dynamic_dim(dim).divisor

    def estimate(self) -> "Contraction":
        """The problem with dynamic sizes replaced by DYNAMIC_ESTIMATE (batch: 1), for the heuristic."""
        from dataclasses import replace
        est = {d.dim: (1 if d.dim == "batch" else self.DYNAMIC_ESTIMATE) for d in self.dynamic}
        return replace(self, **est)

    @property
    def stored_type(self) -> str:
        return self.out_type or self.c_type

    @property
    def has_epilogue(self) -> bool:
        return bool(self.epilogue_ops)

    @property
    def flops(self) -> int | None:
        if self.is_dynamic:
            return None
        return 2 * self.batch * self.m * self.n * self.k

    def to_json(self) -> str:
        return json.dumps(asdict(self), sort_keys=True)

    @staticmethod
    def from_json(text: str) -> "Contraction":
        d = json.loads(text)
        if d.get("bindings") is not None:
            d["bindings"] = tuple(d["bindings"])
        d["epilogue"] = tuple(EpilogueInput(e["binding"], e["type"], tuple(e["shape"]), tuple(e["dims"]))
                              for e in d.get("epilogue", ()))
        d["epilogue_ops"] = tuple(d.get("epilogue_ops", ()))
        d["dynamic"] = tuple(DynamicDim(x["dim"], tuple(x["ordinals"]), tuple(tuple(c) for c in x["constants"]),
                                        x.get("divisor", 1))
                             for x in d.get("dynamic", ()))
        return Contraction(**d)

    def describe(self) -> str:
        def show(v):
            return "?" if v is None else str(v)
        lead = f"{show(self.batch)}x" if self.batch is None or self.batch > 1 else ""
        ta = "^T" if self.a_transposed else ""
        tb = "^T" if self.b_transposed else ""
        text = f"{lead}{show(self.m)}x{show(self.n)}x{show(self.k)} {self.a_type}{ta} x {self.b_type}{tb} -> {self.c_type}"
        if self.has_epilogue:
            ins = "".join(f", {e.type}[{','.join(e.dims)}]" for e in self.epilogue)
            text += f", epilogue({self.c_type}{ins}: {' '.join(o.split('.', 1)[-1] for o in self.epilogue_ops)}) -> {self.stored_type}"
        return text
