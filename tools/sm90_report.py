"""What each recorded kernel compiles to for Hopper (sm_90), without a GPU: the properties that
make a kernel fast, per kernel and per autotune configuration.

    TRITENSOR_RECORD_LAUNCHES=/tmp/launches python -c "<a workload>"
    python tools/sm90_report.py /tmp/launches.*.jsonl [--configs] [--max-configs N] [--json out.json] [--jobs 1]

No GPU has been lent to time the kernels, so what can be judged is the code the compiler makes.
``tools/sm90_compile.py`` replays each launch through Triton's JIT for sm_90 (every autotune
configuration) and this script reuses that machinery, reading from each compiled kernel:

* registers per thread and spilled bytes: the stack frame ptxas spills registers to (no kernel
  here keeps a local array), from the cubin (``cuobjdump``), and the SASS's spill loads/stores;
* shared memory (``metadata.shared``: what the launch asks for, static and dynamic);
* ``wgmma``: the count of ``wgmma.mma_async`` instructions in the PTX, Hopper's warpgroup MMA
  (what ``HGMMA`` is in the SASS; ``mma`` below names the kind the SASS has: HGMMA, HMMA or -);
* the widths of global memory accesses in the PTX, by the pointer argument each addresses (its
  address traced back through the registers it is computed from to the kernel's parameters, or
  to a table the compiler put in global memory such as libdevice's ``__cudart_i2opi_f``):
  ``ld x:128b x4,32b x2`` is 4 loads of 128 bits and 2 of 32 bits from argument ``x``.
  ``ld`` is ``ld.global[.nc][.vN].<type>``, ``st`` ``st.global...``, ``cp`` ``cp.async`` (global
  -> shared, by bytes copied), ``tma ld``/``tma st`` the bulk tensor copies through a descriptor.
  A bandwidth-bound kernel wants 128-bit accesses (``.v4.b32``): narrower ones issue more
  instructions per byte. Counts are static (instructions in the code), not executed.

It prints one line per kernel specialisation (ranges across configurations), each
configuration with ``--configs``; ``--json`` writes everything for tests and RESULTS
(``tests/test_sm90_report.py`` asserts the properties on a small workload). ``--max-configs N``
compiles only the first N configurations of each autotuned kernel, for a quick report.
"""
from __future__ import annotations

import argparse
import collections
import json
import os
import re
import sys
import time
from concurrent.futures import ProcessPoolExecutor

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import sm90_compile as sc  # noqa: E402  (first: it imports Triton in compile mode, before tritensor)

_REG = re.compile(r"%\w+")
_PARAM = re.compile(r"\b\w+_param_(\d+)\b")
_BRACKET = re.compile(r"\[([^\]]*)\]")
_GLOBAL = re.compile(r"^\.global\s.*?([\w$]+)\[", re.M)
_VEC = re.compile(r"v(\d+)$")
_TYPE = re.compile(r"[bsuf](\d+)$")


def _param_names(signature: dict) -> list[str]:
    """The kernel's PTX parameters in order, by argument name: tuples flattened, constexprs gone, a
    TMA descriptor of rank r followed by its r sizes and r strides."""
    names = []
    for name, ty in signature.items():
        leaves = ty if isinstance(ty, tuple) else (ty,)
        names += [name if len(leaves) == 1 else f"{name}[{i}]" for i, t in enumerate(leaves) if t != "constexpr"]
        if str(ty).startswith("tensordesc"):
            names += [f"{name}.shape"] * (2 * (str(ty).count(",") + 1))
    return names


def _trace(regs, defs) -> set:
    seen, todo = set(), list(regs)
    while todo:
        r = todo.pop()
        if r not in seen:
            seen.add(r)
            todo += defs.get(r, ())
    return seen


def access_widths(ptx: str, signature: dict) -> dict:
    """The global memory accesses of a PTX text by kind, by the argument they address, by width:
    ``{'ld' | 'st' | 'cp': {arg: {bits: count}}, 'tma': {'ld' | 'st': {arg: count}}}``. An address is
    traced back through the registers it is computed from to the kernel's parameters ('?': none)."""
    params = _param_names(signature)
    pointers = {p for p in params if str(signature.get(p.split("[")[0], "")).startswith(("*", "tensordesc"))}
    constants = set(_GLOBAL.findall(ptx))  # tables the compiler put in global memory (libdevice's, say)
    defs = collections.defaultdict(set)  # register -> the registers and parameters it is computed from
    accesses = []  # (kind, address registers, bits)
    for line in ptx.splitlines():
        ins = line.strip().split(";")[0]
        if ins.startswith("@"):
            ins = ins.split(None, 1)[1] if " " in ins else ""
        op, _, operands = ins.partition(" ")
        mods = op.split(".")
        if not operands or op.startswith(("bra", "ret", "//", ".")):
            continue
        brackets = _BRACKET.findall(operands)
        if op.startswith("cp.async.bulk.tensor"):  # TMA: [smem], [descriptor, {coords}] loads, the reverse stores
            store = mods[5] == "global"
            accesses.append(("tma st" if store else "tma ld", _REG.findall(brackets[0 if store else 1]), 0))
        elif (mods[0] in ("ld", "st") or op.startswith(("cp.async.ca.", "cp.async.cg."))) and "global" in mods:
            vec = next((int(_VEC.match(m).group(1)) for m in mods if _VEC.match(m)), 1)
            bits = vec * next((int(_TYPE.match(m).group(1)) for m in reversed(mods) if _TYPE.match(m)), 0)
            if mods[0] == "cp":  # cp.async.c[ag].shared.global [smem], [global], bytes
                bits = 8 * int(operands.split(",")[2].strip(), 0)
            accesses.append((mods[0], _REG.findall(brackets[-1] if mods[0] == "cp" else brackets[0]), bits))
        if mods[0] in ("st", "cp", "red", "atom") and "global" in mods:
            continue
        dst, rest = (operands[1:].split("}", 1) if operands.startswith("{") else operands.split(",", 1) + [""])[:2]
        srcs = set(_REG.findall(rest)) | {params[int(i)] for i in _PARAM.findall(rest) if int(i) < len(params)}
        srcs |= {w for w in re.findall(r"[\w$]+", rest) if w in constants}
        for r in _REG.findall(dst):
            defs[r] |= srcs
    out = {"ld": {}, "st": {}, "cp": {}, "tma": {"ld": {}, "st": {}}}
    for kind, regs, bits in accesses:
        arg = ",".join(sorted(_trace(regs, defs) & (pointers | constants))) or "?"
        if kind.startswith("tma"):
            out["tma"][kind[4:]][arg] = out["tma"][kind[4:]].get(arg, 0) + 1
        else:
            hist = out[kind].setdefault(arg, {})
            hist[bits] = hist.get(bits, 0) + 1
    return out


def _inspect(kernel) -> dict:
    """What one compiled configuration is made of (runs in the worker, per config)."""
    use = sc.resource_usage(kernel.asm["cubin"])
    ptx = kernel.asm["ptx"]
    return {"reg": use["reg"], "spill": use["local"], "spill_ops": use["spill_ops"], "smem": kernel.metadata.shared,
            "mma": use["mma"],
            "wgmma": ptx.count("wgmma.mma_async"), "warps": kernel.metadata.num_warps,
            "stages": kernel.metadata.num_stages, **access_widths(ptx, dict(kernel.src.signature))}


def _init(arch: int, max_configs: int | None) -> None:
    sc._init(arch)
    sc._state["inspect"] = _inspect
    if max_configs:
        sc._state["configs"] = {k: v[:max_configs] for k, v in sc._state["configs"].items()}


def _short(v) -> str:
    if isinstance(v, dict):
        if "ptr" in v or "tl" in v:
            return str(v.get("ptr") or v.get("tl")).replace("bfloat", "bf").replace("float", "fp")
        if "desc" in v:
            return "desc:" + _short({"ptr": v["desc"]["dtype"]})
        if "tuple" in v:
            return "(" + ",".join(_short(x) for x in v["tuple"]) + ")"
    return str(v)


def _is_ptr(v) -> bool:
    return isinstance(v, dict) and ("ptr" in v or "desc" in v)


def _labels(entries: list[dict], fields: list[dict]) -> list[str]:
    """Kernel name, its operands' element types and the compile-time values its recorded
    specialisations differ in; the other arguments that differ where those do not tell them apart."""
    def differ(group, keys):
        return [k for k in keys if len({json.dumps(g.get(k), sort_keys=True) for g in group}) > 1]

    def label(e, f, shown):
        dtypes = dict.fromkeys(_short(v).replace("desc:", "") for v in f.values() if _is_ptr(v))
        text = " ".join(p for p in [e["kernel"].rsplit(":", 1)[-1], ",".join(dtypes),
                                    *(f"{k}={_short(f[k])}" for k in shown)] if p)
        return text if len(text) <= 72 else text[:71] + "…"

    out = []
    for e, f in zip(entries, fields):
        same = [g for d, g in zip(entries, fields) if d["kernel"] == e["kernel"]]
        shown = differ(same, e["kwargs"])
        twins = [g for g in same if all(json.dumps(g.get(k)) == json.dumps(f[k]) for k in e["kwargs"])]
        out.append(label(e, f, shown + [k for k in differ(twins, f) if k not in e["kwargs"] and not _is_ptr(f[k])]))
    return out


def _configs(entry: dict) -> list[dict]:
    configs = sc.tried_configs(entry)  # pruned as _compile prunes them, so names and results pair up
    if configs:
        return [c.all_kwargs() for c in configs]
    return [{k: v for k, v in entry["kwargs"].items() if k in ("num_warps", "num_stages")}]


def report(files, arch: int = 90, jobs: int = 1, max_configs: int | None = None) -> list[dict]:
    """One dict per recorded specialisation: kernel, label, arg_names, args, kwargs, autotuned and,
    per configuration, the config and what it compiled to (``err`` non-empty if it did not)."""
    _, entries = sc.load(files, arch)
    _init(arch, max_configs)
    names = {e["kernel"]: sc._constexprs(e["kernel"])["__order__"] for e in entries}
    fields = [dict(zip(names[e["kernel"]], e["args"]), **e["kwargs"]) for e in entries]
    out = []
    with ProcessPoolExecutor(jobs, initializer=_init, initargs=(arch, max_configs)) as ex:
        for e, label, results in zip(entries, _labels(entries, fields), ex.map(sc._compile, entries)):
            rows = [{"config": c, "err": err, **(res or {})} for c, (_, err, res) in zip(_configs(e), results)]
            out.append({"kernel": e["kernel"], "label": label, "arg_names": names[e["kernel"]],
                        "args": e["args"], "kwargs": e["kwargs"], "autotuned": e["kernel"] in sc._state["configs"],
                        "configs": rows})
    return out


def _kb(nbytes: int) -> float:
    return float(f"{nbytes / 1024:.3g}") if nbytes < 10240 else round(nbytes / 1024)


def _range(values) -> str:
    values = [v for v in values if v is not None]
    if not values:
        return "?"
    lo, hi = min(values), max(values)
    return f"{lo:g}" if lo == hi else f"{lo:g}-{hi:g}"


def _hist(hists) -> str:
    """'128b x4,32b x0-2' over configurations' {bits: count} (a width a config lacks counts 0 there)."""
    widths = sorted({int(w) for h in hists for w in h}, reverse=True)
    return ",".join(f"{w}b x{_range([h.get(w, h.get(str(w), 0)) for h in hists])}" for w in widths)


def _accesses(rows) -> str:
    """'ld x:128b x4 w:128b x1; st y:128b x4; tma ld a_desc x2' across configurations."""
    parts = []
    for kind in ("ld", "st", "cp", "tma ld", "tma st"):
        hists = [r["tma"][kind[4:]] if kind.startswith("tma") else r[kind] for r in rows]
        args = list(dict.fromkeys(a for h in hists for a in h))
        if kind.startswith("tma"):
            parts += [kind + " " + " ".join(f"{a} x{_range([h.get(a, 0) for h in hists])}" for a in args)] if args else []
        elif args:
            parts.append(kind + " " + " ".join(f"{a}:{_hist([h.get(a, {}) for h in hists])}" for a in args))
    return "; ".join(parts) or "-"


def _spills(rows) -> str:
    """'0', or '0-1024 (2/8 configs)' where some configurations spill."""
    spilling = sum(1 for r in rows if r["spill"])
    return _range(r["spill"] for r in rows) + (f" ({spilling}/{len(rows)} configs)" if spilling else "")


def _config_name(c: dict) -> str:
    blocks = " ".join(f"{k}={v}" for k, v in c.items() if k not in ("num_warps", "num_stages", "num_ctas"))
    return f"{blocks} w{c.get('num_warps', '-')} s{c.get('num_stages', '-')}"


def format_table(specs: list[dict], configs: bool = False) -> str:
    lines = ["| kernel | configs | registers | spills (B) | shared (KB) | wgmma (configs: count) | mma | "
             "global accesses (bits x static count) |", "|---|---|---|---|---|---|---|---|"]
    for s in specs:
        ok = [r for r in s["configs"] if not r["err"]]
        n = len(s["configs"])
        if not ok:
            lines.append(f"| {s['label']} | 0/{n} | | | | | | {s['configs'][0]['err'][:120]} |")
            continue
        wg = [r for r in ok if r["wgmma"]]
        lines.append(f"| {s['label']} | {len(ok)}/{n} | {_range(r['reg'] for r in ok)} | "
                     f"{_spills(ok)} | {_range(_kb(r['smem']) for r in ok)} | "
                     f"{len(wg)}/{len(ok)}{': ' + _range(r['wgmma'] for r in wg) if wg else ''} | "
                     f"{'/'.join(sorted({r['mma'] for r in ok}))} | {_accesses(ok)} |")
        if configs and s["autotuned"]:
            for r in s["configs"]:
                spill = f"S{r['spill']} ({r['spill_ops']} LDL/STL)" if r.get("spill") else "S0"
                detail = (r["err"][:200] if r["err"] else f"R{r['reg']} {spill} smem {_kb(r['smem']):g} KB, "
                          f"wgmma {r['wgmma']} {r['mma']}; {_accesses([r])}")
                lines.append(f"|   {_config_name(r['config'])} | | | | | | | {detail} |")
    return "\n".join(lines)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("files", nargs="+", help="launch records (TRITENSOR_RECORD_LAUNCHES=<path> writes <path>.<pid>.jsonl)")
    ap.add_argument("--arch", type=int, default=90, help="compute capability to compile for (default 90: Hopper)")
    ap.add_argument("--jobs", type=int, default=os.cpu_count() or 1)
    ap.add_argument("--max-configs", type=int, default=None, help="compile only the first N configs of each kernel")
    ap.add_argument("--configs", action="store_true", help="also print one line per configuration")
    ap.add_argument("--json", metavar="PATH", help="write every specialisation's configs and findings as JSON")
    a = ap.parse_args(argv)
    t0 = time.perf_counter()
    specs = report(a.files, a.arch, a.jobs, a.max_configs)
    print(format_table(specs, a.configs))
    failed = sum(1 for s in specs for r in s["configs"] if r["err"])
    total = sum(len(s["configs"]) for s in specs)
    print(f"\n{len(specs)} specialisations, {total} compiles for sm_{a.arch}, {failed} failed, "
          f"{time.perf_counter() - t0:.0f} s")
    if a.json:
        with open(a.json, "w") as f:
            json.dump(specs, f, indent=1)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
