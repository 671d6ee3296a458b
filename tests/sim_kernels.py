"""A kernel of a user's own for tests/test_sim.py's compile check. A module of its own because the
sm_90 compiler process imports a kernel by its module's name."""
import tritensor  # noqa: F401  (first: Triton's mode is chosen when tritensor is imported)
import triton
import triton.language as tl


@triton.jit
def tile_matmul(a_ptr, b_ptr, c_ptr, K, BLOCK: tl.constexpr, BLOCK_K: tl.constexpr):
    """One BLOCK x BLOCK tile of A (BLOCK x K) @ B (K x BLOCK) in fp32, K in BLOCK_K steps. At 128 x
    128 x 64 a pipeline stage holds 64 KB of operands: two stages fit an H100's 227 KB of shared
    memory a block, four do not."""
    r = tl.arange(0, BLOCK)
    k = tl.arange(0, BLOCK_K)
    acc = tl.zeros((BLOCK, BLOCK), tl.float32)
    for k0 in range(0, K, BLOCK_K):
        a = tl.load(a_ptr + r[:, None] * K + (k0 + k)[None, :])
        b = tl.load(b_ptr + (k0 + k)[:, None] * BLOCK + r[None, :])
        acc = tl.dot(a, b, acc, input_precision="tf32")
    tl.store(c_ptr + r[:, None] * BLOCK + r[None, :], acc)
