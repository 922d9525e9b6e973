"""What the Select stage found: one matmul-like contraction, described independently of its IR."""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass


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
        return Contraction(**d)

    def describe(self) -> str:
        lead = f"{self.batch}x" if self.batch > 1 else ""
        ta = "^T" if self.a_transposed else ""
        tb = "^T" if self.b_transposed else ""
        return (f"{lead}{self.m}x{self.n}x{self.k} {self.a_type}{ta} x {self.b_type}{tb} -> {self.c_type}")
