"""The attention kernels compile for Hopper (sm_90) without a GPU.

Why: CPU mode runs the kernels in Triton's interpreter, which accepts code the GPU compiler
rejects (dot shapes, layouts, shared memory per stage). ``triton.compile`` needs only a target,
so a child process that makes tritensor believe a CUDA driver answers (so its kernels stay
``@triton.jit``, nothing is launched) compiles the forward and backward kernels to cubin for
sm_90 in the configurations the autotuner starts from, and reports their shared memory.
Slow (each variant is a full compile to cubin): marked ``slow``.
"""
import os
import subprocess
import sys
import textwrap

import pytest

CHILD = textwrap.dedent(r'''
    import sys, types
    drv = types.SimpleNamespace(CUresult=types.SimpleNamespace(CUDA_SUCCESS=0), cuInit=lambda f: (0,),
                                cuDeviceGetCount=lambda: (0, 1))
    bindings = types.ModuleType("cuda.bindings"); bindings.driver = drv
    sys.modules.setdefault("cuda", types.ModuleType("cuda"))
    sys.modules["cuda.bindings"], sys.modules["cuda.bindings.driver"] = bindings, drv
    core = types.ModuleType("cuda.core")  # runtime/driver.py binds cuda.core's names in GPU mode; none is called
    core.Device = core.EventOptions = core.LegacyPinnedMemoryResource = core.StreamOptions = core.Stream = None
    sys.modules["cuda.core"] = core
    import triton
    import triton.language as tl
    from triton.backends.compiler import GPUTarget
    from triton.compiler import ASTSource
    from tritensor.triton_kernels import attention as A, attention_bwd as B

    PTRS = {"Q", "K", "V", "O", "MASK", "DO", "DK", "DV_", "DQ", "DMASK"}
    TUPLES = {"batch_shape", "sqb", "skb", "svb", "sob", "smb"}
    I64 = {"scale_bits", "drop_scale_bits", "rng_offset"}

    def compile_(kernel, dt, consts, warps, stages, mask_dt=None):
        fn = kernel.fn if isinstance(kernel, triton.runtime.Autotuner) else kernel
        sig = {}
        for n in fn.arg_names:
            if n in consts:
                sig[n] = "constexpr"
            elif n in PTRS:
                sig[n] = "*" + (mask_dt if n in ("MASK", "DMASK") and mask_dt else dt)
            elif n in ("LSE", "DELTA"):
                sig[n] = "*fp32"
            elif n in TUPLES:
                sig[n] = ("i32",)
            elif n == "dropout_p":
                sig[n] = "fp32"
            else:
                sig[n] = "i64" if n in I64 else "i32"
        src = ASTSource(fn=fn, signature=sig, constexprs={(fn.arg_names.index(k),): v for k, v in consts.items()})
        k = triton.compile(src, target=GPUTarget("cuda", 90, 32), options={"num_warps": warps, "num_stages": stages})
        assert len(k.asm["cubin"]) > 0
        return k.metadata.shared

    def common(D, causal, mask_kind, dropout, bm, bn):
        return dict(D=D, DV=D, NBATCH=1, IS_CAUSAL=causal, MASK_KIND=mask_kind, HAS_DROPOUT=dropout, UPCAST=False,
                    INPUT_PRECISION="ieee", BLOCK_M=bm, BLOCK_N=bn, BLOCK_D=D, BLOCK_DV=D, ACC=tl.float32)

    for name, kernel, dt, consts, warps, stages, mask_dt in [
        ("fwd fp16 D64 causal", A._attn_fwd, "fp16", common(64, True, 0, False, 128, 64), 4, 3, None),
        ("fwd bf16 D128 additive+dropout", A._attn_fwd, "bf16", common(128, False, 2, True, 128, 64), 8, 3, None),
        ("fwd fp16 D256 bool", A._attn_fwd, "fp16", common(256, False, 1, False, 64, 32), 4, 2, "i1"),
        ("dkdv fp16 D64 causal", B._bwd_dkdv, "fp16", common(64, True, 0, False, 64, 128), 8, 2, None),
        ("dkdv bf16 D128 additive+dropout", B._bwd_dkdv, "bf16", common(128, False, 2, True, 32, 64), 4, 2, None),
        ("dq fp16 D64 additive grad", B._bwd_dq, "fp16", dict(common(64, False, 2, False, 128, 64), MASK_GRAD=True),
         8, 2, None),
        ("delta fp16 D128", B._bwd_delta, "fp16", dict(DV=128, BLOCK_M=64, BLOCK_DV=128, ACC=tl.float32), 4, 1, None),
    ]:
        print(name, "shared", compile_(kernel, dt, consts, warps, stages, mask_dt), flush=True)
''')


@pytest.mark.slow
def test_attention_kernels_compile_for_sm90():
    env = {k: v for k, v in os.environ.items() if k not in ("TRITON_INTERPRET", "TRITENSOR_DEVICE")}
    r = subprocess.run([sys.executable, "-c", CHILD], env=env, capture_output=True, text=True, timeout=1800)
    assert r.returncode == 0, r.stderr[-4000:]
    assert r.stdout.count("shared") == 7, r.stdout
