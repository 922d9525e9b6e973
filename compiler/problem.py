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
class Contraction:
    m: int
    n: int
    k: int
    batch: int  # 1 when there is no batch dimension
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

    @property
    def stored_type(self) -> str:
        return self.out_type or self.c_type

    @property
    def has_epilogue(self) -> bool:
        return bool(self.epilogue_ops)

    @property
    def flops(self) -> int:
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
        return Contraction(**d)

    def describe(self) -> str:
        lead = f"{self.batch}x" if self.batch > 1 else ""
        ta = "^T" if self.a_transposed else ""
        tb = "^T" if self.b_transposed else ""
        text = f"{lead}{self.m}x{self.n}x{self.k} {self.a_type}{ta} x {self.b_type}{tb} -> {self.c_type}"
        if self.has_epilogue:
            ins = "".join(f", {e.type}[{','.join(e.dims)}]" for e in self.epilogue)
            text += f", epilogue({self.c_type}{ins}: {' '.join(o.split('.', 1)[-1] for o in self.epilogue_ops)}) -> {self.stored_type}"
        return text
