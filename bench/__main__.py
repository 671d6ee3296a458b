"""``python -m tritensor.bench [family ...] [options]``: the kernel benchmark report.

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
import sys

FAMILIES = {  # name -> module in this package
    "elementwise": "elementwise", "reduction": "reduction", "softmax": "softmax", "cast": "cast",
    "matmul": "matmul", "conv2d": "conv", "attention": "attention",
}
DTYPES = ("float32", "float16", "bfloat16", "float64")
EXTERNAL = {"comm": "tritensor.bench.comm", "launch": "tritensor.bench.launch",
            "elastic": "tritensor.bench.elastic", "amp": "tritensor.bench.amp", "rpc": "tritensor.bench.rpc",
            "ddp": "tritensor.bench.ddp"}  # own command lines


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
    p = argparse.ArgumentParser(prog="python -m tritensor.bench", description=__doc__.split("\n\n")[0],
                                formatter_class=argparse.RawDescriptionHelpFormatter,
                                epilog="families: " + ", ".join(FAMILIES) + " (default: all); 'comm' dispatches "
                                       "to the communication benchmark")
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
                        "(matmul), H=W (conv2d), L=S (attention)")
    p.add_argument("--no-peer", dest="peer", action="store_false", help="skip the torch/NumPy peer")
    p.add_argument("--json", metavar="PATH", help="also write every measurement as JSON")
    p.add_argument("--plot", metavar="PATH", help="also save throughput against size as a PNG (needs matplotlib)")
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
    args = build_parser().parse_args(argv)
    unknown = [f for f in args.families if f not in FAMILIES]
    if unknown:
        build_parser().error(f"unknown family {unknown}; choose from {', '.join(FAMILIES)} (or 'comm' first)")
    families = list(dict.fromkeys(args.families + (args.kernels or []))) or list(FAMILIES)

    import tritensor as tt

    from . import common

    gpu = tt.cuda.is_available()
    dtypes = args.dtypes or (["float16", "bfloat16", "float32"] if gpu else ["float32", "float16"])
    ctx = common.Context(gpu, dtypes, args.sizes, args.quick, args.peer)
    name = common.device_name(gpu)
    stamp = datetime.datetime.now().astimezone().isoformat(timespec="seconds")
    print(f"tritensor {tt.__version__} kernel benchmark -- {name} -- {stamp}")
    print(f"mode: {'GPU' if gpu else 'CPU (Triton interpreter: times measure the interpreter, not a GPU)'}; "
          f"{'quick' if args.quick else 'full'}; dtypes: {', '.join(dtypes)}")
    peaks = {"gbs": common.memory_peak_gbs(gpu), "tflops": {}}
    for dt in dtypes:
        peaks["tflops"][dt] = common.compute_peak_tflops(gpu, name, dt, tt.backends.cuda.matmul.allow_tf32)
    print(f"memory peak (measured copy bandwidth): {peaks['gbs']:.1f} GB/s; compute peak: "
          + ", ".join(f"{dt} {v:.3g} TFLOP/s" if v else f"{dt} unknown" for dt, v in peaks["tflops"].items())
          + ("" if gpu else " (measured NumPy fp32 matmul)"))
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
                       "memory_peak_gbs": peaks["gbs"], "compute_peak_tflops": peaks["tflops"], "peer": peer,
                       "results": [common.dataclasses.asdict(r) for r in results]}, f, indent=1)
        print(f"\nwrote {args.json}")
    if args.plot:
        if common.save_plot(args.plot, results):
            print(f"wrote {args.plot}")
        else:
            print("--plot: matplotlib is not installed; no plot written", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
