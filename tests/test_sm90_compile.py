"""Every kernel family compiles for Hopper (sm_90), checked on a machine without a GPU.

CPU mode runs kernels in Triton's interpreter, which compiles nothing: this test records the
launches a small training-like workload makes (``TRITENSOR_RECORD_LAUNCHES``) and compiles each
for sm_90 through ``tools/sm90_compile.py`` (every autotune configuration of the autotuned
kernels), so a kernel that a GPU could not compile fails here first. Slow (minutes of ptxas).
"""
import glob
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]

WORKLOAD = r"""
import numpy as np
import tritensor as tt
import tritensor.nn as nn
import tritensor.nn.functional as F
from tritensor import optim

tt.manual_seed(0)
for dt in (tt.float32, tt.float16, tt.bfloat16):
    x = tt.randn(33, 65).to(dt)
    y = (x * 2.0 + x).exp().sum(dim=1)
    F.softmax(x, dim=1); F.log_softmax(x, dim=-1)
    F.layer_norm(x, (65,))
    (x @ tt.randn(65, 17).to(dt)).float().mean()
    x.t().contiguous(); x.cumsum(dim=1)
    x.max(dim=0); x.argmax(dim=1)
model = nn.Sequential(nn.Conv2d(3, 16, 3, padding=1), nn.ReLU(), nn.Conv2d(16, 16, 3, padding=1), nn.ReLU(),
                      nn.MaxPool2d(2), nn.Conv2d(16, 4, 1), nn.Flatten(), nn.Linear(4 * 4 * 4, 10))
opt = optim.Adam(model.parameters(), lr=1e-3)
sgd = optim.SGD(model.parameters(), lr=1e-2, momentum=0.9)
img = tt.randn(4, 3, 8, 8)
target = tt.tensor(np.array([1, 2, 3, 4], dtype=np.int64))
for _ in range(2):
    loss = F.cross_entropy(model(img), target)
    opt.zero_grad(); loss.backward(); opt.step(); sgd.step()
scaler = tt.amp.GradScaler("cpu")
with tt.autocast("cpu"):
    out = model(img)
scaler.scale(F.cross_entropy(out.float(), target)).backward()
scaler.unscale_(opt); scaler.step(opt); scaler.update()
idx = tt.tensor(np.array([0, 2, 2], dtype=np.int64))
x = tt.randn(5, 4); x[idx]; x.index_select(0, idx)
from tritensor.triton_kernels import attention_tma, matmul_tma  # GPU mode selects them on sm_90: compile them too
for dt in (tt.float16, tt.bfloat16):
    a, b = tt.randn(96, 72).to(dt), tt.randn(72, 80).to(dt)
    matmul_tma.matmul(tt.empty(96, 80, dtype=dt), a, b, False)
    matmul_tma.matmul(tt.empty(96, 80, dtype=dt), a.t().contiguous().t(), b.t().contiguous().t(), False)
    ragged = tt.randn(72, 48).to(dt)[:, :45]  # rows that end off a 16-byte boundary: the masked-store epilogue
    matmul_tma.matmul(tt.empty(96, 48, dtype=dt)[:, :45], a, ragged, False)
for dt, D, causal in ((tt.float16, 64, True), (tt.bfloat16, 128, False)):
    q, k = tt.randn(1, 2, 80, D).to(dt), tt.randn(1, 1, 96, D).to(dt)
    attention_tma.forward(tt.empty(1, 2, 80, D, dtype=dt), tt.empty(2, 80), q, k, k, 2, D ** -0.5, 16, causal)
"""


@pytest.mark.slow
@pytest.mark.timeout(3600)  # ~250 ptxas compiles: 13 min on a loaded 2-core machine
def test_every_recorded_kernel_compiles_for_sm90(tmp_path):
    rec = tmp_path / "launches"
    env = dict(os.environ, TRITENSOR_RECORD_LAUNCHES=str(rec))
    subprocess.run([sys.executable, "-c", WORKLOAD], env=env, check=True, cwd=tmp_path, timeout=600)
    files = glob.glob(f"{rec}.*.jsonl")
    assert files, "the workload recorded no launches"
    r = subprocess.run([sys.executable, str(ROOT / "tools" / "sm90_compile.py"), *files, "--jobs", "2"],
                       capture_output=True, text=True, timeout=3000)
    report = r.stdout + r.stderr[-3000:]
    assert r.returncode == 0, report
    kernels = [ln for ln in r.stdout.splitlines() if ln.startswith("ok ")]
    # the families the workload touches: elementwise, reduce, softmax, layer_norm, matmul, conv,
    # pool, loss, optim, amp, index, cast, cumsum, and the Hopper TMA matmul and attention forward
    assert len(kernels) >= 15, report
    assert any("_matmul_tma_persistent_kernel" in ln for ln in kernels), report
    assert any("_attn_fwd_tma" in ln for ln in kernels), report
