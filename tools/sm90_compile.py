"""Compile every kernel launch a CPU-mode run recorded, for Hopper (sm_90), without a GPU.

    TRITENSOR_RECORD_LAUNCHES=/tmp/launches python -m pytest -q tests/test_elementwise.py ...
    python tools/sm90_compile.py /tmp/launches.*.jsonl [--arch 90] [--jobs 2]

CPU mode never compiles a kernel (Triton's interpreter runs the Python), so a kernel can pass
every CPU test and still fail to compile for the GPU. This script replays each recorded launch
(``runtime/launch_log.py`` writes them) through Triton's own JIT binder with a stand-in driver
that reports an sm_90 target, so the argument specialisation, constexprs and, for autotuned
kernels, *every* configuration the GPU autotuner would try are compiled to cubin: a failure here
(a compile error, shared memory over the 228 KB Hopper has) is a failure a GPU run would hit.
It prints one line per kernel and exits non-zero if any launch failed to compile.

While recording, the launchers use the GPU's tuning constants (``per_mode`` in
``triton_kernels/_common.py``), and options set only for the interpreter (``INTERPRETER_ONLY``)
are compiled with their GPU value. What it cannot see: launches a CPU-mode run never makes.
The Hopper TMA kernels are selected only on a GPU, so a workload records them by calling their
launchers directly (``tests/test_sm90_compile.py`` does); their descriptors' block shapes are set
per configuration by the configuration's pre-hook, as the GPU autotuner does.

``--resources`` also reports what each kernel compiled to, per configuration: registers per
thread, spilled bytes (the stack frame ptxas spills registers to), shared memory, and whether its
matrix products became Hopper's warpgroup MMA (``HGMMA`` in the SASS) or stayed on the older
``HMMA``; read with the ``cuobjdump`` Triton ships. That is how a kernel is judged without a GPU
to time it (``tools/sm90_report.py`` reports more: wgmma counts, global access widths).

It lives outside the package because it must import Triton before tritensor does: tritensor
puts Triton in interpreter mode on a machine without a GPU, and Triton's own library functions
are created as interpreter functions then, which the compiler cannot use.
"""
from __future__ import annotations

import argparse
import collections
import importlib
import json
import os
import sys
import time
import types
from concurrent.futures import ProcessPoolExecutor

os.environ["TRITON_INTERPRET"] = "0"  # before Triton is imported: its stdlib must be JIT functions
import triton  # noqa: E402
import triton.language as tl  # noqa: E402
from triton.backends.compiler import GPUTarget  # noqa: E402
from triton.runtime import driver  # noqa: E402
from triton.runtime.jit import JITFunction  # noqa: E402
from triton.tools.tensor_descriptor import TensorDescriptor  # noqa: E402

# Compile-time options a launcher sets only for the interpreter, and the value a GPU launch uses.
INTERPRETER_ONLY = {"UPCAST": False}
SMEM_LIMIT = {90: 232448, 80: 166912, 89: 101376}  # bytes of shared memory per block (opt-in max)


class _FakeDriver:
    """What Triton's JIT asks of a driver before it launches: the target, a device, a stream."""

    def __init__(self, target):
        self.target = target

    def get_current_target(self):
        return self.target

    def get_current_device(self):
        return 0

    def get_current_stream(self, device=None):
        return 0

    def is_active(self):
        return True


class _Ptr:
    """A pointer argument: Triton derives ``*<type>`` from ``str(dtype)``; address 0 is 16-aligned.

    Its dtype is tritensor's own, one object per name for the whole process: Triton's native
    binder caches a dtype's type string by the object's identity, so a fresh object per launch
    could be freed and another allocated at its address, which then compiled with the dead one's
    type ("Both operands must be same dtype. Got bf16 and fp16" for an fp16 launch)."""

    def __init__(self, name):
        self.dtype = _state["to_dtype"](name)

    def data_ptr(self):
        return 0


def _decode(v):
    if isinstance(v, dict):
        if "ptr" in v:
            return _Ptr(v["ptr"])
        if "tl" in v:
            return getattr(tl, v["tl"]) if hasattr(tl, v["tl"]) else tl.dtype(v["tl"])
        if "tuple" in v:
            return tuple(_decode(x) for x in v["tuple"])
        if "desc" in v:
            d = v["desc"]
            return TensorDescriptor(_Ptr(d["dtype"]), d["shape"], d["strides"], d["block_shape"], d["padding"])
    return v


class _Rebuilder:
    """JIT versions of tritensor's kernels, which were created as interpreter functions."""

    def __init__(self):
        from triton.runtime.interpreter import InterpretedFunction

        self._interp = InterpretedFunction
        self._done: dict[int, JITFunction] = {}

    def jit(self, obj):
        if not isinstance(obj, self._interp):
            return obj
        if id(obj) in self._done:
            return self._done[id(obj)]
        f = obj.fn
        g: dict = {}
        new = types.FunctionType(f.__code__, g, f.__name__, f.__defaults__, f.__closure__)
        new.__module__, new.__qualname__, new.__doc__ = f.__module__, f.__qualname__, f.__doc__
        new.__annotations__, new.__kwdefaults__ = dict(f.__annotations__), f.__kwdefaults__  # tl.constexpr marks
        jf = JITFunction(new, **obj.kwargs)
        self._done[id(obj)] = jf
        for k, v in f.__globals__.items():  # helpers it calls become JIT functions too
            g[k] = self.jit(v)
        return jf


_state = {}


_CUOBJDUMP = os.path.join(os.path.dirname(triton.__file__), "backends", "nvidia", "bin", "cuobjdump")


def resource_usage(cubin: bytes) -> dict:
    """Registers per thread, local memory per thread, static shared bytes, the spill instructions
    and the kind of MMA ('HGMMA', 'HMMA' or '-') of one compiled kernel, read with cuobjdump.

    ``local`` is the stack frame plus static local memory: where ptxas puts the registers it
    spills (``STACK``; cuobjdump's ``LOCAL`` stays 0 for spills) and any local array. tritensor's
    kernels keep no local arrays, so for them it is the spill area, and ``spill_ops`` (the SASS's
    local loads and stores, ``LDL``/``STL``) the instructions that move spilled registers."""
    import re
    import subprocess
    import tempfile

    with tempfile.NamedTemporaryFile(suffix=".cubin") as f:
        f.write(cubin)
        f.flush()
        usage = subprocess.run([_CUOBJDUMP, "--dump-resource-usage", f.name], capture_output=True, text=True).stdout
        sass = subprocess.run([_CUOBJDUMP, "-sass", f.name], capture_output=True, text=True).stdout
    found = {k: re.search(rf"\b{k}:(\d+)", usage) for k in ("REG", "STACK", "LOCAL", "SHARED")}
    n = {k: int(m.group(1)) if m else None for k, m in found.items()}
    return {"reg": n["REG"], "local": None if n["STACK"] is None else n["STACK"] + (n["LOCAL"] or 0),
            "shared": n["SHARED"], "spill_ops": len(re.findall(r"\b(?:STL|LDL)(?:\.\w+)*\s", sass)),
            "mma": "HGMMA" if "HGMMA" in sass else ("HMMA" if "HMMA" in sass else "-")}


def _resources(kernel) -> str:
    """'R<registers> S<spilled bytes> M<shared bytes> HGMMA|HMMA|-' of one compiled kernel."""
    r = {k: "?" if v is None else v for k, v in resource_usage(kernel.asm["cubin"]).items()}
    return f"R{r['reg']} S{r['local']} M{r['shared']} {r['mma']}"


def _init(arch, resources=False):
    """Set up a process to compile for sm_<arch>; ``resources``: report :func:`_resources` per config
    (``_state["inspect"]`` may be replaced by any function of the compiled kernel: sm90_report.py)."""
    import tritensor  # noqa: F401  (CPU mode: kernels become interpreter functions; rebuilt below)
    from tritensor.runtime import interpreter
    from tritensor.runtime.dtype import to_dtype
    from tritensor.triton_kernels import autotune

    interpreter.remove_fixups()  # CPU mode patched triton.language for the interpreter: undo it
    os.environ["TRITON_INTERPRET"] = "0"
    driver.set_active(_FakeDriver(GPUTarget("cuda", arch, 32)))
    _state.update(arch=arch, rebuild=_Rebuilder(), configs=autotune.GPU_CONFIGS, prunes=autotune.GPU_PRUNES,
                  to_dtype=to_dtype,
                  inspect=_resources if resources else None)


def _int_class(v: int) -> int:
    """A representative of ``v``'s specialisation class, as Triton's binder sees an int argument:
    1, a multiple of 16, anything else; 32- or 64-bit."""
    if v == 1:
        return 1
    base = 2**31 if not -(2**31) <= v < 2**31 else 0
    return base + (16 if v % 16 == 0 else 17)


def _normalise(v):
    if isinstance(v, bool) or not isinstance(v, (int, dict)):
        return v
    if isinstance(v, int):
        return _int_class(v)
    if "tuple" in v:
        return {"tuple": [_normalise(x) for x in v["tuple"]]}
    return v


def _key(entry: dict, constexpr_names) -> str:
    """Launches that Triton would compile to the same binary share a key."""
    args = [a if n in constexpr_names else _normalise(a) for n, a in zip(constexpr_names["__order__"], entry["args"])]
    return json.dumps([entry["kernel"], args, entry["kwargs"]], sort_keys=True)


def _constexprs(kernel: str):
    """{param name: True for constexprs, '__order__': [param names]} of a recorded kernel."""
    mod, qual = kernel.split(":")
    obj = importlib.import_module(mod)
    for part in qual.split("."):
        obj = getattr(obj, part)
    jf = _state["rebuild"].jit(obj)
    names = {p.name: True for p in jf.params if p.is_constexpr}
    names["__order__"] = [p.name for p in jf.params]
    return names


def tried_configs(entry: dict):
    """The configurations the GPU autotuner would try for this launch: the kernel's list, pruned
    for the launch's arguments where the kernel has a prune (``autotune(..., prune=)``)."""
    configs = _state["configs"].get(entry["kernel"])
    prune = _state["prunes"].get(entry["kernel"])
    if not configs or prune is None:
        return configs
    names = _constexprs(entry["kernel"])["__order__"]
    named = dict(zip(names, (_decode(a) for a in entry["args"])))
    named.update({k: _decode(v) for k, v in entry["kwargs"].items()})
    return prune(configs, named)


def _compile(entry: dict) -> list[tuple]:
    """Compile one recorded launch (each autotune config); [(config, error or '', what inspect found)]."""
    arch, rb = _state["arch"], _state["rebuild"]
    mod, qual = entry["kernel"].split(":")
    obj = importlib.import_module(mod)
    for part in qual.split("."):
        obj = getattr(obj, part)
    jf = rb.jit(obj)
    args = [_decode(a) for a in entry["args"]]
    kwargs = {k: _decode(v) for k, v in entry["kwargs"].items()}
    kwargs.update({k: v for k, v in INTERPRETER_ONLY.items() if k in kwargs})
    configs = tried_configs(entry)
    names = [p.name for p in jf.params]
    variants = [("as recorded", kwargs, None)]
    if configs:
        variants = []
        for c in configs:
            kw = {k: v for k, v in kwargs.items() if k not in c.kwargs and k not in ("num_warps", "num_stages")}
            kw.update(c.all_kwargs())
            variants.append((str(c), kw, c.pre_hook))
    out = []
    for name, kw, pre_hook in variants:
        try:
            if pre_hook is not None:  # e.g. TMA descriptors take the config's block shapes
                pre_hook({**dict(zip(names, args)), **kw})
            k = jf.warmup(*args, grid=(1,), **kw)
            smem = k.metadata.shared
            limit = SMEM_LIMIT.get(arch)
            err = f"needs {smem} B of shared memory, sm_{arch} has {limit}" if limit and smem > limit else ""
            res = _state["inspect"](k) if _state.get("inspect") and not err else ""
        except Exception as e:  # a compile failure is the finding: report it, go on
            lines = [ln.strip() for ln in str(e).strip().splitlines() if ln.strip() and set(ln.strip()) != {"^"}]
            err = f"{type(e).__name__}: {' | '.join(lines[-3:])}"
            res = ""
        out.append((name, err, res))
    return out


def load(files, arch: int) -> tuple[int, list[dict]]:
    """(launches recorded in ``files``, one of them per distinct specialisation, in order).
    Sets this process up to compile for sm_<arch>."""
    entries = {}
    for path in files:
        with open(path) as f:
            for line in f:
                if line.strip():
                    entries[line.strip()] = json.loads(line)
    _init(arch)  # here too, to read each kernel's constexpr parameters for the merge
    merged, kinds = {}, {}
    for e in entries.values():
        if e["kernel"] not in kinds:
            kinds[e["kernel"]] = _constexprs(e["kernel"])
        merged.setdefault(_key(e, kinds[e["kernel"]]), e)
    return len(entries), list(merged.values())


def serve(arch: int) -> int:
    """``--serve``: compile launches as they come, one JSON entry a line on stdin, answering each
    with a JSON line ``[[config, error or "", resources], ...]`` (the simulated device's
    ``TRITENSOR_SIM_COMPILE=1`` mode asks this of each new kernel specialisation)."""
    _init(arch)
    for line in sys.stdin:
        if line.strip():
            try:
                out = _compile(json.loads(line))
            except Exception as e:  # an entry it cannot even decode: that is the answer
                out = [["as recorded", f"{type(e).__name__}: {e}", ""]]
            sys.stdout.write(json.dumps(out) + "\n")
            sys.stdout.flush()
    return 0


def main(argv=None) -> int:
    if argv is None and sys.argv[1:2] == ["--serve"]:
        return serve(int(sys.argv[2]) if len(sys.argv) > 2 else 90)
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("files", nargs="+", help="launch records (TRITENSOR_RECORD_LAUNCHES=<path> writes <path>.<pid>.jsonl)")
    ap.add_argument("--arch", type=int, default=90, help="compute capability to compile for (default 90: Hopper)")
    ap.add_argument("--jobs", type=int, default=os.cpu_count() or 1)
    ap.add_argument("--resources", action="store_true",
                    help="also report registers, spills, shared memory and HGMMA use per configuration")
    a = ap.parse_args(argv)
    recorded, entries = load(a.files, a.arch)
    print(f"{recorded} recorded launches, {len(entries)} distinct specialisations")
    t0 = time.perf_counter()
    per_kernel = collections.defaultdict(lambda: [0, 0, []])
    resources = collections.defaultdict(set)
    with ProcessPoolExecutor(a.jobs, initializer=_init, initargs=(a.arch, a.resources)) as ex:
        for e, results in zip(entries, ex.map(_compile, entries)):
            row = per_kernel[e["kernel"]]
            for name, err, res in results:
                row[0] += 1
                if err:
                    row[1] += 1
                    row[2].append(f"{name}: {err}  (args {e['args']}, kwargs {e['kwargs']})")
                if res:
                    resources[e["kernel"]].add(res)
    failed = 0
    for kernel, (n, bad, errs) in sorted(per_kernel.items()):
        print(f"{'FAIL' if bad else 'ok  '} {kernel}: {n - bad}/{n} compiled for sm_{a.arch}")
        for msg in errs[:5]:
            print("       ", msg[:400])
        if resources.get(kernel):
            print("        compiled to:", ", ".join(sorted(resources[kernel])))
        failed += bad
    total = sum(r[0] for r in per_kernel.values())
    print(f"{len(entries)} recorded launches, {total} compiles, {failed} failed, {time.perf_counter() - t0:.0f} s")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
