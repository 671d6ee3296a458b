"""What the kernels compile to for Hopper (sm_90), judged without a GPU.

No GPU is lent to time the kernels, but the properties that make them fast can be read from the
code the compiler makes. This test records a small workload (``TRITENSOR_RECORD_LAUNCHES``),
compiles every launch for sm_90 in every autotune configuration with ``tools/sm90_report.py``
and asserts, from its ``--json`` output:

(a) every configuration compiles and fits, and none spills registers (to its stack frame);
(b) the tensor-core kernels (matmul, the Hopper TMA matmul, conv2d forward and both backward
    kernels, attention forward and its TMA variant) use Hopper's warpgroup MMA (``wgmma.mma_async`` in the PTX, HGMMA in the
    SASS) in every configuration whose shape allows it; see :func:`wgmma_possible`;
(c) the bandwidth kernels read and write the tensors they stream with 128-bit accesses
    (``ld.global.v4.b32`` and kin); see :data:`STREAMED` for what is streamed in each.

Slow: about 300 ptxas compiles (21 min on a shared 2-core machine, Triton's cache cold; 168 of
them conv2d's three kernels at every ResNet-50 size, dtype and stride). The report's tables for
this workload are in benchmarks/RESULTS.md (the sections "sm_90 report" and "conv2d NHWC inside").
"""
import glob
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]

WORKLOAD = r"""
import tritensor as tt
import tritensor.nn.functional as F
from tritensor.triton_kernels import attention_tma, matmul_tma

tt.manual_seed(0)
# Tensor-core kernels. sm_90 takes the TMA kernels for these operands: CPU mode never selects
# them, so their launchers are called directly.
for dt in (tt.float16, tt.bfloat16):
    a, b = tt.randn(256, 256).to(dt), tt.randn(256, 256).to(dt)
    a @ b                                                   # general matmul kernel
    matmul_tma.matmul(tt.empty(256, 256, dtype=dt), a, b, False)
tt.backends.cuda.matmul.allow_tf32 = True
a = tt.randn(256, 256)
a @ a                                                       # fp32 through TF32 tensor cores
tt.backends.cuda.matmul.allow_tf32 = False
# conv2d at every ResNet-50 size: 3x3 stride 1 and 2, 1x1 stride 2 (the downsample; 1x1 stride 1 is
# the matmul kernel), forward and both backward maps, fp16, bf16 and fp32 (TF32, the default),
# from NCHW (the default layout: repacked NHWC inside). Triton specialises an integer argument only
# by divisibility by 16 (and == 1), so 16 channels compile to the same binaries as ResNet's 64-512,
# and a batch making N*OH*OW a multiple of 16 (as N = 32 does) stands for the benchmark's batch.
from tritensor.core.ops import conv as C
tt.backends.cudnn.allow_tf32 = True
for dt in (tt.float16, tt.bfloat16, tt.float32):
    for hw in (56, 28, 14, 7):
        for k, s in ((3, 1), (3, 2), (1, 2)):
            if s == 2 and hw == 7:
                continue
            oh = (hw + 2 * (k // 2) - k) // s + 1
            n = 1 if oh * oh % 16 == 0 else 4 if oh * oh % 4 == 0 else 16
            x, w = tt.randn(n, 16, hw, hw).to(dt), tt.randn(16, 16, k, k).to(dt)
            y = F.conv2d(x, w, stride=s, padding=k // 2)
            g = C.nhwc_grad_output(y, w.shape, 1)           # as autograd: dy repacked once for both
            C.conv2d_backward_input(g, w, x.shape, s, k // 2)
            C.conv2d_backward_weight(g, x, w.shape, s, k // 2)
x, w = tt.randn(2, 64, 14, 14).half(), tt.randn(64, 64, 3, 3).half()
cl = tt.channels_last
F.conv2d(x.contiguous(memory_format=cl), w.contiguous(memory_format=cl), padding=1)  # channels_last: no repack
q = tt.randn(1, 2, 128, 64).half()
F.scaled_dot_product_attention(q, q, q)                     # general attention kernel
attention_tma.forward(tt.empty(1, 2, 128, 64, dtype=tt.float16), tt.empty(2, 128), q, q, q, 1, 0.125, 0, False)
# Bandwidth-bound kernels, at sizes that are multiples of 16 (what large tensors are)
for dt in (tt.float32, tt.float16):
    x = tt.randn(64, 1024).to(dt)
    x + x                                                   # elementwise
    x.sum(dim=1); x.sum(dim=0); x.sum()                     # row, column and split whole-tensor sums
    F.softmax(x, dim=-1)                                    # a row in one tile
    F.layer_norm(x, (1024,), tt.ones(1024).to(dt), tt.zeros(1024).to(dt))
    y = tt.randn(8, 16384).to(dt)
    F.softmax(y, dim=-1); F.layer_norm(y, (16384,))         # long rows: the chunked schedules
tt.randn(64, 1024).to(tt.bfloat16)                          # cast fp32 -> bf16
"""

TENSOR_CORE = ("matmul:_matmul_kernel", "matmul_tma:_matmul_tma_persistent_kernel", "conv:_conv2d_fwd_kernel",
               "conv:_conv2d_bwd_input_chunked_kernel", "conv:_conv2d_bwd_weight_kernel",
               "attention:_attn_fwd", "attention_tma:_attn_fwd_tma")

# Bandwidth kernel -> (pointer arguments whose loads stream, whose stores stream, loads allowed one
# element per row). What each program touches once per element of its tile is streamed; what it
# touches once per row is not: a reduction's output (one value per row), layer_norm's mean and
# rstd, and layer_norm's pivot (each row's first element, loaded alone to shift the statistics).
# layer_norm's weight and bias are one row's worth per program of BLOCK_M rows, read from L2 by
# every program: not the streamed tensor (they are reported, not asserted).
STREAMED = {
    "elementwise:_elementwise_kernel": ({"a", "b"}, {"out"}, set()),
    "copies:_copy_kernel": ({"src"}, {"dst"}, set()),  # same-layout copies (the casts); layout changes skipped
    "copies:_fill_kernel": (set(), {"dst"}, set()),
    "reduce:_reduce_kernel": ({"x"}, set(), set()),
    "softmax:_softmax_kernel": ({"x"}, {"y"}, set()),
    "layer_norm:_layer_norm_fwd_kernel": ({"x"}, {"y"}, {"x"}),
}
_BITS = {"float32": 32, "float16": 16, "bfloat16": 16, "float64": 64}


@pytest.fixture(scope="module")
def report(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("sm90_report")
    rec = tmp / "launches"
    env = dict(os.environ, TRITENSOR_RECORD_LAUNCHES=str(rec))
    subprocess.run([sys.executable, "-c", WORKLOAD], env=env, check=True, cwd=tmp, timeout=600)
    files = glob.glob(f"{rec}.*.jsonl")
    assert files, "the workload recorded no launches"
    out = tmp / "report.json"
    r = subprocess.run([sys.executable, str(ROOT / "tools" / "sm90_report.py"), *files, "--jobs", "1",
                        "--json", str(out)], capture_output=True, text=True, timeout=3000)
    assert out.exists(), r.stdout + r.stderr[-3000:]  # exit status 1 = some configuration failed: asserted below
    return json.loads(out.read_text())


def _specs(report, kernel):
    found = [s for s in report if s["kernel"].endswith("." + kernel)]
    assert found, f"the workload did not launch {kernel}"
    return found


def wgmma_possible(config: dict, num_warps: int) -> bool:
    """Can this configuration's ``tl.dot`` be a warpgroup MMA? ``wgmma`` is issued by a warpgroup
    of 4 warps on a 64-row tile (m64nNk16), so Triton uses it only when ``num_warps`` is a multiple
    of 4 and the tile's M (BLOCK_M) a multiple of 64; the other configurations (2 warps, or 16 and
    32 rows: the small tiles kept for skinny problems) take the older ``mma.sync`` (HMMA). That is
    what the report of 2026-11-25 shows: every configuration of these kernels that qualifies has
    wgmma, and none of the others has it."""
    return num_warps % 4 == 0 and config["BLOCK_M"] % 64 == 0


def _is_tf32_matmul(spec) -> bool:
    return spec["kernel"].endswith(".matmul:_matmul_kernel") and spec["kwargs"].get("INPUT_PRECISION") == "tf32"


def _failed(specs):
    return [f"{s['label']} {c['config']}: {c['err']}" for s in specs for c in s["configs"] if c["err"]]


@pytest.mark.slow
@pytest.mark.timeout(3600)  # the module's compile runs inside the first test: ~21 min
def test_every_configuration_compiles(report):
    assert sum(len(s["configs"]) for s in report) > 100  # the autotuned kernels' configurations were compiled
    failed = _failed(s for s in report if not _is_tf32_matmul(s))
    assert not failed, failed


@pytest.mark.slow
@pytest.mark.timeout(3600)
def test_tf32_matmul_configurations_compile(report):
    # Found 2026-11-25: 128x256x64 at 3 stages, the first configuration (the one TRITENSOR_AUTOTUNE=0
    # pins), needs 294912 B of shared memory with fp32 tiles, sm_90 has 232448: a pinned fp32 matmul
    # or 1x1 conv with TF32 failed to launch. matmul.fitting_configs now prunes it for 4-byte operands.
    specs = [s for s in report if _is_tf32_matmul(s)]
    assert specs, "the workload did not launch the TF32 matmul"
    failed = _failed(specs)
    assert not failed, failed


# Findings of 2026-11-25 (stack frame = spill area, confirmed by ptxas -v's "spill stores"), all fixed:
# the TMA matmul's 128x256x64 at 4 warps (1024 B, 589 LDL/STL) is no longer a configuration
# (matmul_tma._registers_fit); the fp16/bf16 32x64x32 matmul tile spilled 8 B at 2 warps and runs
# at 4; attention's 128-row tiles spilled 8-104 B at 4 warps and run at 8 from 128x64 up
# (attention._keep); conv2d on NCHW spilled at 255 registers in fp16 (6/8 configurations, 48-728 B),
# TF32 (8/8, 464-1568 B) and its backward kernels likewise, and now runs NHWC inside (102-238
# registers, no spill in any configuration of the three kernels, at every ResNet-50 size).
OTHERS = "every other kernel"


@pytest.mark.slow
@pytest.mark.timeout(3600)
@pytest.mark.parametrize("kernel", (*TENSOR_CORE, OTHERS))
def test_no_configuration_spills(report, kernel):
    if kernel == OTHERS:
        specs = [s for s in report if not any(s["kernel"].endswith("." + k) for k in TENSOR_CORE)]
    else:
        specs = _specs(report, kernel)
    spills = [f"{s['label']} {c['config']}: {c['spill']} B, {c['spill_ops']} LDL/STL"
              for s in specs for c in s["configs"] if not c["err"] and c["spill"]]
    assert not spills, spills


@pytest.mark.slow
@pytest.mark.timeout(3600)
@pytest.mark.parametrize("kernel", TENSOR_CORE)
def test_tensor_core_kernels_use_wgmma(report, kernel):
    for s in _specs(report, kernel):
        eligible = [c for c in s["configs"] if not c["err"] and wgmma_possible(c["config"], c["warps"])]
        assert eligible, f"{s['label']}: no configuration can use wgmma"
        missing = [(c["config"], c["mma"]) for c in eligible if not (c["wgmma"] and c["mma"] == "HGMMA")]
        assert not missing, f"{s['label']}: configurations without wgmma: {missing}"


@pytest.mark.slow
@pytest.mark.timeout(3600)
@pytest.mark.parametrize("kernel", sorted(STREAMED))
def test_bandwidth_kernels_stream_128_bit(report, kernel):
    loads, stores, per_row = STREAMED[kernel]
    for s in _specs(report, kernel):
        if kernel == "copies:_copy_kernel" and not s["kwargs"]["CONTIG"]:
            continue  # a layout change (channels_last): one side is strided by nature, reported not asserted
        (c,) = s["configs"]  # not autotuned: the launcher's one configuration
        ptr_bits = {k: _BITS.get(v["ptr"]) for k, v in zip(s["arg_names"], s["args"]) if isinstance(v, dict)
                    and "ptr" in v}
        for kind, args in (("ld", loads), ("st", stores)):
            for arg in args:
                hist = {int(w): n for w, n in c[kind].get(arg, {}).items()}
                assert hist.get(128), f"{s['label']}: no 128-bit {kind} of {arg}: {c[kind]}"
                narrow = {w: n for w, n in hist.items() if w != 128}
                if kind == "ld" and arg in per_row:  # the per-row element: at most one load per row
                    rows = s["kwargs"]["BLOCK_M"]
                    narrow = {w: n for w, n in narrow.items() if not (w == ptr_bits[arg] and n <= rows)}
                assert not narrow, f"{s['label']}: {kind} of {arg} narrower than 128 bits: {hist}"



# conv2d's NHWC implicit-GEMM kernels -> (the operands each copies to shared memory, what it stores).
CONV_GEMM = {
    "conv:_conv2d_fwd_kernel": (("x", "w"), "y"),
    "conv:_conv2d_bwd_input_chunked_kernel": (("dy", "w"), "dx"),
    "conv:_conv2d_bwd_weight_kernel": (("dy", "x"), "ws"),
}


def _widths(hist) -> set:
    return {int(w) for w in hist}


@pytest.mark.slow
@pytest.mark.timeout(3600)
@pytest.mark.parametrize("kernel", sorted(CONV_GEMM))
def test_conv_kernels_copy_and_store_128_bit(report, kernel):
    """Every configuration of the three conv kernels, at every ResNet-50 size of the workload, in
    fp16, bf16 and TF32: both operands go to shared memory by 16-byte cp.async (none is gathered
    through registers) and the output is stored 16 bytes at a time. TF32 grad-weight, whose
    operands are both channel-contiguous where its MMA wants them K-major, included: it copied both
    4 bytes at a time (transposing in the copy) until it staged them (conv.py says how)."""
    operands, out = CONV_GEMM[kernel]
    specs = _specs(report, kernel)
    assert {s["kwargs"]["INPUT_PRECISION"] for s in specs} == {"ieee", "tf32"}
    for s in specs:
        for c in s["configs"]:
            assert not c["err"], c["err"]
            label = f"{s['label']} {c['config']}"
            assert _widths(c["st"].get(out, {})) == {128}, f"{label}: stores {c['st']}"
            for a in operands:
                assert a not in c["ld"], f"{label}: {a} gathered through registers: {c['ld']}"
                assert _widths(c["cp"].get(a, {})) == {128}, f"{label}: cp.async of {a}: {c['cp']}"


@pytest.mark.slow
@pytest.mark.timeout(3600)
def test_conv_repack_is_as_wide_as_the_rows_allow(report):
    """The NCHW <-> NHWC repack: the NHWC side (rows of C channels, a multiple of 16) 128 bits at a
    time; the NCHW side as wide as H*W's alignment allows (VEC_SRC / VEC_DST elements: 128 bits at
    56x56 and 28x28, 64 in fp16 at 14x14, one element at 7x7)."""
    specs = _specs(report, "conv_repack:_transpose_kernel")
    bits = {"float32": 32, "float16": 16, "bfloat16": 16}
    seen = set()
    for s in specs:
        (c,) = s["configs"]
        elem = bits[next(v["ptr"] for v in s["args"] if isinstance(v, dict) and "ptr" in v)]
        vs, vd = s["kwargs"]["VEC_SRC"], s["kwargs"]["VEC_DST"]
        seen.add(min(vs, vd) * elem)
        assert max(vs, vd) * elem == 128, s["label"]  # the NHWC side: whole 16-byte vectors
        assert _widths(c["ld"]["src"]) == {vs * elem}, (s["label"], c["ld"])
        assert _widths(c["st"]["dst"]) == {vd * elem}, (s["label"], c["st"])
    assert seen >= {128, 64, 16}, seen  # 56x56 (both sides full), fp16 14x14, 7x7
