"""Hopper (sm90) matmul: persistent programs that move tiles with TMA descriptors.

Why a second kernel: on H100 the Tensor Memory Accelerator copies a whole tile global->shared
in one instruction (no address math in registers, hardware bounds handling), and a
*persistent* grid of one program per SM walks all output tiles, so launching and tail effects
are paid once. This is Triton's persistent-matmul tutorial (host-side ``TensorDescriptor``s,
block shapes set per config by a pre-hook) extended to read either operand transposed in place:
a descriptor is built over whichever layout has unit stride, and the kernel transposes the
tile in shared memory (``.T`` is free for ``tl.dot``).

Scope: 2-D problems, fp16/bf16 (fp32 tiles of these configs overflow shared memory), no epilogue, sizes large
enough that persistence pays. Everything else goes to ``matmul.py``'s general kernel, which
is also what CPU mode and pre-Hopper GPUs run: :func:`usable` selects this kernel in GPU mode
on compute capability 9.x only. Triton's interpreter emulates descriptor loads and stores
(zero fill and clipping at the edges included; ``runtime/interpreter_gpu.py`` makes its stores
write whole 16-byte chunks of a row, as the hardware does, so an output whose rows do not end on a
16-byte boundary takes a masked pointer store instead), so the tests call :func:`matmul` directly in
CPU mode and check it against NumPy, with :data:`INTERPRET_CONFIG` in place of the autotuner and
a few programs walking every tile (the persistent loop), and ``tests/test_sm90_compile.py``
compiles it for sm_90 in every configuration.
"""
from __future__ import annotations

import triton
import triton.language as tl
from triton.tools.tensor_descriptor import TensorDescriptor

from ..runtime import cuda, mode
from ..runtime.launch import launch
from .autotune import autotune
from ._common import HOPPER_SMEM_BYTES, INTERPRET, cdiv, grouped_tile, input_precision

ENABLED = True  # set False to force the general kernel (the benchmark compares the two)
MIN_DIM = 256  # below this a tile grid barely fills the SMs and persistence has nothing to amortise


def _set_block_shapes(nargs):
    """Autotuner pre-hook: a descriptor's block shape must match the config being run."""
    bm, bn, bk = nargs["BLOCK_M"], nargs["BLOCK_N"], nargs["BLOCK_K"]
    nargs["a_desc"].block_shape = [bk, bm] if nargs["A_T"] else [bm, bk]
    nargs["b_desc"].block_shape = [bn, bk] if nargs["B_T"] else [bk, bn]
    nargs["c_desc"].block_shape = [bm, bn]


# The interpreter: small tiles (its cost is per tile and per element) and two programs, so
# each walks several tiles through the persistent loop.
INTERPRET_CONFIG = {"BLOCK_M": 32, "BLOCK_N": 32, "BLOCK_K": 32, "GROUP_M": 2}
INTERPRET_PROGRAMS = 2

def _fits(conf) -> bool:
    """Does a config's pipeline fit Hopper's shared memory? ``num_stages`` A and B tiles plus the
    C tile the TMA store goes through, 2 bytes an element (fp16/bf16). The ones that do not fit
    (128x128x128 or 128x256x64 at 4 stages, 128x256x128) fail with OutOfResources: the autotuner
    would compile and discard them for every new shape (found by tools/sm90_compile.py)."""
    m, n, k = conf.kwargs["BLOCK_M"], conf.kwargs["BLOCK_N"], conf.kwargs["BLOCK_K"]
    return conf.num_stages * (m * k + k * n) * 2 + m * n * 2 <= HOPPER_SMEM_BYTES


def _registers_fit(conf) -> bool:
    """Is the fp32 accumulator at most 128 registers a thread? 128x256 at 4 warps holds 256 and
    spilled (1 KB stack frame, 589 spill loads/stores: tools/sm90_report.py); at 8 warps it is 128."""
    return conf.kwargs["BLOCK_M"] * conf.kwargs["BLOCK_N"] // (32 * conf.num_warps) <= 128


CONFIGS = [c for c in (
    triton.Config({"BLOCK_M": 128, "BLOCK_N": bn, "BLOCK_K": bk, "GROUP_M": 8}, num_stages=s, num_warps=w,
                  pre_hook=_set_block_shapes)
    for bn in (128, 256) for bk in (64, 128) for s in (3, 4) for w in (4, 8)) if _fits(c) and _registers_fit(c)]


@autotune(configs=CONFIGS, key=["M", "N", "K", "A_T", "B_T", "C_TMA", "INPUT_PRECISION", "DTYPE"])
@triton.jit
def _matmul_tma_persistent_kernel(a_desc, b_desc, c_desc, c_ptr, stride_cm, M, N, K, NUM_SMS: tl.constexpr,
                                  A_T: tl.constexpr, B_T: tl.constexpr, C_TMA: tl.constexpr,
                                  INPUT_PRECISION: tl.constexpr,
                                  BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr,
                                  GROUP_M: tl.constexpr, DTYPE: tl.constexpr = "", UPCAST: tl.constexpr = False):
    # DTYPE (the operands' dtype name) only keys the autotuner: it adds the dtypes of arguments
    # that have one, and descriptors have none, so fp16 and bf16 would share one tuning.
    start_pid = tl.program_id(0)
    num_tiles = tl.cdiv(M, BLOCK_M) * tl.cdiv(N, BLOCK_N)
    k_tiles = tl.cdiv(K, BLOCK_K)
    # flatten=True lets Triton software-pipeline across tile boundaries (the next tile's first
    # TMA loads overlap this tile's epilogue).
    for tile_id in tl.range(start_pid, num_tiles, NUM_SMS, flatten=True):
        pid_m, pid_n = grouped_tile(tile_id, M, N, BLOCK_M, BLOCK_N, GROUP_M)
        off_m = pid_m * BLOCK_M
        off_n = pid_n * BLOCK_N
        acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
        for ki in range(k_tiles):
            off_k = ki * BLOCK_K
            # TMA zero-fills out-of-bounds rows/cols, so ragged M, N, K need no masks.
            if A_T:
                a = a_desc.load([off_k, off_m]).T
            else:
                a = a_desc.load([off_m, off_k])
            if B_T:
                b = b_desc.load([off_n, off_k]).T
            else:
                b = b_desc.load([off_k, off_n])
            if UPCAST:  # the interpreter's bf16 arithmetic is wrong: its tiles go to fp32 first
                a = a.to(tl.float32)
                b = b.to(tl.float32)
            acc = tl.dot(a, b, acc, input_precision=INPUT_PRECISION)
        if C_TMA:
            c_desc.store([off_m, off_n], acc.to(c_desc.dtype))  # TMA clips the store at the edges
        else:
            # A row of N elements does not end on a 16-byte boundary: TMA would write the
            # elements after it up to that boundary (whole 16-byte chunks), past the view into
            # the caller's memory. A masked store writes exactly the tile's elements inside it.
            offs_m = off_m + tl.arange(0, BLOCK_M)
            offs_n = off_n + tl.arange(0, BLOCK_N)
            mask = (offs_m[:, None] < M) & (offs_n[None, :] < N)
            tl.store(c_ptr + offs_m[:, None].to(tl.int64) * stride_cm + offs_n[None, :],
                     acc.to(c_ptr.dtype.element_ty), mask=mask)


def _tma_layout(t):
    """'n' (row-major), 't' (column-major) or None, and whether TMA may address it (16-byte rules)."""
    isz = t.dtype.itemsize
    if t.data_ptr() % 16:
        return None
    s0, s1 = t.stride()
    if s1 == 1 and (s0 * isz) % 16 == 0 and s0 >= t.shape[1]:
        return "n"
    if s0 == 1 and (s1 * isz) % 16 == 0 and s1 >= t.shape[0]:
        return "t"
    return None


def usable(out, a, b) -> bool:
    """Is this problem one the Hopper kernel handles (and should)?"""
    if not (ENABLED and mode.GPU and a.ndim == 2 and a.device.type == "cuda"):
        return False
    if a.dtype.name not in ("float16", "bfloat16"):
        # fp32: every config below needs > 228 KB of shared memory at 4 bytes/element (128x128x64
        # x 3 stages = 262 KB), so all would fail with OutOfResources and the autotuner's pick
        # would raise; IEEE fp32 has no wgmma path anyway. The general kernel takes fp32.
        return False
    M, K = a.shape
    N = b.shape[1]
    if min(M, N, K) < MIN_DIM:
        return False

    if cuda.get_device_capability(a.device.index)[0] != 9:
        return False
    return _tma_layout(a) is not None and _tma_layout(b) is not None and _tma_layout(out) == "n"


_num_sms: dict[int, int] = {}


def matmul(out, a, b, allow_tf32: bool) -> None:
    """out = a @ b for 2-D fp16/bf16 operands in the layouts :func:`_tma_layout` accepts (what
    :func:`usable` checks on a GPU; the tests call it directly in CPU mode)."""
    M, K = a.shape
    N = b.shape[1]
    a_t, b_t = _tma_layout(a) == "t", _tma_layout(b) == "t"
    # Block shapes below are placeholders: the pre-hook sets the tuned config's before launch.
    a_desc = (TensorDescriptor(a, [K, M], [a.stride(1), 1], [64, 128]) if a_t
              else TensorDescriptor(a, [M, K], [a.stride(0), 1], [128, 64]))
    b_desc = (TensorDescriptor(b, [N, K], [b.stride(1), 1], [128, 64]) if b_t
              else TensorDescriptor(b, [K, N], [b.stride(0), 1], [64, 128]))
    c_desc = TensorDescriptor(out, [M, N], [out.stride(0), 1], [128, 128])
    # TMA stores whole 16-byte chunks of a row: only rows that end on a 16-byte boundary take it.
    c_tma = (N * out.dtype.itemsize) % 16 == 0
    meta = dict(A_T=a_t, B_T=b_t, C_TMA=c_tma, INPUT_PRECISION=input_precision(a.dtype.name, allow_tf32), DTYPE=a.dtype.name)
    if INTERPRET:
        meta.update(INTERPRET_CONFIG, UPCAST=True)
        num_sms = INTERPRET_PROGRAMS
        _set_block_shapes({"a_desc": a_desc, "b_desc": b_desc, "c_desc": c_desc, **meta})
    else:
        idx = a.device.index
        if idx not in _num_sms:
            _num_sms[idx] = cuda.get_device_properties(idx).multi_processor_count
        num_sms = _num_sms[idx]

    def grid(META):
        return (min(num_sms, cdiv(M, META["BLOCK_M"]) * cdiv(N, META["BLOCK_N"])),)

    launch(_matmul_tma_persistent_kernel, grid, a_desc, b_desc, c_desc, out, out.stride(0), M, N, K,
           NUM_SMS=num_sms, **meta)
