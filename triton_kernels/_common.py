"""What every kernel family shares: block sizes per mode, collapsing strided layouts, passing
float64 scalars, and the N-d strided index math.

Kernels see tensors only as pointers plus (shape, strides) tuples; the Triton interpreter and
the GPU compiler both accept tuple arguments, so one kernel handles any rank.
"""
from __future__ import annotations

import os
import struct

import triton
import triton.language as tl

from ..runtime import launch_log

INTERPRET = os.environ.get("TRITON_INTERPRET", "0") not in ("", "0")

# The interpreter pays per program, not per element: few, wide blocks. The GPU wants
# enough programs to fill its SMs and blocks that fit registers.
# When launches are recorded for tools/sm90_compile.py, or compiled for sm_90 one by one on the
# simulated device (TRITENSOR_SIM_COMPILE=1), the interpreter runs with the GPU's block sizes too,
# so that what is compiled is what a GPU would compile (the results are the same; only the
# interpreter's speed changes).
GPU_SHAPES = (not INTERPRET or launch_log.PATH is not None
              or os.environ.get("TRITENSOR_SIM_COMPILE", "0").strip() not in ("", "0"))


def per_mode(interpreter, gpu):
    """A tuning constant: ``interpreter`` in CPU mode, ``gpu`` on a GPU (or when recording)."""
    return gpu if GPU_SHAPES else interpreter


ELEMENTWISE_BLOCK = per_mode(32768, 1024)
# The interpreter's widest block for lane-independent kernels. Each program costs about a
# millisecond of Triton front end whatever its width, and NumPy's per-lane cost stays flat up
# to about 2**18 lanes (the temporaries still fit the cache) and doubles past it: measured with
# a 1M-element cast/add/mul_ (ms, min of 5): 2**15: 25-27, 2**16: 16-18, 2**17: 11-13,
# 2**18: 9-10, 2**19: 21-30, 2**20: 27-30.
INTERPRETER_WIDE_BLOCK = 1 << 18
# What one more program costs the interpreter, in lanes' worth of work (about half a
# millisecond, from the same measurement): a tensor just past a block boundary is cheaper in
# three half blocks than in two full ones, the second almost all masked.
INTERPRETER_PROGRAM_COST = 1 << 16


def cdiv(a: int, b: int) -> int:
    """``ceil(a / b)`` for ints: ``triton.cdiv`` is a ConstexprFunction, ten times slower on the host."""
    return -(-a // b)


def next_pow2(n: int) -> int:
    """The smallest power of two >= ``n`` (1 for n <= 1), as ``triton.next_power_of_2`` but cheap."""
    return 1 << (n - 1).bit_length() if n > 1 else 1


def elementwise_block(n: int) -> int:
    """The block for a lane-independent kernel over ``n`` elements (each output element depends
    on its own lanes only, so the block size cannot change a result bit).

    GPU: always ``ELEMENTWISE_BLOCK`` (one compiled variant). Interpreter: it computes every lane
    of a block, masked or not, so a small tensor gets the smallest power of two that covers it;
    a large one the power of two up to ``INTERPRETER_WIDE_BLOCK`` that computes the fewest lanes,
    counting each program as ``INTERPRETER_PROGRAM_COST`` lanes more.
    """
    if GPU_SHAPES:
        return ELEMENTWISE_BLOCK
    block = next_pow2(max(min(n, INTERPRETER_WIDE_BLOCK), 1))
    best, cost = block, cdiv(n, block) * (block + INTERPRETER_PROGRAM_COST)
    while block > 1024:
        block //= 2
        c = cdiv(n, block) * (block + INTERPRETER_PROGRAM_COST)
        if c < cost:
            best, cost = block, c
    return best


def grid_1d(n: int, block: int) -> tuple:
    return (max(1, cdiv(n, block)),)


def collapse(shape, *strides):
    """Merge dims that are contiguous in *every* operand and drop size-1 dims.

    Returns ``(shape, [strides per operand], contiguous)`` where ``contiguous`` means one
    flat dim with unit stride everywhere, which kernels index without any div/mod.
    """
    dims = [(n, [s[i] for s in strides]) for i, n in enumerate(shape) if n != 1]
    merged: list = []
    for n, st in dims:
        if merged:
            pn, pst = merged[-1]
            if all(ps == s * n for ps, s in zip(pst, st)):
                merged[-1] = (pn * n, st)
                continue
        merged.append((n, st))
    if not merged:
        merged = [(1, [1] * len(strides))]
    out_shape = tuple(n for n, _ in merged)
    out_strides = [tuple(st[k] for _, st in merged) for k in range(len(strides))]
    contiguous = len(out_shape) == 1 and all(s[0] == 1 for s in out_strides)
    return out_shape, out_strides, contiguous


def needs_int64(shape, *strides) -> bool:
    """True when an element index or a byte-free element offset may not fit in int32."""
    n = 1
    for s in shape:
        n *= s
    if n >= 2**31 - 1:
        return True
    for st in strides:
        if sum((d - 1) * abs(s) for d, s in zip(shape, st)) >= 2**31 - 1:
            return True
    return False


def f64_bits(x: float) -> int:
    """A float64 as its signed int64 bit pattern: Triton passes Python floats as fp32."""
    return struct.unpack("<q", struct.pack("<d", float(x)))[0]


@triton.jit
def load_f64_scalar(bits):
    """Undo :func:`f64_bits` inside a kernel (small patterns arrive as int32)."""
    return bits.to(tl.int64).to(tl.float64, bitcast=True)


@triton.jit
def float_to_int(v, DST: tl.constexpr):
    """A floating value as the integer dtype ``DST``, the same in both modes:
    truncation toward zero, saturated at the type's limits (inf -> max, -inf -> min), NaN -> 0;
    unsigned types take negative values wrapped from the signed conversion, as PyTorch's CPU casts.

    That is what the GPU's conversion (``cvt.rzi.s32.f32`` and kin) does; NumPy, and so the
    interpreter, gives INT_MIN for all three. torch leaves it undefined (and differs between CPU
    and CUDA); tritensor defines it, as the hardware does.
    """
    if v.dtype.primitive_bitwidth < 32:
        v = v.to(tl.float32)  # fp16/bf16: exact in fp32, and 2**31 / 2**63 are fp32 numbers
    if DST == tl.uint64:
        # the upper half [2**63, 2**64) has the top bit set: its offset from 2**63 converted, then moved down
        # by 2**63 in int64 (the same bits); below it as int64, negatives wrapped (-1.0 -> 2**64 - 1) as
        # PyTorch's CPU casts do, 2**64 and up saturated
        upper = (v - 9223372036854775808.0).to(tl.int64) - 9223372036854775807 - 1
        lower = tl.where(v < -9223372036854775808.0, -9223372036854775808, v.to(tl.int64))
        r = tl.where(v >= 18446744073709551616.0, -1, tl.where(v >= 9223372036854775808.0, upper, lower))
    elif DST == tl.int64 or DST == tl.uint32:
        # uint32 through int64: its whole range, and negatives wrap as in the small types
        big = v >= 9223372036854775808.0
        r = tl.where(big, 9223372036854775807, tl.where(v < -9223372036854775808.0, -9223372036854775808,
                                                         v.to(tl.int64)))
    else:
        # int32; uint8/int8/int16 go through it and wrap (two's complement) on the final cast, as
        # PyTorch's CPU casts do (-1.0 -> 255 in uint8): a direct conversion past a small type's
        # range is undefined on a GPU
        r = tl.where(v >= 2147483648.0, 2147483647, tl.where(v < -2147483648.0, -2147483648, v.to(tl.int32)))
    return tl.where(v != v, 0, r).to(DST)


@triton.jit
def linear_index(BLOCK: tl.constexpr, INT64: tl.constexpr):
    pid = tl.program_id(0)
    if INT64:
        pid = pid.to(tl.int64)
    return pid * BLOCK + tl.arange(0, BLOCK)


@triton.jit
def strided_offset(lin, shape, strides, NDIM: tl.constexpr):
    """Element offset of flat (row-major) index ``lin`` in a tensor of ``shape``/``strides``."""
    off = tl.zeros_like(lin)
    rem = lin
    for d in tl.static_range(NDIM - 1, -1, -1):
        off += (rem % shape[d]) * strides[d]
        rem = rem // shape[d]
    return off


@triton.jit
def strided_offset2(lin, shape, sa, sb, NDIM: tl.constexpr):
    """Offsets of ``lin`` in two operands that share ``shape``: one div/mod per dim."""
    oa = tl.zeros_like(lin)
    ob = tl.zeros_like(lin)
    rem = lin
    for d in tl.static_range(NDIM - 1, -1, -1):
        i = rem % shape[d]
        rem = rem // shape[d]
        oa += i * sa[d]
        ob += i * sb[d]
    return oa, ob


@triton.jit
def strided_offset3(lin, shape, sa, sb, sc, NDIM: tl.constexpr):
    """Offsets of ``lin`` in three operands that share ``shape``."""
    oa = tl.zeros_like(lin)
    ob = tl.zeros_like(lin)
    oc = tl.zeros_like(lin)
    rem = lin
    for d in tl.static_range(NDIM - 1, -1, -1):
        i = rem % shape[d]
        rem = rem // shape[d]
        oa += i * sa[d]
        ob += i * sb[d]
        oc += i * sc[d]
    return oa, ob, oc


@triton.jit
def strided_offset4(lin, shape, sa, sb, sc, sd, NDIM: tl.constexpr):
    """Offsets of ``lin`` in four operands that share ``shape``."""
    oa = tl.zeros_like(lin)
    ob = tl.zeros_like(lin)
    oc = tl.zeros_like(lin)
    od = tl.zeros_like(lin)
    rem = lin
    for d in tl.static_range(NDIM - 1, -1, -1):
        i = rem % shape[d]
        rem = rem // shape[d]
        oa += i * sa[d]
        ob += i * sb[d]
        oc += i * sc[d]
        od += i * sd[d]
    return oa, ob, oc, od


# Hopper's (sm_90) shared memory per block, the opt-in maximum: what an autotune config of the
# TMA kernels (matmul_tma.py, attention_tma.py) may use.
HOPPER_SMEM_BYTES = 232448

# Shared by the GEMM-shaped kernels (matmul.py, matmul_tma.py, conv.py).


@triton.jit
def check_index(i, mask, low, size, err, header, CHECK: tl.constexpr):
    """The lanes of ``mask`` whose index ``i`` lies in [low, size) (``low`` is -size where negative
    indices wrap, else 0). With ``CHECK`` (an index tensor in device memory, not checked on the
    host), a lane outside is also recorded in the device's error flag ``err`` (int64,
    ``runtime/device_asserts.py``), which the host reads at its next sync: the op claims slot 0
    with its ``header`` unless another op holds it, then folds its largest too-large index (+ 1)
    into slot 1 and its smallest negative one into slot 2. Only a program with a bad lane touches
    the flag. Callers mask every access with the result, so no lane reads or writes out of bounds."""
    ok = (i >= low) & (i < size)
    if CHECK:
        bad = mask & ~ok
        if tl.max(bad.to(tl.int32), axis=0) > 0:
            i64 = i.to(tl.int64)
            zero = tl.zeros_like(i64)
            # A CAS takes no mask: the good lanes compare against -1, which slot 0 never holds.
            old = tl.atomic_cas(err + zero, tl.where(bad, zero, zero - 1), zero + header)
            own = bad & ((old == 0) | (old == header))
            tl.atomic_max(err + 1 + zero, i64 + 1, mask=own & (i64 >= size), sem="relaxed")
            tl.atomic_min(err + 2 + zero, i64, mask=own & (i64 < low), sem="relaxed")
    return mask & ok


@triton.jit
def apply_epilogue(acc, bias_ptr, offs_n, N, stride_bias, HAS_BIAS: tl.constexpr, ACTIVATION: tl.constexpr):
    """acc (fp32/fp64 tile) + bias[None, :], then relu or exact (erf) gelu."""
    if HAS_BIAS:
        bias = tl.load(bias_ptr + offs_n * stride_bias, mask=offs_n < N, other=0.0)
        acc = acc + bias.to(acc.dtype)[None, :]
    if ACTIVATION == "relu":
        acc = tl.where(acc < 0, 0.0, acc)
    elif ACTIVATION == "gelu":
        acc = 0.5 * acc * (1.0 + tl.erf(acc * 0.7071067811865476))
    return acc


@triton.jit
def dot_over_k(acc, a_ptrs, b_ptrs, k_len, stride_ak, stride_bk, offs_k, INPUT_PRECISION: tl.constexpr,
               UPCAST: tl.constexpr, BLOCK_K: tl.constexpr):
    """acc += A[:, :k_len] @ B[:k_len, :], BLOCK_K columns of A (rows of B) a step, masked past
    k_len: the K loop of the matmul kernels (matmul.py, matmul_splitk.py). UPCAST: the operands
    in acc's dtype first (the interpreter's dot of fp16/bf16)."""
    for k in range(0, tl.cdiv(k_len, BLOCK_K)):
        k_left = k_len - k * BLOCK_K
        a = tl.load(a_ptrs, mask=offs_k[None, :] < k_left, other=0.0)
        b = tl.load(b_ptrs, mask=offs_k[:, None] < k_left, other=0.0)
        if UPCAST:
            a = a.to(acc.dtype)
            b = b.to(acc.dtype)
        acc = tl.dot(a, b, acc, input_precision=INPUT_PRECISION, out_dtype=acc.dtype)
        a_ptrs += BLOCK_K * stride_ak
        b_ptrs += BLOCK_K * stride_bk
    return acc


@triton.jit
def grouped_tile(pid, M, N, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, GROUP_M: tl.constexpr):
    """Map a linear program id to (pid_m, pid_n) in GROUP_M-row super-tiles (L2 reuse)."""
    num_pid_m = tl.cdiv(M, BLOCK_M)
    num_pid_n = tl.cdiv(N, BLOCK_N)
    num_pid_in_group = GROUP_M * num_pid_n
    group_id = pid // num_pid_in_group
    first_pid_m = group_id * GROUP_M
    group_size_m = tl.minimum(num_pid_m - first_pid_m, GROUP_M)
    pid_m = first_pid_m + ((pid % num_pid_in_group) % group_size_m)
    pid_n = (pid % num_pid_in_group) // group_size_m
    return pid_m, pid_n


def input_precision(dtype_name: str, allow_tf32: bool) -> str:
    """``tl.dot``'s input_precision: TF32 only for fp32 with the switch on; IEEE otherwise.

    The interpreter ignores it (its dot is NumPy's), so CPU mode asks for IEEE; a recording run
    asks for what the GPU would, so ``tools/sm90_compile.py`` compiles the tensor-core path.
    """
    return "tf32" if (allow_tf32 and dtype_name == "float32" and GPU_SHAPES) else "ieee"
