"""What an ``iree_linalg_ext.attention`` (or ``online_attention``) op computes, read through the
bindings: its dimensions, element types, scale and mask.

IREE's attention op takes ``ins(Q, K, V, scale[, mask])`` and writes ``outs(O)`` (online
attention also writes the running max and sum); one indexing map per operand, in that order,
over loops that are batch, M (queries), K1 (the QK head dim), K2 (keys) and N (the V head dim).
The roles follow from which maps a loop appears in:

    batch: Q, K, V and O       M: Q and O, not K       K1: Q and K, not O
    K2:    K and V, not Q      N: V and O, not Q

A mask is a tensor over (batch, M, K2): a floating-point one is added to the scores, an ``i1``
one selects them. PyTorch's ``scaled_dot_product_attention(is_causal=True)`` reaches the dispatch
as such a tensor, computed outside it: from the dispatch alone a causal mask cannot be told from
any other, and the description says so rather than guess.

Select takes an attention dispatch that mmaflow's flash-attention kernel (``kernels/attention/nvidia.py``,
``kernels/attention/amd.py``) supports on an NVIDIA or AMD target and records it as an ``AttentionDispatch`` (this
description plus where Q, K, V and O live); every other one is left to IREE with this
description and the reason as the log line.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass

from iree.compiler import ir

from mmaflow.compiler.core.causal import CAUSAL_MASK, CAUSAL_ROWS
from mmaflow.compiler.core.errors import InputError
from mmaflow.compiler.core.mlir import defining_op, location_of, str_attr
from mmaflow.compiler.core.problem import Binding, DynamicDim

ATTENTION_OPS = ("iree_linalg_ext.attention", "iree_linalg_ext.online_attention")


@dataclass(frozen=True)
class Attention:
    op: str
    batch: tuple[int | None, ...]  # in the output's order (None: dynamic)
    m: int | None
    k1: int | None
    k2: int | None
    n: int | None
    q_type: str
    k_type: str
    v_type: str
    out_type: str
    scale: float | None  # None: a run-time value
    mask: str  # "no mask", "additive f16 mask ...", "boolean i1 mask ..."
    mask_type: str | None = None  # the mask's element type ("f16", "i1", ...); None: no mask
    # The mask proven causal (key j > query i masked, top-left aligned) from the dispatch that writes it
    # (``core/causal.py``): which dispatch, and the kernel skips masked tiles instead of reading it; "" otherwise.
    causal: str = ""
    # With ``causal``: the rows after which the query position restarts (0: it never does, position = row);
    # IREE's GQA form folds the query heads sharing a KV head into the rows, each head's positions from 0.
    causal_rows: int = 0
    # No loop plays M: one query, its loop folded away (Q and O stored (batch..., head dim)), as IREE forms a
    # decoder step from iree-turbine's export; ``m`` is then 1.
    one_query: bool = False
    # V stored with the keys innermost (head dim outer: (batch..., head dim, keys)), as IREE lays out the
    # decoder step's broadcast cache; False: the head dim innermost.
    v_transposed: bool = False

    def describe(self) -> str:
        def d(x):
            return "?" if x is None else str(x)

        batch = "x".join(d(b) for b in self.batch) or "1"
        types = (
            self.q_type
            if len({self.q_type, self.k_type, self.v_type}) == 1
            else f"{self.q_type}/{self.k_type}/{self.v_type}"
        )
        scale = "scale (run-time value)" if self.scale is None else f"scale {self.scale:g}"
        queries = "1 query (no query loop)" if self.one_query else f"{d(self.m)} queries"
        stored = ", V stored head dim outer" if self.v_transposed else ""
        return (
            f"{self.op} batch {batch}, {queries} x {d(self.k2)} keys, head dim {d(self.k1)} -> "
            f"{d(self.n)} ({types} -> {self.out_type}, {scale}, {self.mask}{stored})"
        )


@dataclass(frozen=True)
class AttentionDispatch:
    """A taken attention dispatch (``mmaflow.attention``): what it computes and where its
    tensors live (binding + constant byte offset each)."""

    attention: Attention
    q: Binding
    k: Binding
    v: Binding
    o: Binding
    # Storage order of Q, K, V, O (``flash_attention.Placement.order``: per stored dim, outermost
    # first, the logical one of (batch..., rows, head dim) it holds); None: all stored so.
    orders: tuple[tuple[int, ...], ...] | None = None
    # The mask (additive, or boolean i1 stored one byte per element): where it lives and its storage order (per stored
    # dim, outermost first, the logical one of (batch..., queries, keys) it holds; a batch dim missing: broadcast
    # along it).
    mask: Binding | None = None
    mask_order: tuple[int, ...] | None = None
    # A run-time key length (a decoder step's KV cache): K2 as K's, V's and the mask's subspans carry it,
    # each its own workload entry (``core/dynamic.py``); empty when K2 is static.
    dynamic: tuple[DynamicDim, ...] = ()

    def describe(self) -> str:
        return self.attention.describe()

    def where(self) -> str:
        where = ", ".join(
            f"{r}: {b.describe()}" for r, b in (("Q", self.q), ("K", self.k), ("V", self.v), ("O", self.o))
        )
        if self.mask is not None:
            kind = "boolean i1 mask" if self.attention.mask_type == "i1" else "additive mask"
            where += f", {kind}: {self.mask.describe()}"
        if self.orders is None and self.mask_order is None:
            return where
        nb = len(self.attention.batch)
        names = [f"b{i}" for i in range(nb)] + ["rows", "d"]
        stored = (
            []
            if self.orders is None
            else [f"{r} ({', '.join(names[i] for i in order)})" for r, order in zip("QKVO", self.orders)]
        )
        if self.mask_order is not None:
            keys = names[:nb] + ["rows", "keys"]
            stored.append(f"mask ({', '.join(keys[i] for i in self.mask_order)})")
        return where + "; stored " + ", ".join(stored)

    def to_dict(self) -> dict:
        return asdict(self)

    @staticmethod
    def from_dict(d: dict) -> "AttentionDispatch":
        a = dict(d["attention"])
        a["batch"] = tuple(a["batch"])
        for name in ("m", "k1", "k2", "n", "scale"):  # None (dynamic, run-time) is left out of the attribute
            a.setdefault(name, None)
        a.setdefault("mask_type", None)
        orders, mask, mask_order = d.get("orders"), d.get("mask"), d.get("mask_order")
        return AttentionDispatch(
            Attention(**a),
            *(Binding.from_dict(d[r]) for r in ("q", "k", "v", "o")),
            orders=tuple(tuple(x) for x in orders) if orders is not None else None,
            mask=Binding.from_dict(mask) if mask is not None else None,
            mask_order=tuple(mask_order) if mask_order is not None else None,
            dynamic=tuple(DynamicDim.from_dict(x) for x in d.get("dynamic", ())),
        )


def _shape(value: ir.Value) -> tuple[str, list[int | None]]:
    t = ir.ShapedType(value.type)
    return str(t.element_type), [None if t.is_dynamic_dim(i) else t.get_dim_size(i) for i in range(t.rank)]


def _map_dims(attr: ir.Attribute, what: str, op: ir.Operation) -> list[int]:
    amap = ir.AffineMapAttr(attr).value
    dims = []
    for e in amap.results:
        if not isinstance(e, ir.AffineDimExpr):
            raise InputError(
                f"{op.name}: the {what} indexing map {amap} is not a projection of loops", location=location_of(op)
            )
        dims.append(e.position)
    return dims


def _constant_float(value: ir.Value) -> float | None:
    op = defining_op(value)
    if op is None or op.name != "arith.constant" or not isinstance(op.attributes["value"], ir.FloatAttr):
        return None
    return ir.FloatAttr(op.attributes["value"]).value


def attention_roles(op: ir.Operation) -> tuple[dict, dict, dict[str, list[int]]]:
    """An attention op's indexing-map dims per operand, its operand values by name, and the loops
    playing each role (batch, M, K1, K2, N)."""
    if op.name not in ATTENTION_OPS:
        raise ValueError(f"{op.name} is not an attention op")
    n_out = len(op.results)
    ins = list(op.operands)[: len(op.operands) - n_out]
    outs = list(op.operands)[len(op.operands) - n_out :]
    if len(ins) not in (4, 5) or not outs:
        raise InputError(
            f"{op.name} with {len(ins)} inputs and {len(outs)} outputs: expected Q, K, V, scale "
            f"and an optional mask, and an output",
            location=location_of(op),
        )
    maps = list(ir.ArrayAttr(op.attributes["indexing_maps"]))
    names = ["Q", "K", "V", "scale"] + (["mask"] if len(ins) == 5 else []) + ["O"]
    if len(maps) < len(names):
        raise InputError(f"{op.name} has {len(maps)} indexing maps for {len(names)} operands", location=location_of(op))
    dims = {name: _map_dims(maps[i], name, op) for i, name in enumerate(names)}
    values = dict(zip(names, ins + [outs[0]]))
    q, k, v, o = (set(dims[x]) for x in ("Q", "K", "V", "O"))

    def role(members: set) -> list[int]:
        found = [d for d in dims["O"] + dims["Q"] + dims["K"] + dims["V"] if d in members]
        return list(dict.fromkeys(found))

    roles = {
        "batch": role(q & k & v & o),
        "M": role((q & o) - k),
        "K1": role((q & k) - o),
        "K2": role((k & v) - q),
        "N": role((v & o) - q),
    }
    for what in ("M", "K1", "K2", "N"):
        if what == "M" and not roles[what]:
            continue  # one query, its loop folded away (a decoder step as IREE forms it from iree-turbine's export)
        if len(roles[what]) != 1:
            raise InputError(
                f"{op.name}: {len(roles[what])} loops play the role of {what} in its indexing maps",
                location=location_of(op),
            )
    return dims, values, roles


def query_key_loops(op: ir.Operation) -> tuple[int | None, int]:
    """The loops of an attention op that are its queries (M; None: one query, no loop) and its keys (K2)."""
    _, _, roles = attention_roles(op)
    return (roles["M"] or [None])[0], roles["K2"][0]


def describe_attention(op: ir.Operation) -> Attention:
    """Read an attention op's dimensions, types, scale and mask through the bindings; a mask proven
    causal (``core/causal.py``'s attribute on the op) is described so."""
    dims, values, roles = attention_roles(op)
    sizes: dict[int, int | None] = {}
    types = {}
    for name in ("Q", "K", "V", "O") + (("mask",) if "mask" in values else ()):
        elem, shape = _shape(values[name])
        types[name] = elem
        for loop, size in zip(dims[name], shape):
            if size is not None or loop not in sizes:
                sizes[loop] = size
    batch, (k1,), (k2,), (n,) = (roles[r] for r in ("batch", "K1", "K2", "N"))
    m = roles["M"][0] if roles["M"] else None
    sizes[None] = 1  # (no M loop: one query)
    mask_type = None
    if "mask" in values:
        elem, shape = _shape(values["mask"])
        mask_type = elem
        kind = "boolean" if elem == "i1" else "additive"
        extent = "x".join("?" if s is None else str(s) for s in shape)
        causal = str_attr(op, CAUSAL_MASK) or ""
        rows = ir.IntegerAttr(op.attributes[CAUSAL_ROWS]).value if causal and CAUSAL_ROWS in op.attributes else 0
        restart = f", query positions restarting every {rows} rows" if rows else ""
        mask = f"{kind} {elem} mask {extent}, " + (
            f"causal{restart} ({causal})" if causal else "whether causal is in its data"
        )
    else:
        mask, causal, rows = "no mask", "", 0
    return Attention(
        op.name,
        tuple(sizes[b] for b in batch),
        sizes[m],
        sizes[k1],
        sizes[k2],
        sizes[n],
        types["Q"],
        types["K"],
        types["V"],
        types["O"],
        _constant_float(values["scale"]),
        mask,
        mask_type,
        causal,
        rows,
        one_query=m is None,
        v_transposed=dims["V"][-1] == k2,
    )
