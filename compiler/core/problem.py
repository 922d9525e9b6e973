"""What the Select stage found: one matmul-like contraction, described independently of its IR.

The record travels between stages as the structured attribute ``mmaflow.problem`` (see
``core/attrs.py``); ``to_dict`` / ``from_dict`` are its plain-Python form.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, replace


@dataclass(frozen=True)
class Binding:
    """Where a tensor of the dispatch lives: a HAL binding and a byte offset into it.

    IREE packs tensors into shared buffers, so two operands may share a binding at different
    offsets (GPT-2's Q and K). ``offset`` is None when it is only known at run time (push
    constants); the kernel then takes it from the subspan's offset operand, as IREE does."""

    binding: int
    offset: int | None = 0

    def describe(self) -> str:
        return f"binding {self.binding} @ {'?' if self.offset is None else self.offset}"

    @staticmethod
    def from_dict(d: dict) -> "Binding":
        """From its attribute: a run-time offset (None) is left out of the attribute, not 0."""
        return Binding(d["binding"], d.get("offset"))


@dataclass(frozen=True)
class EpilogueInput:
    """A tensor the fused epilogue reads besides the accumulator, e.g. a bias."""

    at: Binding
    type: str  # element type
    shape: tuple  # its full shape (None where dynamic)
    dims: tuple  # the output dimension each axis follows: "b", "m" or "n" (bias over columns: ("n",))

    @staticmethod
    def from_dict(d: dict) -> "EpilogueInput":
        return EpilogueInput(Binding.from_dict(d["at"]), d["type"], tuple(d["shape"]), tuple(d["dims"]))

    @staticmethod
    def describe_all(acc_type: str, inputs: tuple, ops: tuple, stored_type: str) -> str:
        """``epilogue(f32, f16[m,n]: truncf mulf) -> f16``: the accumulator's and inputs' types, the ops."""
        ins = "".join(f", {e.type}[{','.join(e.dims)}]" for e in inputs)
        names = " ".join(o.split(".", 1)[-1] for o in ops)
        return f"epilogue({acc_type}{ins}: {names}) -> {stored_type}"


@dataclass(frozen=True)
class BlockScales:
    """Block scales of A and B (OCP MX, IREE's scaled-matmul form): one E8M0 value a ``block``
    consecutive K of each row of A ([M, K/block]) and of each column of B ([N, K/block])."""

    a: Binding
    b: Binding
    type: str  # "f8E8M0FNU"
    block: int  # K values a scale covers (32)


@dataclass(frozen=True)
class DynamicDim:
    """A dimension known only at run time, and how the kernel gets it."""

    dim: str  # "m", "n", "k" or "batch"
    ordinals: tuple  # its indices in the dispatch's workload (A's K and B's K may be two entries)
    constants: tuple  # per workload ordinal, the push constants holding it: (low 32 bits, high 32 bits or -1)
    divisor: int = 1  # a divisor the program promises (util.assume.int udiv), 1 if none
    at_most: int | None = None  # a bound a kernel version runs under (stage `version`: M <= 32), None if none

    @property
    def ordinal(self) -> int:
        """The workload entry the grid is computed from."""
        return self.ordinals[0]

    @staticmethod
    def from_dict(x: dict) -> "DynamicDim":
        return DynamicDim(
            x["dim"],
            tuple(x["ordinals"]),
            tuple(tuple(c) for c in x["constants"]),
            x.get("divisor", 1),
            x.get("at_most"),
        )


@dataclass(frozen=True)
class Contraction:
    m: int | None  # None: dynamic (see ``dynamic``)
    n: int | None
    k: int | None
    batch: int | None  # 1 when there is no batch dimension
    a_type: str  # element types as MLIR spells them
    b_type: str
    c_type: str  # result (= accumulator) element type
    a: Binding = Binding(0)  # where A, B and the stored result C live (default: a plain module's
    b: Binding = Binding(1)  # bindings 0, 1, 2 at offset 0)
    c: Binding = Binding(2)
    a_transposed: bool = False  # A stored K x M
    b_transposed: bool = False  # B stored N x K
    unsigned_a: bool = False  # integer inputs zero-extended (arith.extui) rather than sign-extended
    unsigned_b: bool = False
    same_ab: bool = False  # A and B are one tensor (A @ A, A @ A^T): same subspan, or same binding, offset, type
    batched: bool = False  # a batch loop exists (possibly of extent 1)
    # Fused elementwise consumers (the epilogue), applied in registers before the store:
    out_type: str | None = None  # stored element type when the epilogue changes it (f32 acc -> f16)
    epilogue: tuple = ()  # EpilogueInput of every extra tensor the epilogue reads
    epilogue_ops: tuple = ()  # the epilogue's ops in order (for logs; the body itself stays in the IR)
    dynamic: tuple = ()  # DynamicDim of every dimension that is None above
    scales: BlockScales | None = None  # block-scaled (MXFP): A and B's E8M0 scales

    # Configuring a dynamic dimension as if it were this large (tiles for big problems).
    DYNAMIC_ESTIMATE = 4096

    @property
    def is_dynamic(self) -> bool:
        return bool(self.dynamic)

    def dynamic_dim(self, dim: str) -> DynamicDim | None:
        return next((d for d in self.dynamic if d.dim == dim), None)

    def multiple_of(self, dim: str) -> int:
        """What the size of ``dim`` is known to be a multiple of: itself when static, the
        program's divisibility promise when dynamic (also on an ``estimate()``, whose stand-in
        size promises nothing)."""
        dyn = self.dynamic_dim(dim)
        return dyn.divisor if dyn is not None else getattr(self, dim)

    def estimate(self) -> "Contraction":
        """The problem with dynamic sizes replaced by DYNAMIC_ESTIMATE (batch: 1), for the heuristic."""
        est = {d.dim: d.at_most or (1 if d.dim == "batch" else self.DYNAMIC_ESTIMATE) for d in self.dynamic}
        return replace(self, **est)

    @property
    def stored_type(self) -> str:
        return self.out_type or self.c_type

    @property
    def has_epilogue(self) -> bool:
        return bool(self.epilogue_ops)

    def to_dict(self) -> dict:
        return asdict(self)

    @staticmethod
    def from_dict(d: dict) -> "Contraction":
        d = dict(d)
        for role in ("a", "b", "c"):
            d[role] = Binding.from_dict(d[role])
        d["epilogue"] = tuple(EpilogueInput.from_dict(e) for e in d.get("epilogue", ()))
        d["epilogue_ops"] = tuple(d.get("epilogue_ops", ()))
        d["dynamic"] = tuple(DynamicDim.from_dict(x) for x in d.get("dynamic", ()))
        if d.get("scales"):
            sc = d["scales"]
            d["scales"] = BlockScales(Binding.from_dict(sc["a"]), Binding.from_dict(sc["b"]), sc["type"], sc["block"])
        return Contraction(**d)

    def describe(self) -> str:
        def show(v):
            return "?" if v is None else str(v)

        lead = f"{show(self.batch)}x" if self.batch is None or self.batch > 1 else ""
        ta = "^T" if self.a_transposed else ""
        tb = "^T" if self.b_transposed else ""
        text = (
            f"{lead}{show(self.m)}x{show(self.n)}x{show(self.k)} {self.a_type}{ta} x {self.b_type}{tb} -> {self.c_type}"
        )
        if self.scales is not None:
            text += f", {self.scales.type} scales a {self.scales.block}-value block"
        if self.has_epilogue:
            text += ", " + EpilogueInput.describe_all(self.c_type, self.epilogue, self.epilogue_ops, self.stored_type)
        return text


def operand_dims(p: Contraction) -> dict[str, list[str]]:
    """The problem dimension each axis of A, B and C follows (batch leading, transposition applied)."""
    lead = ["batch"] if p.batched else []
    return {
        "A": lead + (["k", "m"] if p.a_transposed else ["m", "k"]),
        "B": lead + (["n", "k"] if p.b_transposed else ["k", "n"]),
        "C": lead + ["m", "n"],
    }


def operand_shapes(p: Contraction) -> dict[str, list[int | None]]:
    """Storage shapes of A, B, C (None where dynamic)."""
    return {role: [getattr(p, d) for d in dims] for role, dims in operand_dims(p).items()}


def padded_problem(problem: Contraction, cfg) -> Contraction:
    """The static problem the transform script sees: every dimension rounded up to whole tiles;
    a dynamic one stands in as two tiles (two workgroups / K steps, so that no loop of one
    iteration folds away: the kernel takes its true extent from the prologue function)."""

    def up(d, t):
        return 2 * t if d is None else math.ceil(d / t) * t

    return replace(
        problem,
        m=up(problem.m, cfg.tile_m),
        n=up(problem.n, cfg.tile_n),
        k=up(problem.k, cfg.tile_k),
        batch=2 if problem.batch is None else problem.batch,
        dynamic=(),
    )
