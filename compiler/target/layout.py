"""The batch-lane-vector layout model.

A 2-D tile held by one wave (rows x cols) is the product of named dimensions

    Batch(row) x Batch(col) x LaneZ x LaneY x LaneX x VectorZ x VectorY x VectorX

Each dimension has a size and belongs to the tile's rows or to its cols. Within each axis the
dimensions are ordered from least to most significant, which gives the index formula; the lane
id decomposes as LaneX (fastest), LaneY, LaneZ; the per-lane element index decomposes in the
layout's own ``vector_order``. Batch dimensions are instruction instances, not lanes: a wave tile
larger than one instruction adds them (``compose``).

Worked example (the mma.sync m16n8k16 A operand, NVIDIA):

    rows = LaneY(8) . VectorZ(2)                 -> row = LaneY + 8*VectorZ
    cols = VectorX(2) . LaneX(4) . VectorY(2)    -> col = VectorX + 2*LaneX + 8*VectorY
    lane = LaneX + 4*LaneY, element = VectorX + 2*VectorZ + 4*VectorY (vector<4x2xf16> flattened)

so lane 5 (LaneX=1, LaneY=1) element 6 (VectorX=0, VectorZ=1, VectorY=1) holds A[1+8][0+2+8] = A[9][10].

Lanes past the product of the lane dimensions replicate (RDNA3 WMMA A/B: lanes 16-31 hold the
same data as lanes 0-15). For 16-bit results that occupy one half of each 32-bit register
(RDNA3 WMMA with OPSEL), logical element ``v`` sits at index ``v*vector_stride + vector_offset`` of
the vector value the MLIR op takes.

The compiler's catalogue (``target/intrinsics.py``) builds one layout per operand per instruction from
this model. The runtime's ISA model (``mmaflow.runtime.isa``) is an independent encoding of the
same hardware facts; tests make the two agree.
"""

from __future__ import annotations

import itertools
import math
from dataclasses import dataclass, field

ROW = "row"
COL = "col"
LANE_NAMES = ("LaneX", "LaneY", "LaneZ")
VECTOR_NAMES = ("VectorX", "VectorY", "VectorZ")
BATCH_NAMES = ("BatchRow", "BatchCol")
CANONICAL_ORDER = ("BatchRow", "BatchCol", "LaneZ", "LaneY", "LaneX", "VectorZ", "VectorY", "VectorX")


@dataclass(frozen=True)
class Dim:
    """One dimension of a layout: a name from CANONICAL_ORDER, a size, and the axis it indexes."""

    name: str
    size: int
    axis: str

    def __post_init__(self):
        assert self.name in CANONICAL_ORDER, f"unknown dimension name {self.name!r}"
        assert self.size >= 1, f"{self.name}: size must be >= 1"
        assert self.axis in (ROW, COL), f"{self.name}: axis must be 'row' or 'col'"


@dataclass(frozen=True)
class Run:
    """Consecutive per-lane elements that are consecutive along one axis of the tile."""

    first: int  # first logical element index
    length: int
    row: int  # lane-independent row offset of the first element (batch 0)
    col: int


@dataclass(frozen=True)
class Layout:
    """The layout of one operand fragment (A, B or C) for one wave."""

    operand: str
    dims: tuple[Dim, ...]
    row_order: tuple[str, ...]
    col_order: tuple[str, ...]
    vector_order: tuple[str, ...]
    wave_size: int
    vector_stride: int = 1
    vector_offset: int = 0
    _by_name: dict = field(init=False, repr=False, compare=False, hash=False)

    def __post_init__(self):
        by_name = {d.name: d for d in self.dims}
        object.__setattr__(self, "_by_name", by_name)
        assert len(by_name) == len(self.dims), "duplicate dimension names"
        assert self.operand in ("A", "B", "C"), f"operand must be A, B or C, not {self.operand!r}"
        for name in self.row_order:
            assert by_name[name].axis == ROW, f"{name} is listed in row_order but indexes cols"
        for name in self.col_order:
            assert by_name[name].axis == COL, f"{name} is listed in col_order but indexes rows"
        assert sorted(self.row_order + self.col_order) == sorted(by_name), (
            "every dimension must appear exactly once in row_order or col_order"
        )
        vec = sorted(n for n in by_name if n.startswith("Vector"))
        assert sorted(self.vector_order) == vec, "vector_order must list exactly the Vector dims"
        for name in by_name:
            if name.startswith("Batch"):
                order = self.row_order if by_name[name].axis == ROW else self.col_order
                below = order[: order.index(name)]
                assert order[-1] == name or all(n.startswith("Vector") for n in below), (
                    f"{name} must be the most significant dim of its axis, or sit right above its Vector dims"
                )
        assert self.wave_size % self.lanes_used == 0, (
            f"lane dims cover {self.lanes_used} lanes, which does not divide wave size {self.wave_size}"
        )
        assert self.lanes_used * self.elements * self.num_instructions == self.rows * self.cols, (
            "lanes x elements x batches must cover the tile exactly once (before replication)"
        )
        assert 0 <= self.vector_offset < self.vector_stride

    # ---- sizes -------------------------------------------------------------------------------
    def size(self, name: str) -> int:
        d = self._by_name.get(name)
        return d.size if d else 1

    @property
    def rows(self) -> int:
        return math.prod(self.size(n) for n in self.row_order)

    @property
    def cols(self) -> int:
        return math.prod(self.size(n) for n in self.col_order)

    @property
    def lane_dims(self) -> tuple[str, ...]:
        return tuple(n for n in LANE_NAMES if n in self._by_name)

    @property
    def lanes_used(self) -> int:
        return math.prod(self.size(n) for n in self.lane_dims)

    @property
    def replication(self) -> int:
        return self.wave_size // self.lanes_used

    @property
    def elements(self) -> int:
        """Logical elements each lane holds per instruction."""
        return math.prod(self.size(n) for n in self.vector_order)

    @property
    def op_vector_length(self) -> int:
        """Length of the per-lane vector value the MLIR op takes (16-bit WMMA results: doubled)."""
        return self.elements * self.vector_stride

    @property
    def batch(self) -> tuple[int, int]:
        return (self.size("BatchRow"), self.size("BatchCol"))

    @property
    def num_instructions(self) -> int:
        return self.size("BatchRow") * self.size("BatchCol")

    # ---- strides -----------------------------------------------------------------------------
    def axis_stride(self, name: str) -> int:
        axis = self._by_name[name].axis
        order = self.row_order if axis == ROW else self.col_order
        return math.prod(self.size(n) for n in order[: order.index(name)])

    def lane_stride(self, name: str) -> int:
        dims = self.lane_dims
        return math.prod(self.size(n) for n in dims[: dims.index(name)])

    def vector_index_stride(self, name: str) -> int:
        return math.prod(self.size(n) for n in self.vector_order[: self.vector_order.index(name)])

    # ---- the map and its inverse -------------------------------------------------------------
    def _decompose(self, value: int, order, stride_of) -> dict[str, int]:
        return {n: (value // stride_of(n)) % self.size(n) for n in order}

    def coords(self, lane: int, element: int, batch: tuple[int, int] = (0, 0)) -> tuple[int, int]:
        """(row, col) of logical element ``element`` of lane ``lane`` in instruction ``batch``."""
        if not 0 <= lane < self.wave_size:
            raise ValueError(f"lane {lane} out of range for wave size {self.wave_size}")
        if not 0 <= element < self.elements:
            raise ValueError(f"element {element} out of range (lane holds {self.elements})")
        idx = self._decompose(lane % self.lanes_used, self.lane_dims, self.lane_stride)
        idx.update(self._decompose(element, self.vector_order, self.vector_index_stride))
        idx["BatchRow"], idx["BatchCol"] = batch
        row = sum(idx[n] * self.axis_stride(n) for n in self.row_order)
        col = sum(idx[n] * self.axis_stride(n) for n in self.col_order)
        return row, col

    def owners(self, row: int, col: int) -> list[tuple[int, int, tuple[int, int]]]:
        """Every (lane, element, batch) holding tile element (row, col); replicas included."""
        if not (0 <= row < self.rows and 0 <= col < self.cols):
            raise ValueError(f"({row}, {col}) is outside the {self.rows}x{self.cols} tile")
        idx = self._decompose(row, self.row_order, self.axis_stride)
        idx.update(self._decompose(col, self.col_order, self.axis_stride))
        lane = sum(idx[n] * self.lane_stride(n) for n in self.lane_dims)
        element = sum(idx[n] * self.vector_index_stride(n) for n in self.vector_order)
        batch = (idx.get("BatchRow", 0), idx.get("BatchCol", 0))
        return [(lane + r * self.lanes_used, element, batch) for r in range(self.replication)]

    def op_index(self, element: int) -> int:
        """Position of logical element ``element`` in the MLIR op's per-lane vector."""
        return element * self.vector_stride + self.vector_offset

    # ---- composition -------------------------------------------------------------------------
    def compose(self, batch_rows: int, batch_cols: int) -> "Layout":
        """The layout of a wave tile of batch_rows x batch_cols instructions of this one."""
        if "BatchRow" in self._by_name or "BatchCol" in self._by_name:
            raise ValueError("compose() takes a single-instruction layout")
        dims = self.dims + (Dim("BatchRow", batch_rows, ROW), Dim("BatchCol", batch_cols, COL))
        return Layout(
            self.operand,
            dims,
            self.row_order + ("BatchRow",),
            self.col_order + ("BatchCol",),
            self.vector_order,
            self.wave_size,
            self.vector_stride,
            self.vector_offset,
        )

    def interleave_batch(self, axis: str) -> "Layout":
        """The same instructions with this axis' Batch dim moved right above the leading Vector
        dims: a lane's elements of consecutive instructions become one contiguous run along the
        axis. As a K permutation (A's cols and B's rows alike) the sum over K is unchanged, and a
        lane loads the operands of several K steps with one wide access."""
        name = "BatchRow" if axis == ROW else "BatchCol"
        order = self.row_order if axis == ROW else self.col_order
        rest = [n for n in order if n != name]
        lead = 0
        while lead < len(rest) and rest[lead].startswith("Vector"):
            lead += 1
        new = tuple(rest[:lead]) + (name,) + tuple(rest[lead:])
        return self.permute_axis(axis, new)

    def transpose(self) -> "Layout":
        """The same registers read as the transposed tile: every dim indexes the other axis
        (lane l, element e holds T[col][row] where it held T[row][col]; instruction (i, j) becomes
        (j, i)). C of K Q^T, read this way, is a layout of (Q K^T) = S."""
        swap = {"BatchRow": "BatchCol", "BatchCol": "BatchRow"}  # batches keep naming their axis
        dims = tuple(Dim(swap.get(d.name, d.name), d.size, COL if d.axis == ROW else ROW) for d in self.dims)
        rows, cols = (tuple(swap.get(n, n) for n in order) for order in (self.col_order, self.row_order))
        return Layout(
            self.operand, dims, rows, cols, self.vector_order, self.wave_size, self.vector_stride, self.vector_offset
        )

    def permute_axis(self, axis: str, order: tuple[str, ...]) -> "Layout":
        """The same dims with the significance order along one axis replaced (a K permutation)."""
        if axis == ROW:
            return Layout(
                self.operand,
                self.dims,
                order,
                self.col_order,
                self.vector_order,
                self.wave_size,
                self.vector_stride,
                self.vector_offset,
            )
        return Layout(
            self.operand,
            self.dims,
            self.row_order,
            order,
            self.vector_order,
            self.wave_size,
            self.vector_stride,
            self.vector_offset,
        )

    # ---- what code generation asks -----------------------------------------------------------
    def lane_terms(self) -> list[tuple[str, int, int, str, int]]:
        """(name, lane divisor, size, axis, axis stride) of each lane dim.

        The lane-dependent part of a coordinate is sum(((lane // divisor) % size) * stride) over
        the terms of that axis; lanes past ``lanes_used`` wrap (replication) through the modulo.
        """
        return [
            (n, self.lane_stride(n), self.size(n), self._by_name[n].axis, self.axis_stride(n)) for n in self.lane_dims
        ]

    def element_offsets(self) -> list[tuple[int, int]]:
        """Lane-independent (row, col) offset of each logical element (batch 0)."""
        out = []
        for e in range(self.elements):
            idx = self._decompose(e, self.vector_order, self.vector_index_stride)
            out.append(
                (
                    sum(idx[n] * self.axis_stride(n) for n in self.vector_order if self._by_name[n].axis == ROW),
                    sum(idx[n] * self.axis_stride(n) for n in self.vector_order if self._by_name[n].axis == COL),
                )
            )
        return out

    def runs(self, contiguous_axis: str) -> list[Run]:
        """Split each lane's elements into runs contiguous along ``contiguous_axis``.

        A run of length L can be moved with one L-element vector load/store when the tile is
        stored with ``contiguous_axis`` innermost.
        """
        offsets = self.element_offsets()
        runs: list[Run] = []
        for e, (r, c) in enumerate(offsets):
            if runs:
                last = runs[-1]
                lr, lc = offsets[e - 1]
                step_ok = (r == lr and c == lc + 1) if contiguous_axis == COL else (c == lc and r == lr + 1)
                if step_ok and last.first + last.length == e:
                    runs[-1] = Run(last.first, last.length + 1, last.row, last.col)
                    continue
            runs.append(Run(e, 1, r, c))
        return runs

    # ---- presentation ------------------------------------------------------------------------
    def ordered_dims(self) -> list[Dim]:
        return [self._by_name[n] for n in CANONICAL_ORDER if n in self._by_name]

    def describe(self) -> str:
        def axis_str(order):
            return " . ".join(f"{n}({self.size(n)})" for n in order)

        dims = " x ".join(f"{d.name}({d.size},{d.axis})" for d in self.ordered_dims())
        lines = [
            f"operand {self.operand}: {self.rows}x{self.cols} tile, wave{self.wave_size}",
            f"  dims      : {dims}",
            f"  rows      : {axis_str(self.row_order)}   (least significant first)",
            f"  cols      : {axis_str(self.col_order)}",
            f"  element   : {axis_str(self.vector_order)}   ({self.elements} per lane per instruction)",
        ]
        if self.replication > 1:
            lines.append(
                f"  replicated: lanes {self.lanes_used}-{self.wave_size - 1} repeat lanes "
                f"0-{self.lanes_used - 1} ({self.replication} copies)"
            )
        if self.vector_stride > 1:
            lines.append(
                f"  op vector : element v at index {self.vector_stride}*v+{self.vector_offset} "
                f"of a {self.op_vector_length}-element vector (other slots unused)"
            )
        return "\n".join(lines)

    def vgpr_view(self, element_bits: int, max_lanes: int | None = None) -> str:
        """Seed-style register view: rows = registers (and sub-register slices), cols = lanes."""
        per_reg = max(1, 32 // element_bits)
        slots = self.op_vector_length
        lanes = range(self.wave_size if max_lanes is None else min(max_lanes, self.wave_size))
        by_slot: dict[tuple[int, int], str] = {}
        for lane in lanes:
            for e in range(self.elements):
                r, c = self.coords(lane, e)
                by_slot[(self.op_index(e), lane)] = f"{self.operand}{r}_{c}"
        width = max(len(v) for v in by_slot.values())
        header_label = "lane"
        label_w = len(f"V{(slots - 1) // per_reg}[31:16]") + (9 if 32 % element_bits else 1)
        out = [header_label.ljust(label_w) + "|" + "|".join(str(l).rjust(width) for l in lanes)]
        for s in range(slots):
            reg, part = divmod(s, per_reg)
            if per_reg == 1:
                label = f"V{reg}"
            elif 32 % element_bits:  # 6-bit data packed densely: an element may straddle two registers
                lo, hi = s * element_bits, (s + 1) * element_bits - 1
                if lo // 32 == hi // 32:
                    label = f"V{lo // 32}[{hi % 32}:{lo % 32}]"
                else:
                    label = f"V{lo // 32}[31:{lo % 32}]+V{hi // 32}[{hi % 32}:0]"
            else:
                lo = part * element_bits
                label = f"V{reg}[{lo + element_bits - 1}:{lo}]"
            cells = [by_slot.get((s, l), "-").rjust(width) for l in lanes]
            out.append(label.ljust(label_w) + "|" + "|".join(cells))
        return "\n".join(out)

    def to_elements(self) -> list[dict]:
        """Every (lane, op vector index) -> (row, col) of a single instruction, replicas included."""
        assert self.num_instructions == 1, "to_elements() describes one instruction"
        return [
            {"lane": lane, "index": self.op_index(e), "row": rc[0], "col": rc[1]}
            for lane, e in itertools.product(range(self.wave_size), range(self.elements))
            for rc in [self.coords(lane, e)]
        ]


def make_layout(
    operand: str,
    wave_size: int,
    *,
    rows: list[tuple[str, int]],
    cols: list[tuple[str, int]],
    vector_order: tuple[str, ...] | None = None,
    vector_stride: int = 1,
    vector_offset: int = 0,
) -> Layout:
    """Build a layout from per-axis dimension lists, each least significant first.

    ``rows=[("LaneY", 8), ("VectorZ", 2)]`` means row = LaneY + 8*VectorZ. ``vector_order``
    defaults to VectorX, VectorY, VectorZ (those present).
    """
    dims = tuple(Dim(n, s, ROW) for n, s in rows) + tuple(Dim(n, s, COL) for n, s in cols)
    present = {n for n, _ in rows + cols}
    if vector_order is None:
        vector_order = tuple(n for n in VECTOR_NAMES if n in present)
    return Layout(
        operand,
        dims,
        tuple(n for n, _ in rows),
        tuple(n for n, _ in cols),
        tuple(vector_order),
        wave_size,
        vector_stride,
        vector_offset,
    )
