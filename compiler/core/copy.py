"""What a copy dispatch moves: the record select writes (``mmaflow.copy``) and the copy family's
kernel reads.

IREE turns a slice it cannot copy by DMA (a strided region, such as Q, K or V taken out of GPT-2's
fused QKV projection) into a dispatch of its own, ``slow_memcpy``: one
``iree_tensor_ext.dispatch.tensor.load`` of a static slice of one binding tensor and one
``dispatch.tensor.store`` of it into another, nothing computed. The record says which elements go
where: ``sizes`` elements from ``src_shape`` at ``src_offsets``, to ``dst_shape`` at
``dst_offsets`` (unit strides), each tensor at its binding and byte offset.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass

from mmaflow.compiler.core.problem import Binding


@dataclass(frozen=True)
class CopyDispatch:
    elem: str  # the element type ("f16", "bf16", "f32", "i8", ...)
    sizes: tuple[int, ...]  # the slice copied
    src: Binding
    src_shape: tuple[int, ...]  # the binding tensor the slice is read from
    src_offsets: tuple[int, ...]
    dst: Binding
    dst_shape: tuple[int, ...]
    dst_offsets: tuple[int, ...]
    src_align: int = 64  # bytes each binding's base is aligned to (the subspans' ``alignment``)
    dst_align: int = 64
    dynamic: tuple = ()  # (run-time dimensions: none; the kernel takes static copies)

    @property
    def elements(self) -> int:
        n = 1
        for s in self.sizes:
            n *= s
        return n

    def describe(self) -> str:
        def at(shape, offsets):
            whole = tuple(shape) == tuple(self.sizes)
            return "x".join(map(str, shape)) + ("" if whole else f" at {list(offsets)}")

        return (
            f"copy {'x'.join(map(str, self.sizes))} {self.elem} from {at(self.src_shape, self.src_offsets)} "
            f"to {at(self.dst_shape, self.dst_offsets)}"
        )

    def where(self) -> str:
        return f"from: {self.src.describe()}, to: {self.dst.describe()}"

    def to_dict(self) -> dict:
        return asdict(self)

    @staticmethod
    def from_dict(d: dict) -> "CopyDispatch":
        d = dict(d)
        d["src"], d["dst"] = Binding.from_dict(d["src"]), Binding.from_dict(d["dst"])
        for k in ("sizes", "src_shape", "src_offsets", "dst_shape", "dst_offsets"):
            d[k] = tuple(d[k])
        return CopyDispatch(**d)
