"""python -m tritensor.bench: the kernel benchmark report, and the door to the other benchmarks.

For each family a table of shape, dtype, time, TFLOP/s or GB/s, the fraction of the device's
peak and the speed relative to a peer timed in the same run (torch on GPU when it is installed,
NumPy on CPU). ``--quick`` (the default) finishes in a minute or two in CPU mode.

``python -m tritensor.bench comm ...`` hands the rest of the command line to the communication
benchmark (``tritensor.bench.comm``); ``python -m tritensor.bench launch ...`` to the launch-overhead
benchmark (``bench/launch.py``); ``python -m tritensor.bench elastic ...`` to the launcher's
start and restart times (``bench/elastic.py``); ``amp`` to the mixed-precision bookkeeping
benchmark (``bench/amp.py``); ``rpc`` to RPC latency and throughput against
torch.distributed.rpc (``bench/rpc.py``); ``ddp`` to DDP's per-step communication time with each
comm hook against torch DDP over gloo (``bench/ddp.py``).
"""
from __future__ import annotations

import argparse
import datetime
import importlib
import json
import os
import sys

from . import plot

FAMILIES = {  # name -> module in this package
    "elementwise": "elementwise", "reduction": "reduction", "softmax": "softmax", "cast": "cast",
    "matmul": "matmul", "long_k": "long_k", "conv2d": "conv", "attention": "attention",
}
DTYPES = ("float32", "float16", "bfloat16", "float64")
EXTERNAL = {"comm": "tritensor.bench.comm", "launch": "tritensor.bench.launch",
            "elastic": "tritensor.bench.elastic", "amp": "tritensor.bench.amp", "rpc": "tritensor.bench.rpc",
            "ddp": "tritensor.bench.ddp"}  # own command lines
EXTERNAL_HELP = {  # what --help says of each; `python -m tritensor.bench NAME --help` gives its options
    "comm": "collectives' time and bandwidth against gloo; --soak: a seeded mix under a connection flood",
    "ddp": "DDP's per-step communication time per comm hook (allreduce, fp16, bf16, PowerSGD) against torch DDP",
    "rpc": "RPC round trips, 1 MB echo, remote() + to_here() and requests/s against torch.distributed.rpc",
    "elastic": "tritensor-run's start and restart times against torchrun",
    "launch": "what one op costs beyond its arithmetic (host path), against stock Triton's own launch",
    "amp": "mixed precision's bookkeeping: GradScaler's fused unscale-and-check, fused optimizer steps",
}


def _csv(kind, allowed=None):
    def parse(text):
        items = [t.strip() for t in text.split(",") if t.strip()]
        if not items:
            raise argparse.ArgumentTypeError(f"{kind}: expected a comma-separated list, got {text!r}")
        if allowed is not None:
            bad = [t for t in items if t not in allowed]
            if bad:
                raise argparse.ArgumentTypeError(f"{kind}: unknown {bad}; choose from {', '.join(allowed)}")
            return items
        try:
            vals = [int(t) for t in items]
        except ValueError:
            raise argparse.ArgumentTypeError(f"{kind}: expected positive integers, got {text!r}") from None
        if min(vals) <= 0:
            raise argparse.ArgumentTypeError(f"{kind}: expected positive integers, got {text!r}")
        return vals

    return parse


def build_parser() -> argparse.ArgumentParser:
    epilog = ("kernel families (the options above apply): " + ", ".join(FAMILIES) + " (default: all)\n\n"
              "benchmarks with their own command line, named first (python -m tritensor.bench NAME --help):\n"
              + "\n".join(f"  {name:<8} {EXTERNAL_HELP[name]}" for name in EXTERNAL))
    p = argparse.ArgumentParser(prog="python -m tritensor.bench", description=__doc__.split("\n\n")[0],
                                formatter_class=argparse.RawDescriptionHelpFormatter, epilog=epilog)
    p.add_argument("families", nargs="*", metavar="family", help="kernel families to run (default: all)")
    p.add_argument("--kernels", type=_csv("--kernels", tuple(FAMILIES)), default=None,
                   help="same as the positional families, comma-separated")
    mode = p.add_mutually_exclusive_group()
    mode.add_argument("--quick", action="store_true", default=True, help="few, small sizes (default)")
    mode.add_argument("--full", dest="quick", action="store_false", help="a size sweep and backward kernels")
    p.add_argument("--dtypes", type=_csv("--dtypes", DTYPES), default=None,
                   help="comma-separated dtypes (default: float32,float16 on CPU; float16,bfloat16,float32 on GPU)")
    p.add_argument("--sizes", type=_csv("--sizes"), default=None,
                   help="comma-separated sizes: elements (elementwise, reduction, softmax, cast), M=N=K "
                        "(matmul), K (long_k), H=W (conv2d), L=S (attention)")
    p.add_argument("--no-peer", dest="peer", action="store_false", help="skip the torch/NumPy peer")
    p.add_argument("--json", metavar="PATH", help="also write every measurement as JSON")
    p.add_argument("--plot", metavar="PATH", help="also save throughput against size as a PNG, one panel per "
                                                 f"family with the peer (needs matplotlib: {plot.INSTALL_HINT})")
    return p


def _dispatch_external(name: str, argv) -> int:
    module_name = EXTERNAL[name]
    try:
        module = importlib.import_module(module_name)
    except ModuleNotFoundError as e:
        if e.name and module_name.startswith(e.name):
            print(f"python -m tritensor.bench {name}: the {name} benchmark ({module_name}) is not available "
                  f"in this installation", file=sys.stderr)
            return 2
        raise
    result = module.main(list(argv))
    return int(result or 0)


def main(argv=None) -> int:
    argv = sys.argv[1:] if argv is None else list(argv)
    if argv and argv[0] in EXTERNAL:
        return _dispatch_external(argv[0], argv[1:])
    parser = build_parser()
    args = parser.parse_args(argv)
    unknown = [f for f in args.families if f not in FAMILIES]
    if unknown:
        parser.error(f"unknown family {unknown}; choose from {', '.join(FAMILIES)} (or, first and alone, one of "
                     f"{', '.join(EXTERNAL)})")
    if args.plot and not plot.available():  # before minutes of measuring, not after
        parser.error(f"--plot: matplotlib is not installed; {plot.INSTALL_HINT}")
    for opt in ("json", "plot"):
        path = getattr(args, opt)
        folder = os.path.dirname(os.path.abspath(path)) if path else None
        if folder and not os.path.isdir(folder):
            parser.error(f"--{opt}: the folder {folder!r} of {path!r} does not exist")
    families = list(dict.fromkeys(args.families + (args.kernels or []))) or list(FAMILIES)

    import tritensor as tt

    from . import common

    gpu = tt.cuda.is_available()
    dtypes = args.dtypes or (["float16", "bfloat16", "float32"] if gpu else ["float32", "float16"])
    ctx = common.Context(gpu, dtypes, args.sizes, args.quick, args.peer)
    name = common.device_name(gpu)
    stamp = datetime.datetime.now().astimezone().isoformat(timespec="seconds")
    mode = "GPU" if gpu else "CPU (Triton interpreter: times measure the interpreter, not a GPU)"
    print(f"tritensor {tt.__version__} kernel benchmark -- {name} -- {stamp}")
    print(f"mode: {mode}; {'quick' if args.quick else 'full'}; dtypes: {', '.join(dtypes)}")
    print(common.timing_note(gpu))
    peaks = {"gbs": common.memory_peak(gpu),
             "tflops": common.compute_peaks(gpu, name, dtypes, tt.backends.cuda.matmul.allow_tf32)}
    print(f"% of peak: GB/s rows against the memory peak, {peaks['gbs'].describe()}")
    compute = {p.describe(): [] for p in peaks["tflops"].values()}
    for dt, p in peaks["tflops"].items():
        compute[p.describe()].append(dt)
    for text, dts in compute.items():
        print(f"           TFLOP/s rows ({', '.join(dts)}) against {text}")
    peer = ("torch " + ctx.torch.__version__) if ctx.torch is not None else ("NumPy" if ctx.numpy_peer else "none")
    if gpu and args.peer and ctx.torch is None:
        peer = "none (torch is not installed)"
    print(f"peer: {peer}")

    all_cases = []
    for fam in families:
        module = importlib.import_module(f".{FAMILIES[fam]}", __package__)
        cases = module.cases(ctx)
        if not cases:
            print(f"\n== {fam} == (not available in this build)")
        all_cases.append((fam, cases))
    progress = common.Progress(sum(len(c) for _, c in all_cases))
    results = []
    for fam, cases in all_cases:
        fam_results = []
        for case in cases:
            progress.step(f"{fam} {case.op} {case.dtype} {case.shape}")
            fam_results.append(common.measure(case, ctx, peaks))
        progress.close()
        common.print_table(fam, fam_results)
        results.extend(fam_results)
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"device": name, "date": stamp, "mode": "gpu" if gpu else "cpu", "quick": args.quick,
                       "timing": common.timing_note(gpu),
                       "memory_peak_gbs": peaks["gbs"].value, "compute_peak_tflops": {
                           dt: p.value for dt, p in peaks["tflops"].items()},
                       "peaks": {"memory": common.dataclasses.asdict(peaks["gbs"]),
                                 "compute": {dt: common.dataclasses.asdict(p) for dt, p in peaks["tflops"].items()}},
                       "peer": peer, "results": [common.dataclasses.asdict(r) for r in results]}, f, indent=1)
        print(f"\nwrote {args.json}")
    if args.plot:
        axes = {fam: getattr(importlib.import_module(f".{FAMILIES[fam]}", __package__), "SIZE_AXIS", "size")
                for fam in families}
        device = name if gpu else name.split(", Triton")[0]
        plot.save(args.plot, results, axes,
                  f"tritensor {tt.__version__} kernel benchmark -- mode: {'GPU' if gpu else 'CPU, Triton interpreter'}"
                  f" -- device: {device} -- {stamp}\nthroughput against size: tritensor solid, the peer ({peer}, "
                  "timed in the same run) dashed or hatched")
        print(f"wrote {args.plot}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
