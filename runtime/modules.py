"""MLIR matmul modules, as text: what the tests, `mmaflow bench` and the examples compile.

matmul_source      linalg.matmul, static shapes
matmul_module      + transposed operands, batch, unsigned i8, A @ A^T (as linalg.generic)
epilogue_module    + one elementwise consumer that IREE fuses into the matmul's dispatch
dynamic_module     linalg.matmul on tensor<?x?x...>, optionally with util.assume.int divisibility
packed_module      A @ B^T of 4-bit operands (fp4 / i4) passed as bytes, optionally at byte offsets
scaled_module      MXFP4 A @ B^T in IREE's scaled-matmul form (E8M0 scales a 32-value block)
attention_module   iree_linalg_ext.attention as IREE makes it of torch's scaled_dot_product_attention
"""

from __future__ import annotations


def matmul_source(m: int, n: int, k: int, in_type: str = "f16", out_type: str = "f32") -> str:
    zero = "0" if out_type.startswith("i") else "0.0"
    return (
        f"func.func @matmul(%a: tensor<{m}x{k}x{in_type}>, %b: tensor<{k}x{n}x{in_type}>) -> tensor<{m}x{n}x{out_type}> {{\n"
        f"  %zero = arith.constant {zero} : {out_type}\n"
        f"  %empty = tensor.empty() : tensor<{m}x{n}x{out_type}>\n"
        f"  %acc = linalg.fill ins(%zero : {out_type}) outs(%empty : tensor<{m}x{n}x{out_type}>) -> tensor<{m}x{n}x{out_type}>\n"
        f"  %c = linalg.matmul ins(%a, %b : tensor<{m}x{k}x{in_type}>, tensor<{k}x{n}x{in_type}>) "
        f"outs(%acc : tensor<{m}x{n}x{out_type}>) -> tensor<{m}x{n}x{out_type}>\n"
        f"  return %c : tensor<{m}x{n}x{out_type}>\n}}\n"
    )


PACKED_BITS = {"f4E2M1FN": 4, "f6E2M3FN": 6, "f6E3M2FN": 6, "i4": 4}


def packed_module(
    m: int, n: int, k: int, a_type: str = "f4E2M1FN", b_type: str | None = None, *, unsigned=False, offsets=False
) -> str:
    """C = A @ B^T (A M x K, B N x K: packed along K) of 4-bit operands (or fp8 x fp4), passed as
    IREE takes them: bytes (``tensor<MxK/2xi8>``, element 2i in the low nibble) bit-cast to
    ``tensor<MxKxf4E2M1FN>`` with ``flow.tensor.bitcast`` (IREE passes no 4/6-bit float tensor
    across the HAL boundary; an i4 argument it packs itself, so i4 is passed as such). The result
    is f32, or i32 for i4 (``unsigned``: zero-extended, ``cast_unsigned``). ``offsets``: each
    operand's bytes are first computed by a dispatch of their own (the bytes xor 0x5A), so IREE
    places them in one transient binding, B at a non-zero byte offset."""
    b_type = b_type or a_type
    out = "i32" if a_type == "i4" else "f32"
    zero = "0" if out == "i32" else "0.0"
    args, ops, names = [], [], []
    for name, rows, t in (("a", m, a_type), ("b", n, b_type)):
        bits = PACKED_BITS.get(t, 8)
        val = f"tensor<{rows}x{k}x{t}>"
        raw = f"tensor<{rows}x{k * bits // 8}xi8>" if bits < 8 and (t != "i4" or offsets) else val
        elem = raw[raw.rindex("x") + 1 : -1]
        args.append(f"%{name}0: {raw}")
        src = f"%{name}0"
        if offsets:
            ident = "affine_map<(i, j) -> (i, j)>"
            ops.append(
                f"  %{name}k = arith.constant dense<90> : {raw}\n"
                f"  %{name}e = tensor.empty() : {raw}\n"
                f"  %{name}1 = linalg.generic {{indexing_maps = [{ident}, {ident}, {ident}], "
                f'iterator_types = ["parallel", "parallel"]}} ins({src}, %{name}k : {raw}, {raw}) outs(%{name}e : {raw}) {{\n'
                f"  ^bb0(%v: {elem}, %w: {elem}, %o: {elem}):\n"
                f"    %s = arith.xori %v, %w : {elem}\n"
                f"    linalg.yield %s : {elem}\n"
                f"  }} -> {raw}\n"
            )
            src = f"%{name}1"
        if raw != val:
            ops.append(f"  %{name}2 = flow.tensor.bitcast {src} : {raw} -> {val}\n")
            src = f"%{name}2"
        names.append((src, val))
    c = f"tensor<{m}x{n}x{out}>"
    cast = " {cast = #linalg.type_fn<cast_unsigned>}" if unsigned else ""
    return (
        f"func.func @packed({', '.join(args)}) -> {c} {{\n"
        + "".join(ops)
        + f"  %zero = arith.constant {zero} : {out}\n"
        f"  %e = tensor.empty() : {c}\n"
        f"  %f0 = linalg.fill ins(%zero : {out}) outs(%e : {c}) -> {c}\n"
        "  %r = linalg.matmul indexing_maps = [affine_map<(d0, d1, d2) -> (d0, d2)>, affine_map<(d0, d1, d2) -> (d1, d2)>, "
        f"affine_map<(d0, d1, d2) -> (d0, d1)>]{cast} "
        f"ins({names[0][0]}, {names[1][0]} : {names[0][1]}, {names[1][1]}) outs(%f0 : {c}) -> {c}\n"
        f"  return %r : {c}\n}}\n"
    )


def scaled_module(
    m: int,
    n: int,
    k: int,
    *,
    order: str = "ab",
    offsets: bool = False,
    a_type: str = "f4E2M1FN",
    b_type: str = "f4E2M1FN",
) -> str:
    """MXFP4 (MXFP6, MXFP8: ``a_type`` / ``b_type`` f6E2M3FN ..., f8E4M3FN, f8E5M2) C = A @ B^T in IREE's
    scaled-matmul form (``linalg_forms.scaled_matmul``): A ``[M, K/32, 32]`` and B ``[N, K/32, 32]``
    (fp4 / fp6 passed as bytes and bit-cast, as IREE takes them), their E8M0 scales ``[M, K/32]`` and
    ``[N, K/32]``, body ``arith.scaling_extf`` of each with its scale, multiply, add. ``order``:
    the generic's inputs as (A, B, A-scales, B-scales) ("ab", IREE's own codegen takes only this
    one) or (A, A-scales, B, B-scales) ("asbs"). ``offsets``: the A bytes and B's scales computed
    by dispatches of their own (xor 0x5A), so they live in transient bindings."""
    kb = k // 32
    if offsets and a_type not in PACKED_BITS:
        raise ValueError("offsets: A is passed as fp4 bytes")
    a_t, b_t = f"tensor<{m}x{kb}x32x{a_type}>", f"tensor<{n}x{kb}x32x{b_type}>"
    # fp4 / fp6 are passed as bytes (16 / 24 a block) and bit-cast; fp8 as itself
    a_raw, b_raw = (
        f"tensor<{rows}x{kb}x{4 * PACKED_BITS[t]}xi8>" if t in PACKED_BITS else whole
        for rows, t, whole in ((m, a_type, a_t), (n, b_type, b_t))
    )
    sa_t, sb_t = f"tensor<{m}x{kb}xf8E8M0FNU>", f"tensor<{n}x{kb}xf8E8M0FNU>"
    c = f"tensor<{m}x{n}xf32>"
    ops = []
    a_src, sb_src = "%a0", "%sb"
    if offsets:
        ident3 = "affine_map<(i, j, l) -> (i, j, l)>"
        ident2 = "affine_map<(i, j) -> (i, j)>"
        ops.append(
            f"  %ak = arith.constant dense<90> : {a_raw}\n  %ae = tensor.empty() : {a_raw}\n"
            f"  %a1 = linalg.generic {{indexing_maps = [{ident3}, {ident3}, {ident3}], iterator_types = "
            f'["parallel", "parallel", "parallel"]}} ins(%a0, %ak : {a_raw}, {a_raw}) outs(%ae : {a_raw}) {{\n'
            "  ^bb0(%v: i8, %w: i8, %o: i8):\n    %s = arith.xori %v, %w : i8\n    linalg.yield %s : i8\n"
            f"  }} -> {a_raw}\n"
            f"  %sbe = tensor.empty() : {sb_t}\n"
            f"  %sb1 = linalg.generic {{indexing_maps = [{ident2}, {ident2}], iterator_types = "
            f'["parallel", "parallel"]}} ins(%sb : {sb_t}) outs(%sbe : {sb_t}) {{\n'
            "  ^bb0(%v: f8E8M0FNU, %o: f8E8M0FNU):\n    %i = arith.bitcast %v : f8E8M0FNU to i8\n"
            "    %one = arith.constant 1 : i8\n    %j = arith.addi %i, %one : i8\n"
            "    %s = arith.bitcast %j : i8 to f8E8M0FNU\n    linalg.yield %s : f8E8M0FNU\n"
            f"  }} -> {sb_t}\n"
        )
        a_src, sb_src = "%a1", "%sb1"
    names = {}
    for name, src, raw, t in (("a", a_src, a_raw, a_t), ("b", "%b0", b_raw, b_t)):
        if raw != t:
            ops.append(f"  %{name} = flow.tensor.bitcast {src} : {raw} -> {t}\n")
        names[name] = f"%{name}" if raw != t else src
    dims = "(d0, d1, d2, d3)"
    maps = {
        "a": f"affine_map<{dims} -> (d0, d2, d3)>",
        "b": f"affine_map<{dims} -> (d1, d2, d3)>",
        "sa": f"affine_map<{dims} -> (d0, d2)>",
        "sb": f"affine_map<{dims} -> (d1, d2)>",
    }
    vals = {
        "a": (names["a"], a_t, a_type),
        "b": (names["b"], b_t, b_type),
        "sa": ("%sa", sa_t, "f8E8M0FNU"),
        "sb": (sb_src, sb_t, "f8E8M0FNU"),
    }
    seq = ["a", "b", "sa", "sb"] if order == "ab" else ["a", "sa", "b", "sb"]
    bargs = ", ".join(f"%x{r}: {vals[r][2]}" for r in seq)
    return (
        f"func.func @mx(%a0: {a_raw}, %b0: {b_raw}, %sa: {sa_t}, %sb: {sb_t}) -> {c} {{\n"
        + "".join(ops)
        + "  %zero = arith.constant 0.0 : f32\n"
        f"  %e = tensor.empty() : {c}\n"
        f"  %f = linalg.fill ins(%zero : f32) outs(%e : {c}) -> {c}\n"
        f"  %r = linalg.generic {{indexing_maps = [{', '.join(maps[r] for r in seq)}, affine_map<{dims} -> (d0, d1)>], "
        'iterator_types = ["parallel", "parallel", "reduction", "reduction"]}\n'
        f"      ins({', '.join(vals[r][0] for r in seq)} : {', '.join(vals[r][1] for r in seq)}) outs(%f : {c}) {{\n"
        f"  ^bb0({bargs}, %acc: f32):\n"
        f"    %xs = arith.scaling_extf %xa, %xsa : {a_type}, f8E8M0FNU to f32\n"
        f"    %ys = arith.scaling_extf %xb, %xsb : {b_type}, f8E8M0FNU to f32\n"
        "    %p = arith.mulf %xs, %ys : f32\n"
        "    %s = arith.addf %acc, %p : f32\n"
        "    linalg.yield %s : f32\n"
        f"  }} -> {c}\n"
        f"  return %r : {c}\n}}\n"
    )


def marker_module() -> str:
    """A one-kernel module (``mmaflow_marker``: 4 floats doubled) that `mmaflow bench` launches
    between builds, so that one Nsight Compute run can tell the builds' kernels apart
    (``ncu.kernel_times``)."""
    return """func.func @mmaflow_marker(%x: tensor<4xf32>) -> tensor<4xf32> {
  %e = tensor.empty() : tensor<4xf32>
  %r = linalg.generic {indexing_maps = [affine_map<(i) -> (i)>, affine_map<(i) -> (i)>], iterator_types = ["parallel"]}
       ins(%x : tensor<4xf32>) outs(%e : tensor<4xf32>) {
  ^bb0(%a: f32, %b: f32):
    %s = arith.addf %a, %a : f32
    linalg.yield %s : f32
  } -> tensor<4xf32>
  return %r : tensor<4xf32>
}
"""


def matmul_module(
    m,
    n,
    k,
    in_type="f16",
    out_type="f32",
    *,
    transpose_a=False,
    transpose_b=False,
    batch=0,
    unsigned=False,
    generic=False,
    shared=False,
    b_type=None,
) -> str:
    """A linalg matmul module (optionally transposed operands, batch, unsigned i8 inputs, or one
    argument feeding both operands when ``shared``: A @ A, A @ A^T; ``b_type``: B's element type
    when it differs from A's, e.g. f8E4M3FN x f8E5M2); plain ones as linalg.matmul unless ``generic``."""
    b_type = b_type or in_type
    if not (transpose_a or transpose_b or batch or unsigned or generic or shared or b_type != in_type):
        return matmul_source(m, n, k, in_type, out_type)
    lead = f"{batch}x" if batch else ""
    a_shape = f"{lead}{k}x{m}" if transpose_a else f"{lead}{m}x{k}"
    b_shape = f"{lead}{n}x{k}" if transpose_b else f"{lead}{k}x{n}"
    c_shape = f"{lead}{m}x{n}"
    if shared and a_shape != b_shape:
        raise ValueError(f"one tensor cannot be both A ({a_shape}) and B ({b_shape})")
    b_dims = "b, " if batch else ""
    dims = "(b, m, n, k)" if batch else "(m, n, k)"
    a_map = f"affine_map<{dims} -> ({b_dims}{'k, m' if transpose_a else 'm, k'})>"
    b_map = f"affine_map<{dims} -> ({b_dims}{'n, k' if transpose_b else 'k, n'})>"
    c_map = f"affine_map<{dims} -> ({b_dims}m, n)>"
    iters = ('"parallel", ' if batch else "") + '"parallel", "parallel", "reduction"'
    zero = "0" if out_type.startswith("i") else "0.0"
    if in_type.startswith("i"):
        ext = "arith.extui" if unsigned else "arith.extsi"
        mul, add = "arith.muli", "arith.addi"
    else:
        ext, mul, add = "arith.extf", "arith.mulf", "arith.addf"
    if in_type == out_type:  # no widening (f16 x f16 -> f16)
        conv, xe, ye = "", "%x", "%y"
    else:
        conv = f"    %xe = {ext} %x : {in_type} to {out_type}\n    %ye = {ext} %y : {b_type} to {out_type}\n"
        xe, ye = "%xe", "%ye"
    args = f"%a: tensor<{a_shape}x{in_type}>" + ("" if shared else f", %b: tensor<{b_shape}x{b_type}>")
    b_arg = "%a" if shared else "%b"
    return (
        f"func.func @matmul({args}) -> tensor<{c_shape}x{out_type}> {{\n"
        f"  %zero = arith.constant {zero} : {out_type}\n"
        f"  %e = tensor.empty() : tensor<{c_shape}x{out_type}>\n"
        f"  %f = linalg.fill ins(%zero : {out_type}) outs(%e : tensor<{c_shape}x{out_type}>) -> tensor<{c_shape}x{out_type}>\n"
        f"  %r = linalg.generic {{indexing_maps = [{a_map}, {b_map}, {c_map}], iterator_types = [{iters}]}}\n"
        f"       ins(%a, {b_arg} : tensor<{a_shape}x{in_type}>, tensor<{b_shape}x{b_type}>) outs(%f : tensor<{c_shape}x{out_type}>) {{\n"
        f"  ^bb0(%x: {in_type}, %y: {b_type}, %acc: {out_type}):\n"
        f"{conv}"
        f"    %p = {mul} {xe}, {ye} : {out_type}\n"
        f"    %s = {add} %acc, %p : {out_type}\n"
        f"    linalg.yield %s : {out_type}\n"
        f"  }} -> tensor<{c_shape}x{out_type}>\n"
        f"  return %r : tensor<{c_shape}x{out_type}>\n}}\n"
    )


def epilogue_module(
    m, n, k, in_type="f16", acc_type="f32", *, out_type, inputs=(), body: str, batch=0, transpose_b=False
) -> str:
    """A matmul followed by one elementwise linalg.generic (which IREE fuses into the dispatch).

    ``inputs``: (element type, dims) of the epilogue's extra tensors, dims drawn from "b", "m",
    "n" (a bias over columns is ("n",)). ``body``: the generic's body; it sees %acc (the
    matmul's element), %x0, %x1, ... (the inputs' elements) and must define %res : out_type."""
    mm = matmul_module(m, n, k, in_type, acc_type, transpose_b=transpose_b, batch=batch, generic=True)
    sizes = {"b": batch, "m": m, "n": n}
    loops = (["b"] if batch else []) + ["m", "n"]
    dims = ", ".join(f"d{i}" for i in range(len(loops)))
    c_shape = "x".join(str(sizes[d]) for d in loops)
    args, ins, types, maps, bargs = [], ["%r"], [f"tensor<{c_shape}x{acc_type}>"], [], []
    ident = f"affine_map<({dims}) -> ({dims})>"
    maps.append(ident)
    for i, (t, idims) in enumerate(inputs):
        shape = "x".join(str(sizes[d]) for d in idims)
        args.append(f"%in{i}: tensor<{shape}x{t}>")
        ins.append(f"%in{i}")
        types.append(f"tensor<{shape}x{t}>")
        maps.append(f"affine_map<({dims}) -> ({', '.join(f'd{loops.index(d)}' for d in idims)})>")
        bargs.append(f"%x{i}: {t}")
    maps.append(ident)
    head, rest = mm.split(") -> ", 1)
    head += "".join(", " + a for a in args)
    ret_t = f"tensor<{c_shape}x{out_type}>"
    rest = rest.split(" {\n", 1)[1]
    rest = rest.replace(f"  return %r : tensor<{c_shape}x{acc_type}>\n}}\n", "")
    iters = ", ".join(['"parallel"'] * len(loops))
    epi = (
        f"  %e2 = tensor.empty() : {ret_t}\n"
        f"  %res_t = linalg.generic {{indexing_maps = [{', '.join(maps)}], iterator_types = [{iters}]}}\n"
        f"       ins({', '.join(ins)} : {', '.join(types)}) outs(%e2 : {ret_t}) {{\n"
        f"  ^bb0(%acc: {acc_type}, {''.join(b + ', ' for b in bargs)}%o: {out_type}):\n"
        + "".join(f"    {line.strip()}\n" for line in body.strip().splitlines())
        + f"    linalg.yield %res : {out_type}\n"
        f"  }} -> {ret_t}\n"
        f"  return %res_t : {ret_t}\n}}\n"
    )
    return f"{head}) -> {ret_t} {{\n{rest}{epi}"


def dynamic_module(
    m: int | None = None,
    n: int | None = None,
    k: int | None = None,
    in_type: str = "f16",
    out_type: str = "f32",
    *,
    divisors: dict | None = None,
    bias: bool = False,
    transpose_b: bool = False,
) -> str:
    """C = A @ B where each of M, N, K left None is dynamic (``tensor<?x...>``). ``divisors``
    ({"m": 16, "k": 64, ...}) adds ``util.assume.int`` divisibility promises, which IREE carries
    into the dispatch. ``bias``: also add a bias over columns (f32, the epilogue IREE fuses).
    ``transpose_b``: B stored N x K (nn.Linear's weight), a linalg.matmul with indexing maps."""
    divisors = divisors or {}
    zero = "0" if out_type.startswith("i") else "0.0"
    dims = {"m": m, "n": n, "k": k}

    def t(a, b, elem):
        return f"tensor<{'?' if dims[a] is None else dims[a]}x{'?' if dims[b] is None else dims[b]}x{elem}>"

    b_dims = ("n", "k") if transpose_b else ("k", "n")
    t_a, t_b, t_c = t("m", "k", in_type), t(*b_dims, in_type), t("m", "n", out_type)
    args = [f"%a0: {t_a}", f"%b0: {t_b}"] + ([f"%bias: tensor<{'?' if n is None else n}xf32>"] if bias else [])
    lines = [
        f"func.func @matmul({', '.join(args)}) -> {t_c} {{",
        "  %c0 = arith.constant 0 : index",
        "  %c1 = arith.constant 1 : index",
    ]
    where = {"m": ("%a0", 0, t_a), "k": ("%a0", 1, t_a), "n": ("%b0", b_dims.index("n"), t_b)}
    for d in "mnk":
        if dims[d] is None:
            src, axis, ty = where[d]
            lines.append(f"  %{d}0 = tensor.dim {src}, %c{axis} : {ty}")
            lines.append(
                f"  %{d} = util.assume.int %{d}0<udiv = {divisors[d]}> : index"
                if d in divisors
                else f"  %{d} = arith.addi %{d}0, %c0 : index"
            )

    def dyn(*ds, suffix=""):
        return ", ".join(f"%{d}{suffix}" for d in ds if dims[d] is None)

    if dyn("m", "k"):
        lines.append(
            f"  %a = flow.tensor.reshape %a0 : {t_a}{{{dyn('m', 'k', suffix='0')}}} -> {t_a}{{{dyn('m', 'k')}}}"
        )
    else:
        lines.append(f"  %a = tensor.cast %a0 : {t_a} to {t_a}")
    if dyn(*b_dims):
        lines.append(f"  %b = flow.tensor.reshape %b0 : {t_b}{{{dyn(*b_dims, suffix='0')}}} -> {t_b}{{{dyn(*b_dims)}}}")
    else:
        lines.append(f"  %b = tensor.cast %b0 : {t_b} to {t_b}")
    maps = (
        " indexing_maps = [affine_map<(d0, d1, d2) -> (d0, d2)>, affine_map<(d0, d1, d2) -> (d1, d2)>, "
        "affine_map<(d0, d1, d2) -> (d0, d1)>]"
        if transpose_b
        else ""
    )
    lines += [
        f"  %zero = arith.constant {zero} : {out_type}",
        f"  %empty = tensor.empty({dyn('m', 'n')}) : {t_c}",
        f"  %acc = linalg.fill ins(%zero : {out_type}) outs(%empty : {t_c}) -> {t_c}",
        f"  %c = linalg.matmul{maps} ins(%a, %b : {t_a}, {t_b}) outs(%acc : {t_c}) -> {t_c}",
    ]
    if bias:
        tb = f"tensor<{'?' if n is None else n}xf32>"
        lines += [
            f"  %e2 = tensor.empty({dyn('m', 'n')}) : {t_c}",
            "  %r = linalg.generic {indexing_maps = [affine_map<(i, j) -> (i, j)>, affine_map<(i, j) -> (j)>, "
            'affine_map<(i, j) -> (i, j)>], iterator_types = ["parallel", "parallel"]}',
            f"       ins(%c, %bias : {t_c}, {tb}) outs(%e2 : {t_c}) {{",
            f"  ^bb0(%x: {out_type}, %y: f32, %o: {out_type}):",
            f"    %s = arith.addf %x, %y : {out_type}",
            f"    linalg.yield %s : {out_type}",
            f"  }} -> {t_c}",
            f"  return %r : {t_c}",
            "}",
        ]
    else:
        lines += [f"  return %c : {t_c}", "}"]
    return "\n".join(lines) + "\n"


def attention_module(
    batch: int, heads: int, seq: int, head_dim: int, dtype: str = "f16", *, kv_seq: int | None = None
) -> str:
    """``@attention(Q, K, V) -> O``, each ``(batch, heads, seq, head_dim)`` as PyTorch's
    ``scaled_dot_product_attention`` takes them (no mask, not causal, the default scale
    1/sqrt(head_dim)), spelled as IREE's torch input conversion lowers that op: batch and heads
    collapsed into one dim, ``iree_linalg_ext.attention`` with an f32 scale, O expanded back.
    ``kv_seq``: the keys' length when it differs from the queries'."""
    kv = seq if kv_seq is None else kv_seq
    q_t, kv_t = f"tensor<{batch}x{heads}x{seq}x{head_dim}x{dtype}>", f"tensor<{batch}x{heads}x{kv}x{head_dim}x{dtype}>"
    fq_t, fkv_t = (
        f"tensor<{batch * heads}x{seq}x{head_dim}x{dtype}>",
        f"tensor<{batch * heads}x{kv}x{head_dim}x{dtype}>",
    )
    dims = "(b, m, n, k1, k2)"
    maps = ", ".join(f"affine_map<{dims} -> ({r})>" for r in ("b, m, k1", "b, k2, k1", "b, k2, n", "", "b, m, n"))
    return (
        f"func.func @attention(%q: {q_t}, %k: {kv_t}, %v: {kv_t}) -> {q_t} {{\n"
        f"  %scale = arith.constant {1.0 / head_dim**0.5!r} : f32\n"
        f"  %q1 = tensor.collapse_shape %q [[0, 1], [2], [3]] : {q_t} into {fq_t}\n"
        f"  %k1 = tensor.collapse_shape %k [[0, 1], [2], [3]] : {kv_t} into {fkv_t}\n"
        f"  %v1 = tensor.collapse_shape %v [[0, 1], [2], [3]] : {kv_t} into {fkv_t}\n"
        f"  %e = tensor.empty() : {fq_t}\n"
        f"  %o = iree_linalg_ext.attention <{{indexing_maps = [{maps}]}}>\n"
        f"       ins(%q1, %k1, %v1, %scale : {fq_t}, {fkv_t}, {fkv_t}, f32) outs(%e : {fq_t}) {{\n"
        f"  ^bb0(%s: f32):\n"
        f"    iree_linalg_ext.yield %s : f32\n"
        f"  }} -> {fq_t}\n"
        f"  %r = tensor.expand_shape %o [[0, 1], [2], [3]] output_shape [{batch}, {heads}, {seq}, {head_dim}] "
        f": {fq_t} into {q_t}\n"
        f"  return %r : {q_t}\n}}\n"
    )


def torch_sdpa_module(
    batch: int, heads: int, seq: int, head_dim: int, dtype: str = "f16", *, kv_heads: int | None = None, causal=False
) -> str:
    """``@attention(Q, K, V) -> O`` as iree-turbine exports PyTorch's ``scaled_dot_product_attention(q, k, v,
    is_causal=causal, enable_gqa=kv_heads is not None)``: the torch dialect op itself, Q ``(batch, heads, seq,
    head_dim)``, K and V with ``kv_heads`` heads (the query heads sharing them in groups). IREE's torch input
    conversion lowers is_causal to an attention reading an additive mask and a dispatch of its own writing it
    (``compiler/core/causal.py``), and folds GQA's groups into the attention's rows."""
    kv = heads if kv_heads is None else kv_heads
    tq = f"!torch.vtensor<[{batch},{heads},{seq},{head_dim}],{dtype}>"
    tk = f"!torch.vtensor<[{batch},{kv},{seq},{head_dim}],{dtype}>"
    return (
        f"func.func @attention(%q: {tq}, %k: {tk}, %v: {tk}) -> {tq} {{\n"
        "  %none = torch.constant.none\n"
        "  %dropout = torch.constant.float 0.000000e+00\n"
        f"  %causal = torch.constant.bool {'true' if causal else 'false'}\n"
        f"  %gqa = torch.constant.bool {'false' if kv_heads is None else 'true'}\n"
        "  %o = torch.aten.scaled_dot_product_attention %q, %k, %v, %none, %dropout, %causal, %none, %gqa : "
        f"{tq}, {tk}, {tk}, !torch.none, !torch.float, !torch.bool, !torch.none, !torch.bool -> {tq}\n"
        f"  return %o : {tq}\n}}\n"
    )


def causal_attention_module(batch: int, heads: int, seq: int, head_dim: int, dtype: str = "f16") -> str:
    """``torch_sdpa_module`` with ``is_causal=True``, every head its own K and V."""
    return torch_sdpa_module(batch, heads, seq, head_dim, dtype, causal=True)


def decode_attention_module(
    batch: int,
    kv_heads: int,
    group: int,
    head_dim: int,
    dtype: str = "f16",
    *,
    q_len: int = 1,
    kv_seq: int | None = None,
    mask: str | None = None,
    v_transposed: bool = False,
) -> str:
    """``@decode_attention(Q, K, V[, mask]) -> O``: a decoder step's attention against its KV cache,
    spelled as IREE 3.13's torch input conversion lowers PyTorch's ``scaled_dot_product_attention(q,
    k, v, enable_gqa=True)`` (``e2e_tests/test_decode_attention.py`` compares the two): Q ``(batch,
    kv_heads * group, q_len, head_dim)``, K and V ``(batch, kv_heads, kv_seq, head_dim)`` broadcast
    to every query head of their group, batch and heads collapsed, the scale 1/sqrt(head_dim).
    IREE's dispatch formation then folds the broadcast away: the ``group`` query heads sharing a KV
    head become the attention's query rows. ``kv_seq`` None: the cache's length is a run-time size
    (``?``), as a serving step has it. ``mask``: None, "additive" (of ``dtype``) or "boolean" (i1),
    ``(batch, kv_heads * group, q_len, kv_seq)``. ``v_transposed``: V stored ``(batch, kv_heads,
    head_dim, kv_seq)`` (the keys innermost), as IREE lays out the cache it broadcasts for a decoder
    step exported by iree-turbine; the attention reads it so."""
    s = "?" if kv_seq is None else str(kv_seq)
    hq, bh = kv_heads * group, batch * kv_heads * group
    q_t, kv_t = f"tensor<{batch}x{hq}x{q_len}x{head_dim}x{dtype}>", f"tensor<{batch}x{kv_heads}x{s}x{head_dim}x{dtype}>"
    wide_t = f"tensor<{batch}x{kv_heads}x{group}x{s}x{head_dim}x{dtype}>"
    all_t = f"tensor<{batch}x{hq}x{s}x{head_dim}x{dtype}>"
    fq_t, fkv_t = f"tensor<{bh}x{q_len}x{head_dim}x{dtype}>", f"tensor<{bh}x{s}x{head_dim}x{dtype}>"
    # each of K and V: (its type, broadcast, per query head, flattened, the dim holding the keys)
    kv = {"k": (kv_t, wide_t, all_t, fkv_t, 2)}
    kv["v"] = (
        (
            f"tensor<{batch}x{kv_heads}x{head_dim}x{s}x{dtype}>",
            f"tensor<{batch}x{kv_heads}x{group}x{head_dim}x{s}x{dtype}>",
            f"tensor<{batch}x{hq}x{head_dim}x{s}x{dtype}>",
            f"tensor<{bh}x{head_dim}x{s}x{dtype}>",
            3,
        )
        if v_transposed
        else kv["k"]
    )
    m_elem = {"additive": dtype, "boolean": "i1", None: None}[mask]
    m_t, fm_t = f"tensor<{batch}x{hq}x{q_len}x{s}x{m_elem}>", f"tensor<{bh}x{q_len}x{s}x{m_elem}>"
    dims = "(b, m, n, k1, k2)"
    v_map = "b, n, k2" if v_transposed else "b, k2, n"
    parts = ["b, m, k1", "b, k2, k1", v_map, ""] + (["b, m, k2"] if mask else []) + ["b, m, n"]
    maps = ", ".join(f"affine_map<{dims} -> ({r})>" for r in parts)
    args = f"%q: {q_t}, %k: {kv['k'][0]}, %v: {kv['v'][0]}" + (f", %mask: {m_t}" if mask else "")
    lines = [
        f"func.func @decode_attention({args}) -> {q_t} {{",
        f"  %scale = arith.constant {1.0 / head_dim**0.5!r} : f32",
        "  %c2 = arith.constant 2 : index",
        "  %c3 = arith.constant 3 : index",
    ]
    for x in ("k", "v"):  # each KV head broadcast to its group of query heads, as torch's enable_gqa does
        kv_t, wide_t, all_t, fkv_t, keys_at = kv[x]
        size = f"%{x}_len" if kv_seq is None else ""
        if kv_seq is None:
            lines.append(f"  %{x}_len = tensor.dim %{x}, %c{keys_at} : {kv_t}")
        lines += [
            f"  %{x}_e = tensor.empty({size}) : {wide_t}",
            f"  %{x}_b = linalg.generic {{indexing_maps = [affine_map<(d0, d1, d2, d3, d4) -> (d0, d1, d3, d4)>, "
            "affine_map<(d0, d1, d2, d3, d4) -> (d0, d1, d2, d3, d4)>], iterator_types = "
            '["parallel", "parallel", "parallel", "parallel", "parallel"]} '
            f"ins(%{x} : {kv_t}) outs(%{x}_e : {wide_t}) {{",
            f"  ^bb0(%in: {dtype}, %out: {dtype}):",
            f"    linalg.yield %in : {dtype}",
            f"  }} -> {wide_t}",
            f"  %{x}_h = tensor.collapse_shape %{x}_b [[0], [1, 2], [3], [4]] : {wide_t} into {all_t}",
            f"  %{x}1 = tensor.collapse_shape %{x}_h [[0, 1], [2], [3]] : {all_t} into {fkv_t}",
        ]
    lines.append(f"  %q1 = tensor.collapse_shape %q [[0, 1], [2], [3]] : {q_t} into {fq_t}")
    if mask:
        lines.append(f"  %mask1 = tensor.collapse_shape %mask [[0, 1], [2], [3]] : {m_t} into {fm_t}")
    ins = "%q1, %k1, %v1, %scale" + (", %mask1" if mask else "")
    types = f"{fq_t}, {kv['k'][3]}, {kv['v'][3]}, f32" + (f", {fm_t}" if mask else "")
    lines += [
        f"  %e = tensor.empty() : {fq_t}",
        f"  %o = iree_linalg_ext.attention <{{indexing_maps = [{maps}]}}>",
        f"       ins({ins} : {types}) outs(%e : {fq_t}) {{",
        "  ^bb0(%x: f32):",
        "    iree_linalg_ext.yield %x : f32",
        f"  }} -> {fq_t}",
        f"  %r = tensor.expand_shape %o [[0, 1], [2], [3]] output_shape [{batch}, {hq}, {q_len}, {head_dim}] "
        f": {fq_t} into {q_t}",
        f"  return %r : {q_t}",
        "}",
    ]
    return "\n".join(lines) + "\n"


def _silu_mul_16(t: str, *, reciprocal: bool) -> dict:
    """silu(acc) * x0 computed in the 16-bit type ``t``: the accumulator truncated first."""
    div = (
        f"%rc = arith.divf %one, %d : {t}\n%s = arith.mulf %rc, %t : {t}\n"
        if reciprocal
        else f"%s = arith.divf %t, %d : {t}\n"
    )
    return dict(
        out_type=t,
        inputs=[(t, ("m", "n"))],
        body=f"%t = arith.truncf %acc : f32 to {t}\n%ng = arith.negf %t : {t}\n%ex = math.exp %ng : {t}\n"
        f"%one = arith.constant 1.0 : {t}\n%d = arith.addf %ex, %one : {t}\n"
        + div
        + f"%res = arith.mulf %s, %x0 : {t}",
    )


# Named epilogues, for `mmaflow bench --checks` (the module side here, the numpy side in
# EPILOGUE_REFERENCES: both halves of a check must agree on the name only).
EPILOGUES = {
    # bias over columns + relu, f32 accumulator stored as f16
    "bias_n_relu_f16": dict(
        out_type="f16",
        inputs=[("f32", ("n",))],
        body="%t = arith.addf %acc, %x0 : f32\n%z = arith.maximumf %t, %zero : f32\n"
        "%res = arith.truncf %z : f32 to f16",
    ),
    # bias over columns + erf gelu, stored as f16 (GPT-2's MLP up-projection, fused)
    "bias_n_gelu_f16": dict(
        out_type="f16",
        inputs=[("f32", ("n",))],
        body="%t = arith.addf %acc, %x0 : f32\n%c = arith.constant 0.7071067812 : f32\n"
        "%u = arith.mulf %t, %c : f32\n%er = math.erf %u : f32\n"
        "%one = arith.constant 1.0 : f32\n%p = arith.addf %er, %one : f32\n"
        "%h = arith.constant 0.5 : f32\n%v = arith.mulf %t, %h : f32\n"
        "%res0 = arith.mulf %v, %p : f32\n%res = arith.truncf %res0 : f32 to f16",
    ),
    # erf gelu
    "gelu_erf": dict(
        out_type="f32",
        body="%c = arith.constant 0.7071067812 : f32\n%u = arith.mulf %acc, %c : f32\n"
        "%er = math.erf %u : f32\n%one = arith.constant 1.0 : f32\n%p = arith.addf %er, %one : f32\n"
        "%h = arith.constant 0.5 : f32\n%v = arith.mulf %acc, %h : f32\n%res = arith.mulf %v, %p : f32",
    ),
    # erf alone (of the accumulator scaled into erf's curved range): no 1 + erf pair, so on NVIDIA
    # the two-piece erf of fast_math.emit_erf, which GELU no longer takes
    "erf_scaled": dict(
        out_type="f32", body="%c = arith.constant 0.125 : f32\n%s = arith.mulf %acc, %c : f32\n%res = math.erf %s : f32"
    ),
    # SwiGLU's silu(gate) * up fused into the gate projection (an M x N f16 input), in f32
    "silu_mul_f16": dict(
        out_type="f16",
        inputs=[("f16", ("m", "n"))],
        body="%ng = arith.negf %acc : f32\n%ex = math.exp %ng : f32\n%one = arith.constant 1.0 : f32\n"
        "%d = arith.addf %ex, %one : f32\n%s = arith.divf %acc, %d : f32\n%w = arith.extf %x0 : f16 to f32\n"
        "%v = arith.mulf %s, %w : f32\n%res = arith.truncf %v : f32 to f16",
    ),
    # silu in the 16-bit type, as iree-turbine exports a Llama MLP (e2e_tests/models' llama_mlp): x / (1 + e)
    # in f16 and bf16, and x * (1 / (1 + e)) as that module spells it
    "silu_mul_f16math": _silu_mul_16("f16", reciprocal=False),
    "silu_mul_bf16math": _silu_mul_16("bf16", reciprocal=False),
    "silu_mul_f16recip": _silu_mul_16("f16", reciprocal=True),
    # i32 accumulator -> f32, scaled per column (dequantization)
    "dequant_n": dict(
        out_type="f32",
        inputs=[("f32", ("n",))],
        body="%fl = arith.sitofp %acc : i32 to f32\n%res = arith.mulf %fl, %x0 : f32",
    ),
}


def weight_only_module(
    m: int,
    n: int,
    k: int,
    group: int,
    *,
    q_type: str = "i4",
    act: str = "f16",
    signed: bool = False,
    zero_point: bool = True,
    acc: str = "f32",
    as_bytes: bool = True,
    unit_m: bool = False,
    param_type: str | None = None,
    per_channel: bool = False,
    dynamic_m: bool = False,
    linear: bool = False,
) -> str:
    """``@weight_only(x, w, scale[, zero]) -> x @ dequant(w)^T``: a weight-only quantized linear layer
    as IREE's own dequant-matmul tests write it. ``w`` (N x K/G x G, ``q_type``) turns into ``act``
    by ``(w - zero) * scale`` (``w * scale`` without ``zero_point``), per row and group of G along K
    (``uitofp`` / ``sitofp`` as ``signed`` says); the contraction accumulates in ``acc`` (f32:
    extended operands). ``as_bytes``: ``w`` arrives as i8 bytes (N x K/G x G*bits/8) bitcast to
    ``q_type`` (sub-byte tensors at the module boundary, as IREE's tests pass them); ``unit_m``: x
    is K alone (IREE then drops M = 1 from the dispatch); ``param_type``: the parameters' type when
    not ``act`` (f32: the weight converts to f32, the result is truncated to ``act``);
    ``per_channel``: one group per row (``w`` N x K, parameters N; ``group`` is ignored);
    ``dynamic_m``: M a run-time size (the batch of a serving step; ``m`` is ignored); ``linear``: the
    contraction as torch's ``F.linear`` on dequantized weights reaches IREE (an iree-turbine export): a
    ``linalg.matmul`` with B's map transposed, its f32 result truncated to ``act`` (per channel, M x K
    activations)."""
    if linear and (not per_channel or unit_m or dynamic_m or acc != "f32" or act == "f32"):
        raise ValueError("linear: per_channel weights, a static M x K x and f32 accumulation of f16 / bf16")
    bits = {"i4": 4, "i8": 8}[q_type]
    pt = param_type or act
    if per_channel:
        wdims, pdims, group = [n, k], [n], k
        loops, wmap, pmap = "(n, k)", "(n, k)", "(n)"
    else:
        wdims, pdims = [n, k // group, group], [n, k // group]
        loops, wmap, pmap = "(n, g, k)", "(n, g, k)", "(n, g)"
    shape = "x".join(map(str, wdims))
    w_t, d_t, p_t = f"tensor<{shape}x{q_type}>", f"tensor<{shape}x{act}>", f"tensor<{'x'.join(map(str, pdims))}x{pt}>"
    a_dims = wdims[1:] if unit_m else ["?" if dynamic_m else m] + wdims[1:]
    ms = "?" if dynamic_m else m
    x_t = f"tensor<{k}x{act}>" if unit_m else f"tensor<{ms}x{k}x{act}>"
    a_t = f"tensor<{'x'.join(map(str, a_dims))}x{act}>"
    o_t = f"tensor<{n}x{acc}>" if unit_m else f"tensor<{ms}x{n}x{acc}>"
    byte_shape = "x".join(map(str, wdims[:-1] + [wdims[-1] * bits // 8]))
    w_arg = f"%wb: tensor<{byte_shape}xi8>" if as_bytes else f"%w: {w_t}"
    params = ", %s: " + p_t + (f", %z: {p_t}" if zero_point else "")
    lines = [f"func.func @weight_only(%x: {x_t}, {w_arg}{params}) -> {o_t} {{"]
    if dynamic_m:
        lines += ["  %c0 = arith.constant 0 : index", f"  %m = tensor.dim %x, %c0 : {x_t}"]
    if as_bytes:
        lines.append(f"  %w = flow.tensor.bitcast %wb : tensor<{byte_shape}xi8> -> {w_t}")
    ins, tys = ("%w, %s, %z", f"{w_t}, {p_t}, {p_t}") if zero_point else ("%w, %s", f"{w_t}, {p_t}")
    maps = [wmap, pmap] + ([pmap] if zero_point else []) + [wmap]
    iters = ", ".join(['"parallel"'] * len(wdims))
    conv = "sitofp" if signed else "uitofp"
    last = "%d" if pt == act else "%d0"
    body = [f"    %f = arith.{conv} %q : {q_type} to {pt}"]
    if zero_point:
        body += [f"    %c = arith.subf %f, %zp : {pt}", f"    {last} = arith.mulf %c, %sc : {pt}"]
    else:
        body += [f"    {last} = arith.mulf %f, %sc : {pt}"]
    if pt != act:
        body.append(f"    %d = arith.truncf %d0 : {pt} to {act}")
    lines += [
        f"  %e = tensor.empty() : {d_t}",
        f"  %deq = linalg.generic {{indexing_maps = [{', '.join(f'affine_map<{loops} -> {x}>' for x in maps)}], "
        f"iterator_types = [{iters}]}} ins({ins} : {tys}) outs(%e : {d_t}) {{",
        f"  ^bb0(%q: {q_type}, %sc: {pt}" + (f", %zp: {pt}" if zero_point else "") + f", %o: {act}):",
        *body,
        "    linalg.yield %d : " + act,
        f"  }} -> {d_t}",
    ]
    if per_channel:  # A is x itself, K in one loop
        a_val, a_t, kl = "%x", x_t, "k"
    else:  # A expanded to (M,) K/G x G, as the weights
        a_val, kl = "%a", "g, k"
        lines.append(
            f"  %a = tensor.expand_shape %x [[0, 1]] output_shape [{k // group}, {group}] : {x_t} into {a_t}"
            if unit_m
            else f"  %a = tensor.expand_shape %x [[0], [1, 2]] output_shape [{'%m' if dynamic_m else m}, {k // group}, {group}] : "
            f"{x_t} into {a_t}"
        )
    reductions = ['"reduction"'] * len(kl.split(", "))
    if unit_m:
        lmaps = [f"(n, {kl}) -> ({kl})", f"(n, {kl}) -> (n, {kl})", f"(n, {kl}) -> (n)"]
        citers = ", ".join(['"parallel"'] + reductions)
    else:
        lmaps = [f"(m, n, {kl}) -> (m, {kl})", f"(m, n, {kl}) -> (n, {kl})", f"(m, n, {kl}) -> (m, n)"]
        citers = ", ".join(['"parallel"', '"parallel"'] + reductions)
    mul = (
        [
            f"    %ae = arith.extf %av : {act} to {acc}",
            f"    %be = arith.extf %bv : {act} to {acc}",
            f"    %p = arith.mulf %ae, %be : {acc}",
        ]
        if acc != act
        else [f"    %p = arith.mulf %av, %bv : {acc}"]
    )
    if linear:
        y_t = f"tensor<{m}x{n}x{act}>"
        ident = "affine_map<(m, n) -> (m, n)>"
        lines[0] = lines[0].replace(f"-> {o_t} {{", f"-> {y_t} {{")
        lines += [
            f"  %zero = arith.constant 0.0 : {acc}",
            f"  %e2 = tensor.empty() : {o_t}",
            f"  %init = linalg.fill ins(%zero : {acc}) outs(%e2 : {o_t}) -> {o_t}",
            "  %r = linalg.matmul indexing_maps = [affine_map<(m, n, k) -> (m, k)>, affine_map<(m, n, k) -> (n, k)>, "
            f"affine_map<(m, n, k) -> (m, n)>] ins(%x, %deq : {x_t}, {d_t}) outs(%init : {o_t}) -> {o_t}",
            f"  %e3 = tensor.empty() : {y_t}",
            f'  %y = linalg.generic {{indexing_maps = [{ident}, {ident}], iterator_types = ["parallel", "parallel"]}} '
            f"ins(%r : {o_t}) outs(%e3 : {y_t}) {{",
            f"  ^bb0(%rv: {acc}, %yv: {act}):",
            f"    %t = arith.truncf %rv : {acc} to {act}",
            f"    linalg.yield %t : {act}",
            f"  }} -> {y_t}",
            f"  return %y : {y_t}",
            "}",
        ]
        return "\n".join(lines) + "\n"
    lines += [
        f"  %zero = arith.constant 0.0 : {acc}",
        f"  %e2 = tensor.empty({'%m' if dynamic_m else ''}) : {o_t}",
        f"  %init = linalg.fill ins(%zero : {acc}) outs(%e2 : {o_t}) -> {o_t}",
        f"  %r = linalg.generic {{indexing_maps = [{', '.join(f'affine_map<{x}>' for x in lmaps)}], iterator_types = "
        f"[{citers}]}} ins({a_val}, %deq : {a_t}, {d_t}) outs(%init : {o_t}) {{",
        f"  ^bb0(%av: {act}, %bv: {act}, %ov: {acc}):",
        *mul,
        f"    %t = arith.addf %ov, %p : {acc}",
        f"    linalg.yield %t : {acc}",
        f"  }} -> {o_t}",
        f"  return %r : {o_t}",
        "}",
    ]
    return "\n".join(lines) + "\n"
