"""torch's module tree under tritensor's name: every torch module path in ``tests/torch_names/``
imports as ``tritensor.<path>``, every nn class sits in the ``nn.modules`` file torch keeps it in,
``tritensor.distributed`` is ``tritensor.comm`` (elastic included) module for module, and
``tritensor.cuda.amp``, ``cuda.manual_seed``/``is_bf16_supported`` and ``tritensor.backends``'
switches behave as torch 2.13's.

For names: ``test_name_coverage_table`` prints, per module, how many of torch's public names
tritensor has and which it lacks (``pytest -s -k coverage_table``, or run this file with Python).
In the namespaces real model code lives in (:data:`GATED`), every name torch lists is either
present, or left out by design with a reason (``tests/torch_names/not_provided.tsv``), or counted
as not yet built; :data:`NOT_YET_BUILT` pins that count per namespace, which may only go down, and
README's coverage table must be the one this file computes. The lists are made by
``tools/torch_names.py`` (tests/torch_names/README.md).
"""
from __future__ import annotations

import importlib
import inspect
import pathlib
import pkgutil
import re
import sys
import warnings

import pytest

import tritensor as tt
import tritensor.nn as nn
from tritensor.runtime import mode

NAMES_DIR = pathlib.Path(__file__).resolve().parent / "torch_names"
NN_MODULES_DIR = pathlib.Path(tt.nn.modules.__file__).resolve().parent


def _read(path: pathlib.Path) -> list[str]:
    return [line.strip() for line in path.read_text().splitlines() if line.strip() and not line.startswith("#")]


LISTS = {path.name[:-len(".txt")]: _read(path) for path in sorted(NAMES_DIR.glob("*.txt"))}
CLASS_LISTS = ("torch.Tensor",)  # lists of a class's attributes, not of a module's
NN_FILES = {name.rsplit(".", 1)[1]: names for name, names in LISTS.items() if name.startswith("torch.nn.modules.")}


def tritensor_path(torch_path: str) -> str:
    return "tritensor" + torch_path[len("torch"):]


def _mirrored(torch_path: str) -> bool:
    """Every listed module must import, except the nn.modules files tritensor has no file for yet
    (torch keeps 26; which of their classes are missing is name coverage, reported below)."""
    if torch_path.startswith("torch.nn.modules."):
        return (NN_MODULES_DIR / (torch_path.rsplit(".", 1)[1] + ".py")).exists()
    return True


MODULE_PATHS = [name for name in LISTS if name not in CLASS_LISTS and _mirrored(name)]


# ----- the lists themselves -----------------------------------------------------------------------
def test_the_lists_are_tools_output():
    """Each list as tools/torch_names.py writes it: a header naming the module and torch's version,
    then the names, sorted and unique; the modules the issue names are all there."""
    for name, names in LISTS.items():
        header = (NAMES_DIR / f"{name}.txt").read_text().splitlines()[0]
        assert header.startswith(f"# {name}: {len(names)} public names of torch 2.13"), header
        assert names == sorted(set(names)), name  # may be empty: torch's linear_cross_entropy exports nothing
    for required in ("torch", "torch.Tensor", "torch.nn", "torch.nn.modules", "torch.nn.functional", "torch.nn.init",
                     "torch.nn.utils", "torch.nn.parallel", "torch.distributed", "torch.distributed.elastic",
                     "torch.cuda", "torch.cuda.amp", "torch.amp", "torch.backends.cuda", "torch.backends.cudnn",
                     "torch.optim", "torch.optim.lr_scheduler", "torch.utils.data", "torch.autograd", "torch.linalg",
                     "torch.serialization", *(f"torch.nn.modules.{f}" for f in ("linear", "conv", "activation",
                                                                                "rnn", "transformer", "utils"))):
        assert required in LISTS, required


# ----- module paths: these fail ---------------------------------------------------------------------
@pytest.mark.parametrize("torch_path", MODULE_PATHS)
def test_torch_module_path_imports_under_tritensors_name(torch_path):
    module = importlib.import_module(tritensor_path(torch_path))
    assert module is sys.modules[tritensor_path(torch_path)]


def test_every_nn_class_sits_in_torchs_file():
    """Each Module class of tt.nn is defined in nn/modules/<file>.py, the file torch keeps it in
    (its real home: ``__module__`` says so, no re-export), and is the same object at both paths."""
    classes = {name: obj for name, obj in vars(nn).items()
               if inspect.isclass(obj) and issubclass(obj, nn.Module) and not name.startswith("_")}
    assert len(classes) >= 60
    wrong = []
    for name, cls in sorted(classes.items()):
        homes = [f for f, names in NN_FILES.items() if name in names]
        if not homes and name in LISTS["torch.nn.parallel"]:  # torch.nn.DataParallel: nn/parallel/ is its home
            if not (cls.__module__.startswith("tritensor.nn.parallel.") and getattr(nn.parallel, name) is cls):
                wrong.append(f"{name}: defined in {cls.__module__}, torch keeps it in torch.nn.parallel")
            continue
        if not homes:
            wrong.append(f"{name}: torch keeps no class of that name in nn.modules")
            continue
        path = f"tritensor.nn.modules.{homes[0]}"
        if cls.__module__ != path or getattr(importlib.import_module(path), name, None) is not cls:
            wrong.append(f"{name}: defined in {cls.__module__}, torch keeps it in torch.nn.modules.{homes[0]}")
        assert getattr(nn.modules, name) is cls
    assert not wrong, "\n".join(wrong)


def test_nn_modules_helpers_as_torchs():
    """nn/modules/utils.py's tuple makers and linear.py's NonDynamicallyQuantizableLinear, torch's."""
    from tritensor.nn.modules import linear, utils

    assert utils._single(3) == (3,) and utils._pair(3) == (3, 3) and utils._triple(2) == (2, 2, 2)
    assert utils._quadruple(1) == (1, 1, 1, 1) and utils._pair([4, 5]) == (4, 5) and utils._pair((6,)) == (6,)
    assert utils._ntuple(3, "_three")(7) == (7, 7, 7) and utils._ntuple(3, "_three").__name__ == "_three"
    assert utils._pair.__name__ == "_pair"
    q = linear.NonDynamicallyQuantizableLinear
    assert issubclass(q, nn.Linear) and q.__module__ == "tritensor.nn.modules.linear"
    mha = nn.MultiheadAttention(4, 2)
    assert type(mha.out_proj) is q and repr(mha.out_proj).startswith("NonDynamicallyQuantizableLinear(in_features=4")
    assert sorted(mha.state_dict()) == ["in_proj_bias", "in_proj_weight", "out_proj.bias", "out_proj.weight"]


# ----- tritensor.distributed is tritensor.comm ---------------------------------------------------
def _submodules(package) -> list[str]:
    return [m.name[len(package.__name__):] for m in pkgutil.walk_packages(package.__path__, package.__name__ + ".")]


@pytest.mark.parametrize("alias, real", [("tritensor.distributed", "tritensor.comm"),
                                         ("tritensor.distributed.elastic", "tritensor.elastic")])
def test_distributed_is_comm_module_for_module(alias, real):
    """Every submodule at any depth: the same object under both names, keeping its own spec."""
    real = importlib.import_module(real)
    subs = _submodules(real)
    assert len(subs) >= 15 and any(s.endswith(".rpc") or s.endswith(".agent") for s in subs)
    for sub in ["", *subs]:
        a, b = importlib.import_module(alias + sub), importlib.import_module(real.__name__ + sub)
        assert a is b and sys.modules[alias + sub] is b, sub
        assert b.__spec__.name == real.__name__ + sub and b.__name__ == real.__name__ + sub


def test_distributed_as_torch_scripts_import_it():
    import tritensor.distributed as dist
    import tritensor.distributed.algorithms.ddp_comm_hooks.default_hooks as default_hooks
    import tritensor.distributed.rpc as rpc
    from tritensor.distributed import destroy_process_group, init_process_group
    from tritensor.distributed.elastic.multiprocessing.errors import record

    assert dist is tt.comm is tt.distributed
    assert init_process_group is tt.comm.init_process_group and destroy_process_group is tt.comm.destroy_process_group
    assert rpc is importlib.import_module("tritensor.comm.rpc") and rpc.RRef is tt.comm.rpc.RRef
    assert default_hooks.allreduce_hook is importlib.import_module(
        "tritensor.comm.algorithms.ddp_comm_hooks.default_hooks").allreduce_hook
    assert record is importlib.import_module("tritensor.elastic.multiprocessing.errors").record
    assert importlib.import_module("tritensor.distributed.launcher.api") is importlib.import_module(
        "tritensor.elastic.launcher.api")
    assert importlib.import_module("tritensor.distributed.run") is importlib.import_module("tritensor.run")


def test_distributed_unknown_submodule_names_the_alias():
    with pytest.raises(ModuleNotFoundError, match=r"No module named 'tritensor\.distributed\.nope'"):
        importlib.import_module("tritensor.distributed.nope")
    with pytest.raises(ModuleNotFoundError, match=r"tritensor\.distributed\.rpc\.nope"):
        importlib.import_module("tritensor.distributed.rpc.nope")
    assert tt.module_aliases.real_name("tritensor.distributedx") is None
    assert tt.module_aliases.real_name("tritensor.distributed.elastic.timer") == "tritensor.elastic.timer"


# ----- tritensor.cuda.amp, seeding, bfloat16 ----------------------------------------------------
def test_cuda_amp_autocast_is_deprecated_cuda_autocast():
    import tritensor.cuda.amp as cuda_amp

    assert cuda_amp is tt.cuda.amp and issubclass(cuda_amp.autocast, tt.amp.autocast)
    params = inspect.signature(cuda_amp.autocast).parameters
    assert [(p.name, p.default) for p in params.values()] == [("enabled", True), ("dtype", tt.float16),
                                                              ("cache_enabled", True)]
    msg = (r"`tritensor.cuda.amp.autocast\(args...\)` is deprecated. Please use "
           r"`tritensor.amp.autocast\('cuda', args...\)` instead.")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)  # CPU mode: "CUDA is not available. Disabling", as torch
        with pytest.warns(FutureWarning, match=msg):
            ctx = cuda_amp.autocast(dtype=tt.bfloat16)
    assert ctx.device == "cuda" and ctx.fast_dtype is tt.bfloat16
    with ctx:
        assert tt.is_autocast_enabled("cuda") is mode.GPU
        assert tt.get_autocast_dtype("cuda") is tt.bfloat16
    assert not tt.is_autocast_enabled("cuda")
    assert cuda_amp.amp_definitely_not_available() is (not mode.GPU)


@pytest.mark.skipif(not mode.GPU, reason="autocast regions for cuda need the GPU path (GPU or simulated device)")
def test_cuda_amp_autocast_region_lowers_a_matmul():
    a, b = tt.ones(4, 8, device="cuda"), tt.ones(8, 2, device="cuda")
    with pytest.warns(FutureWarning):
        ctx = tt.cuda.amp.autocast()
    with ctx:
        out = a @ b
    assert out.dtype is tt.float16 and (a @ b).dtype is tt.float32
    assert out.float().cpu().tolist() == [[8.0, 8.0]] * 4


def test_cuda_amp_grad_scaler_and_custom_fwd():
    msg = (r"`tritensor.cuda.amp.GradScaler\(args...\)` is deprecated. Please use "
           r"`tritensor.amp.GradScaler\('cuda', args...\)` instead.")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)
        with pytest.warns(FutureWarning, match=msg):
            scaler = tt.cuda.amp.GradScaler(init_scale=128.0, growth_interval=7)
    assert isinstance(scaler, tt.amp.GradScaler) and scaler._device == "cuda"
    assert scaler.is_enabled() is mode.GPU
    assert scaler.get_scale() == (128.0 if mode.GPU else 1.0)
    if mode.GPU:  # a disabled scaler keeps no settings (torch's neither)
        assert scaler.get_growth_interval() == 7
    defaults = inspect.signature(tt.cuda.amp.GradScaler).parameters
    assert [(p.name, p.default) for p in defaults.values()] == [
        ("init_scale", 2.0 ** 16), ("growth_factor", 2.0), ("backoff_factor", 0.5), ("growth_interval", 2000),
        ("enabled", True)]

    with pytest.warns(FutureWarning, match=r"custom_fwd\(args..., device_type='cuda'\)"):
        fwd = tt.cuda.amp.custom_fwd(lambda ctx, x: x * 2)
    with pytest.warns(FutureWarning, match=r"custom_bwd\(args..., device_type='cuda'\)"):
        bwd = tt.cuda.amp.custom_bwd(lambda ctx, g: g * 2)

    class Double(tt.autograd.Function):
        forward, backward = staticmethod(fwd), staticmethod(bwd)

    x = tt.ones(3, requires_grad=True)
    Double.apply(x).sum().backward()
    assert x.grad.tolist() == [2.0, 2.0, 2.0]


def test_cuda_manual_seed_seeds_the_shared_generator_on_the_gpu_path():
    tt.manual_seed(11)
    assert tt.cuda.manual_seed(5) is None and tt.cuda.manual_seed_all(6.0) is None
    # on the GPU path one generator feeds every device, so seeding the GPU seeds it; without
    # CUDA torch ignores the call, and so does tritensor
    assert tt.initial_seed() == tt.cuda.initial_seed() == (6 if mode.GPU else 11)
    with pytest.raises(ValueError):
        tt.cuda.manual_seed("five")  # int(seed), as torch
    if mode.GPU:
        tt.cuda.manual_seed(7)
        first = tt.rand(5, device="cuda").cpu().tolist()
        tt.cuda.manual_seed(7)
        assert tt.rand(5, device="cuda").cpu().tolist() == first
    tt.cuda.seed_all()
    tt.cuda.seed()
    assert tt.cuda.initial_seed() == (tt.initial_seed() if mode.GPU else 11)


def test_is_bf16_supported_as_torch():
    if mode.GPU and not mode.SIM:
        expected = tt.cuda.get_device_capability()[0] >= 8
    else:
        expected = False  # torch's answer without a CUDA device; the simulated device is not one
    assert tt.cuda.is_bf16_supported() is expected and tt.cuda.is_bf16_supported(including_emulation=False) is expected


# ----- tritensor.backends ---------------------------------------------------------------------
def test_backends_switches_have_torchs_defaults_and_paths():
    import tritensor.backends.cuda as bcuda
    import tritensor.backends.cudnn as cudnn
    import tritensor.backends.mps as mps

    assert bcuda is tt.backends.cuda and cudnn is tt.backends.cudnn and mps is tt.backends.mps
    assert cudnn.__name__ == "tritensor.backends.cudnn"
    m = bcuda.matmul
    assert (m.allow_tf32, m.allow_fp16_reduced_precision_reduction, m.allow_bf16_reduced_precision_reduction) == (
        False, True, True)
    assert (cudnn.allow_tf32, cudnn.benchmark, cudnn.deterministic, cudnn.enabled) == (True, False, False, True)
    assert cudnn.is_available() is False and cudnn.version() is None and bcuda.is_built() is True
    assert mps.is_available() is False and mps.is_built() is False
    for name in ("benchmark", "deterministic", "enabled", "allow_tf32"):
        old = getattr(cudnn, name)
        setattr(cudnn, name, not old)
        assert getattr(tt.backends.cudnn, name) is (not old)
        setattr(cudnn, name, old)
        with pytest.raises(TypeError, match=f"{name}: expected a bool, got int"):
            setattr(cudnn, name, 1)
    with pytest.raises(AttributeError, match="tritensor.backends.cudnn has no setting 'benchmarks'"):
        cudnn.benchmarks = True
    with pytest.raises(TypeError, match="allow_fp16_reduced_precision_reduction: expected a bool"):
        m.allow_fp16_reduced_precision_reduction = 0


# ----- names: reported, not gated -----------------------------------------------------------------
def _has(module, name: str) -> bool:
    return hasattr(module, name)


def coverage() -> list[tuple[str, int, int, list[str]]]:
    """(torch module, names tritensor has at the same path, names listed, the missing names) per list."""
    rows = []
    for torch_path, names in LISTS.items():
        if torch_path == "torch.Tensor":
            target = tt.Tensor
        else:
            try:
                target = importlib.import_module(tritensor_path(torch_path))
            except ImportError:
                rows.append((torch_path, 0, len(names), list(names)))
                continue
        missing = [n for n in names if not _has(target, n)]
        rows.append((torch_path, len(names) - len(missing), len(names), missing))
    return rows


def format_table(rows) -> str:
    lines = [f"{'torch module':<62} {'has':>5} {'of':>5} {'cover':>6}  missing (first 8)"]
    for path, has, total, missing in rows:
        shown = " ".join(missing[:8]) + (f" ... (+{len(missing) - 8})" if len(missing) > 8 else "")
        lines.append(f"{path:<62} {has:>5} {total:>5} {has / max(total, 1):>6.0%}  {shown}")
    has, total = sum(r[1] for r in rows), sum(r[2] for r in rows)
    lines.append(f"{'all':<62} {has:>5} {total:>5} {has / total:>6.0%}")
    return "\n".join(lines)


def test_name_coverage_table():
    """Prints the table (``-s`` shows it). Checks the reporter: each row splits its list into names
    present at tritensor's path and missing ones, and names known to be there count as present."""
    rows = coverage()
    assert [r[0] for r in rows] == list(LISTS)
    for path, has, total, missing in rows:
        assert total == len(LISTS[path]) and has + len(missing) == total and set(missing) <= set(LISTS[path])
    by_path = {r[0]: r for r in rows}
    for path, name in (("torch.nn", "Linear"), ("torch.nn.modules.linear", "Linear"), ("torch.Tensor", "add"),
                       ("torch", "zeros"), ("torch.distributed", "all_reduce"), ("torch.cuda.amp", "GradScaler"),
                       ("torch.backends.cudnn", "benchmark")):
        assert name in LISTS[path] and name not in by_path[path][3], (path, name)
    print("\n" + format_table(rows))


# ----- names: gated in the namespaces model code uses ---------------------------------------------
GATED = ("torch", "torch.Tensor", "torch.nn", "torch.nn.functional", "torch.nn.init", "torch.optim",
         "torch.optim.lr_scheduler", "torch.cuda", "torch.linalg", "torch.amp", "torch.utils.data",
         "torch.autograd")
# Names torch lists, tritensor lacks and not_provided.tsv does not excuse, per namespace (2026-11-27: none).
# A change that builds some lowers its number here (and README's table, which the test compares);
# one that loses a name fails.
NOT_YET_BUILT = {
    "torch": 0, "torch.Tensor": 0, "torch.nn": 0, "torch.nn.functional": 0, "torch.nn.init": 0,
    "torch.optim": 0, "torch.optim.lr_scheduler": 0, "torch.cuda": 0, "torch.linalg": 0, "torch.amp": 0,
    "torch.utils.data": 0, "torch.autograd": 0,
}


def _rules() -> list[tuple[str, re.Pattern, str]]:
    rules = []
    for line in (NAMES_DIR / "not_provided.tsv").read_text().splitlines():
        if line.strip() and not line.startswith("#"):
            namespace, pattern, reason = line.split("\t")
            rules.append((namespace, re.compile(pattern), reason))
    return rules


def by_design(namespace: str, name: str, rules=None) -> str | None:
    """The reason not_provided.tsv gives for leaving ``namespace.name`` out, or None."""
    for ns, pattern, reason in rules if rules is not None else _rules():
        if ns in ("*", namespace) and pattern.fullmatch(name):
            return reason
    return None


def gated_rows() -> list[tuple[str, int, int, int, list[str]]]:
    """(namespace, has, left out by design, listed, not yet built) for each gated namespace."""
    rules, rows = _rules(), {r[0]: r for r in coverage()}
    out = []
    for namespace in GATED:
        _, has, total, missing = rows[namespace]
        todo = [n for n in missing if by_design(namespace, n, rules) is None]
        out.append((namespace, has, len(missing) - len(todo), total, todo))
    return out


def readme_table(rows) -> str:
    lines = ["| torch namespace | names torch 2.13 lists | tritensor has | left out by design | not yet built |",
             "|---|---:|---:|---:|---:|"]
    for namespace, has, excused, total, todo in rows:
        lines.append(f"| `{namespace}` | {total} | {has} ({has / total:.0%}) | {excused} | {len(todo)} |")
    return "\n".join(lines)


def test_every_rule_of_not_provided_excuses_a_missing_name():
    """A rule that matches nothing torch lists and tritensor lacks is stale (or mistyped)."""
    rows = {r[0]: r for r in coverage()}
    for namespace, pattern, reason in _rules():
        spaces = GATED if namespace == "*" else (namespace,)
        assert reason and any(pattern.fullmatch(n) for ns in spaces for n in rows[ns][3]), pattern.pattern


def test_no_name_tritensor_has_is_listed_as_left_out():
    rules = _rules()
    for namespace in GATED:
        target = tt.Tensor if namespace == "torch.Tensor" else importlib.import_module(tritensor_path(namespace))
        present = [n for n in LISTS[namespace] if _has(target, n) and by_design(namespace, n, rules)]
        assert not present, f"{namespace}: present, yet not_provided.tsv calls them left out: {present}"


def test_names_not_yet_built_only_go_down_and_readme_says_how_many():
    rows = gated_rows()
    counts = {namespace: len(todo) for namespace, _, _, _, todo in rows}
    grew = {ns: (n, NOT_YET_BUILT[ns], [t for t in todo][:20]) for ns, _, _, _, todo in rows
            if (n := len(todo)) > NOT_YET_BUILT[ns]}
    assert not grew, f"names torch lists that tritensor lost or never had, unexcused (count, pinned, names): {grew}"
    assert counts == NOT_YET_BUILT, f"fewer names left to build: lower NOT_YET_BUILT to {counts}"
    readme = (pathlib.Path(__file__).resolve().parents[1] / "README.md").read_text()
    assert readme_table(rows) in readme, "README's coverage table is stale:\n" + readme_table(rows)


if __name__ == "__main__":
    print(format_table(coverage()))
    print(readme_table(gated_rows()))
