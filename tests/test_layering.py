"""The package's import structure: dependencies flow one way and no module dodges a cycle.

Layers, lowest first (a module may import its own layer and the layers beneath it):

    0  runtime/, backends.py,          launching, mode, devices, dtypes, memory, streams, flags,
       futures.py, multiproc.py,       torch.futures' Future and torch.multiprocessing (no dependencies),
       onnx.py                         torch.onnx's names, export refused (no dependencies)
    1  triton_kernels/                 kernels and their launchers
    2  core/                           Tensor, the op table, each op's core entry
    3  autograd/                       engine, Functions, derivatives
    4  nn/, optim/, amp/, ao/, serialization.py, compiler.py (tritensor.compile), distributions/,
       testing.py, jit.py, accelerator.py, profiler.py
    5  comm/, elastic/, nn/parallel/ (DistributedDataParallel sits on comm, as in torch),
       utils/ (utils.data's DistributedSampler asks comm for the world size and rank)
    6  bench/, run.py, gpu.py (tritensor.cuda), the package root and module_aliases.py (torch's paths
       for comm and elastic: tritensor.distributed ...)

Also checked: no function-level import of a tritensor module (the style rule forbids them as a
way around a cycle; a module that needs one sits in the wrong layer), no import cycle among
module-level imports, and the layers above autograd never reach into the kernels or the launch
point (they use the public surface: Tensor, ops, autograd). The dtype policy (what arithmetic
computes and accumulates in) is written in ``runtime/dtype_policy.py`` and nowhere else: a
conditional that picks fp64-else-fp32, int64-else-int32 or fp16/bf16-in-fp32 anywhere else fails.

Package ``__init__`` edges count: importing ``a.b.c`` first runs the ``__init__`` of ``a`` and
``a.b``, so the cycle check gives every import an edge to each package it runs, except the
importer's own packages (a module is only ever imported while its package's ``__init__`` has
already begun). A name taken from a package (``from .. import all_reduce``) is an edge to that
package's ``__init__``, the importer's own included.

Inside comm (layer 5), a public API over backends, as torch.distributed's. Its public API is the
package ``tritensor.comm`` and its modules ``collectives``, ``process_group``, ``store``, ``work``,
``reduce_op``, ``backend_api`` (the backend interface and registry), ``grad_bucket``, ``errors``
(:data:`COMM_PUBLIC`); the built-in "tcp" backend and its transport are ``comm.backend``.

- ``comm.backend`` imports nothing of comm outside it but the modules beneath both it and the
  collectives: ``comm.errors`` (the exceptions it raises), ``comm.work`` (the Work handles it
  completes), ``comm.reduce_op`` and ``comm.backend_api`` (the interface it implements and the
  registry it joins).
- The public modules import no backend module (:data:`COMM_PUBLIC_BACKEND` lists the two
  exceptions: the package loads the tcp backend, which registers it, and the store imports its
  own server), so a new backend is a new module that registers itself. ``ReduceOp`` has one
  definition.
- The DDP hooks (``comm.algorithms``) and RPC (``comm.rpc``) are comm's clients: from the rest of
  comm they import the package ``tritensor.comm`` only, and from it only names of its
  ``__all__``. One exception: RPC's agent has sockets of its own, let in and authenticated as a
  process group's are, so ``comm.rpc`` also imports ``comm.backend.auth`` and ``comm.backend.gate``
  (:data:`RPC_BACKEND`). From the layers below comm they take only names the package root
  exposes under the same name (``tritensor.Tensor``, ``tritensor.from_numpy``,
  ``tritensor.float16``, ``tritensor.orthogonalize_``): no core entry, no private helper.
- Every other module outside comm (nn.parallel, utils, elastic, the launcher) imports only comm's
  public API, the hooks and rpc, and no name with a leading underscore; ``bench`` may reach the
  backend (the soak benchmark floods the store speaking its handshake).
"""
from __future__ import annotations

import ast
import pathlib

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[1]
SKIP_DIRS = {"tests", "examples", "benchmarks", "tools", ".venv", "build", ".git", "__pycache__", "bench-out"}

LAYERS = [  # by module-path prefix; the longest prefix that matches decides
    (0, ("runtime", "backends", "futures", "multiproc", "onnx")),
    (1, ("triton_kernels",)),
    (2, ("core",)),
    (3, ("autograd",)),
    (4, ("nn", "optim", "amp", "ao", "serialization", "compiler", "testing",
         "distributions", "jit", "accelerator", "profiler")),
    (5, ("comm", "elastic", "nn.parallel", "utils")),  # utils.data's DistributedSampler asks comm
    (6, ("bench", "run", "gpu", "module_aliases", "__init__", "__main__")),
]
# Beyond the layer order: what the public-surface layers may not import.
PUBLIC_ONLY = {"nn", "optim", "amp", "ao", "comm", "elastic", "serialization", "utils", "compiler"}
INTERNAL = ("triton_kernels", "runtime.launch", "runtime.interpreter")


def _modules():
    for path in sorted(ROOT.rglob("*.py")):
        rel = path.relative_to(ROOT)
        if SKIP_DIRS & set(rel.parts) or any(p.startswith(".") for p in rel.parts):
            continue
        parts = list(rel.with_suffix("").parts)
        is_pkg = parts[-1] == "__init__"
        if is_pkg:
            parts = parts[:-1]
        yield tuple(parts), is_pkg, path


MODULES = {name: (is_pkg, path) for name, is_pkg, path in _modules()}
TREES = {name: ast.parse(path.read_text(), str(path)) for name, (_, path) in MODULES.items()}


def _layer(name: tuple) -> int:
    dotted = ".".join(name) if name else "__init__"
    best = None
    for level, prefixes in LAYERS:
        for prefix in prefixes:
            if (dotted == prefix or dotted.startswith(prefix + ".")) and (best is None or len(prefix) > len(best[1])):
                best = (level, prefix)
    if best is not None:
        return best[0]
    raise AssertionError(f"module {'.'.join(name) or 'tritensor'} belongs to no layer: add it to LAYERS")


def _resolve(importer: tuple, is_pkg: bool, node) -> list[tuple]:
    """The tritensor modules an import statement loads (a ``from pkg import sub`` loads pkg.sub)."""
    if isinstance(node, ast.Import):
        out = []
        for a in node.names:
            parts = a.name.split(".")
            if parts[0] == "tritensor":
                out.append(tuple(parts[1:]))
        return out
    base = _from_base(importer, is_pkg, node)
    if base is None:
        return []
    # ``from pkg import sub`` loads the submodule; the package itself counts only when a name is
    # one of its attributes (its __init__ must have run to provide it).
    subs = [base + (a.name,) for a in node.names if base + (a.name,) in MODULES]
    return subs if len(subs) == len(node.names) else [base] + subs


def _from_base(importer: tuple, is_pkg: bool, node: ast.ImportFrom):
    """The tritensor module a ``from X import ...`` names as X; None outside tritensor."""
    if node.level == 0:
        parts = (node.module or "").split(".")
        if parts[0] != "tritensor":
            return None
        return tuple(parts[1:])
    pkg = importer if is_pkg else importer[:-1]
    return pkg[: len(pkg) - (node.level - 1)] + tuple((node.module or "").split(".") if node.module else ())


TYPE_ONLY: set = set()  # (importer, imported) under ``if TYPE_CHECKING:``: for type checkers, never run


def _type_checking(node) -> bool:
    t = node.test
    return (isinstance(t, ast.Name) and t.id == "TYPE_CHECKING") or (
        isinstance(t, ast.Attribute) and t.attr == "TYPE_CHECKING")


def _packages_run(importer: tuple, target: tuple) -> list[tuple]:
    """The packages whose ``__init__`` importing ``target`` runs: its enclosing packages, less the
    importer's own (already running when the importer runs) and the package root."""
    own = {importer[:i] for i in range(len(importer) + 1)}
    return [target[:i] for i in range(1, len(target)) if target[:i] not in own and target[:i] in MODULES]


def _imports():
    """(importer, imported, function_level, line) for every import of a tritensor module, and for
    every package ``__init__`` that import runs (:func:`_packages_run`)."""
    for name, (is_pkg, path) in MODULES.items():
        tree = TREES[name]
        top_level, type_only = set(), set()
        for node in tree.body:
            for sub in ast.walk(node) if isinstance(node, (ast.If, ast.Try)) else (node,):
                if isinstance(sub, (ast.Import, ast.ImportFrom)):
                    top_level.add(id(sub))
                    if isinstance(node, ast.If) and _type_checking(node):
                        type_only.add(id(sub))
        for node in ast.walk(tree):
            if isinstance(node, (ast.Import, ast.ImportFrom)):
                targets = _resolve(name, is_pkg, node)
                for target in dict.fromkeys(targets + [p for t in targets for p in _packages_run(name, t)]):
                    if target != name:
                        if id(node) in type_only:
                            TYPE_ONLY.add((name, target))
                        yield name, target, id(node) not in top_level, node.lineno


IMPORTS = list(_imports())


def _named_imports():
    """(importer, module, names, line) for every import of a tritensor module as written: a
    submodule taken from a package is that module (no names), a name taken from a module is in
    ``names``. No package ``__init__`` edges."""
    for name, (is_pkg, _path) in MODULES.items():
        for node in ast.walk(TREES[name]):
            if isinstance(node, ast.Import):
                for target in _resolve(name, is_pkg, node):
                    yield name, target, [], node.lineno
            elif isinstance(node, ast.ImportFrom):
                base = _from_base(name, is_pkg, node)
                if base is None:
                    continue
                attrs = [a.name for a in node.names if base + (a.name,) not in MODULES]
                for a in node.names:
                    if base + (a.name,) in MODULES:
                        yield name, base + (a.name,), [], node.lineno
                if attrs:
                    yield name, base, attrs, node.lineno


NAMED_IMPORTS = list(_named_imports())
COMM_PUBLIC = {("comm",)} | {("comm", m) for m in ("collectives", "process_group", "store", "work", "grad_bucket",
                                                    "errors", "reduce_op", "backend_api")}
# The backend modules a public module may import, beyond none: the package loads the tcp backend
# (importing it registers it) and takes the handshake's names it exports; the store runs its own
# server, speaks its frames and authenticates its clients.
COMM_PUBLIC_BACKEND = {
    ("comm",): {("comm", "backend", "tcp"), ("comm", "backend", "auth")},
    ("comm", "store"): {("comm", "backend", m) for m in ("store_server", "framing", "auth")},
}
COMM_CLIENTS = (("comm", "algorithms"), ("comm", "rpc"))  # inside comm, above its public API
RPC_BACKEND = {("comm", "backend", "auth"), ("comm", "backend", "gate")}


def _fmt(name):
    return "tritensor" + "".join("." + p for p in name)


def test_every_module_has_a_layer():
    for name in MODULES:
        _layer(name)


def test_no_upward_import():
    bad = [f"{_fmt(a)} (layer {_layer(a)}) imports {_fmt(b)} (layer {_layer(b)}) at line {line}"
           for a, b, _, line in IMPORTS if _layer(b) > _layer(a)]
    assert not bad, "imports against the layer order:\n" + "\n".join(bad)


def test_no_function_level_import_of_tritensor_modules():
    # The top layer (bench, the launcher) imports lazily on purpose: `--help` must not load Triton,
    # and spawned benchmark workers import the package themselves. Nothing imports that layer, so
    # its lazy imports cannot be hiding a cycle.
    bad = [f"{_fmt(a)} line {line}: imports {_fmt(b)} inside a function" for a, b, fn, line in IMPORTS
           if fn and _layer(a) < 6]
    assert not bad, "function-level imports (move them to the top, or fix the layering):\n" + "\n".join(bad)


def test_public_surface_layers_do_not_reach_into_kernels():
    bad = [f"{_fmt(a)} line {line}: imports {_fmt(b)}" for a, b, _, line in IMPORTS
           if a and a[0] in PUBLIC_ONLY and ".".join(b).startswith(INTERNAL)]
    assert not bad, "layers above autograd use the public surface, not kernels or launch:\n" + "\n".join(bad)


def test_comm_backend_sits_beneath_the_public_api():
    allowed = {("comm", "errors"), ("comm", "work"), ("comm", "reduce_op"), ("comm", "backend_api")}
    bad = [f"{_fmt(a)} line {line}: imports {_fmt(b)}" for a, b, _, line in IMPORTS
           if a[:2] == ("comm", "backend") and b[:1] == ("comm",) and b[:2] != ("comm", "backend")
           and b not in allowed]
    assert not bad, "comm.backend imports comm's public API (it sits beneath it):\n" + "\n".join(bad)


def test_comm_public_modules_import_no_backend():
    """The collectives and process groups reach a backend through backend_api only (its interface
    and registry): adding a transport touches none of them."""
    bad = [f"{_fmt(a)} line {line}: imports {_fmt(b)}" for a, b, _, line in NAMED_IMPORTS
           if a in COMM_PUBLIC and b[:2] == ("comm", "backend") and b not in COMM_PUBLIC_BACKEND.get(a, set())]
    assert not bad, "comm's public modules import a backend module (use comm.backend_api):\n" + "\n".join(bad)


def test_reduce_op_has_one_definition():
    found = [(name, node.lineno) for name, tree in TREES.items() for node in ast.walk(tree)
             if isinstance(node, ast.ClassDef) and node.name == "ReduceOp"]
    assert [name for name, _ in found] == [("comm", "reduce_op")], [f"{_fmt(n)} line {line}" for n, line in found]


def _client(name: tuple):
    """The comm client package ``name`` belongs to (``comm.algorithms``, ``comm.rpc``)."""
    return next((pkg for pkg in COMM_CLIENTS if name[:len(pkg)] == pkg), None)


def test_comm_hooks_and_rpc_use_comm_public_names_only():
    import tritensor.comm as dist

    bad = []
    for a, b, names, line in NAMED_IMPORTS:
        own = _client(a)
        if own is None or b[:1] != ("comm",) or b[:len(own)] == own:
            continue
        if b == ("comm",):
            bad += [f"{_fmt(a)} line {line}: takes {n!r} from tritensor.comm, not in its __all__"
                    for n in names if n not in dist.__all__]
        elif not (own == ("comm", "rpc") and b in RPC_BACKEND):
            bad.append(f"{_fmt(a)} line {line}: imports {_fmt(b)}; import from tritensor.comm instead")
    assert not bad, "comm's hooks and rpc use comm's public names only:\n" + "\n".join(bad)


def test_comm_hooks_and_rpc_take_public_names_from_below():
    import importlib

    import tritensor

    bad = []
    for a, b, names, line in NAMED_IMPORTS:
        if _client(a) is None or _layer(b) >= _layer(("comm",)):
            continue
        module = importlib.import_module(_fmt(b))
        pairs = [(n, getattr(module, n)) for n in names] or [(b[-1], module)]  # a module: tritensor.<it>?
        bad += [f"{_fmt(a)} line {line}: imports {_fmt(b)}" + (f".{n}" if names else "") + ", not a name tritensor exposes"
                for n, obj in pairs if getattr(tritensor, n, None) is not obj]
    assert not bad, "below comm, the hooks and rpc use tritensor's public names only:\n" + "\n".join(bad)


def test_comm_is_used_through_its_public_api_elsewhere():
    allowed = COMM_PUBLIC | {("comm", "algorithms"), ("comm", "rpc")}
    bad = []
    for a, b, names, line in NAMED_IMPORTS:
        if a[:1] in (("comm",), ("bench",)) or b[:1] != ("comm",):
            continue
        if b not in allowed and b[:2] not in allowed:
            bad.append(f"{_fmt(a)} line {line}: imports {_fmt(b)}, not comm's public API")
        bad += [f"{_fmt(a)} line {line}: imports the private name {n} of {_fmt(b)}" for n in names if n.startswith("_")]
    assert not bad, "outside comm, comm is used through its public API:\n" + "\n".join(bad)


def test_no_import_cycle():
    graph: dict[tuple, set] = {name: set() for name in MODULES}
    for a, b, fn, _ in IMPORTS:
        if not fn and b in graph and (a, b) not in TYPE_ONLY:  # type-only imports never run
            graph[a].add(b)
    # Tarjan's strongly connected components.
    index, low, stack, on_stack, sccs, counter = {}, {}, [], set(), [], [0]

    def visit(v):
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on_stack.add(v)
        for w in graph[v]:
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                sccs.append(sorted(_fmt(c) for c in comp))

    for v in graph:
        if v not in index:
            visit(v)
    assert not sccs, "import cycles:\n" + "\n".join(" <-> ".join(c) for c in sccs)


@pytest.mark.parametrize("module", ["runtime", "triton_kernels"])
def test_low_layers_never_import_tensor(module):
    bad = [f"{_fmt(a)} line {line}: imports {_fmt(b)}" for a, b, _, line in IMPORTS
           if a and a[0] == module and b[:1] in (("core",), ("autograd",))]
    assert not bad, "\n".join(bad)


def test_every_package_is_listed_in_pyproject():
    """A package missing from pyproject's list works in an editable install and is absent from a wheel."""
    import tomllib

    listed = set(tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]["packages"])
    packages = {_fmt(name) for name, (is_pkg, _) in MODULES.items() if is_pkg}
    assert packages - listed == set(), f"packages missing from pyproject.toml: {sorted(packages - listed)}"
    assert listed - packages == set(), f"pyproject.toml lists packages that do not exist: {sorted(listed - packages)}"


def test_the_test_process_holds_one_copy_of_the_library():
    # pytest imports the root __init__.py by path under the folder's name (the root is the
    # package); it must resolve against the installed tritensor, not load every module again.
    import sys

    sources = {path.resolve() for _is_pkg, path in MODULES.values()} - {ROOT / "__init__.py"}
    ours = {id(m) for name, m in list(sys.modules.items()) if name.startswith("tritensor")}
    second = [name for name, m in list(sys.modules.items())
              if id(m) not in ours and getattr(m, "__file__", None) and pathlib.Path(m.__file__).resolve() in sources]
    assert second == [], f"modules loaded a second time under another name: {second[:5]}"


# ----- the dtype policy has one home ---------------------------------------------------------
POLICY = ("runtime", "dtype_policy")
# The kernels another change is rewriting now: their accumulator rules move to the policy with it
# (none today: matmul's launch site holds its accumulator, hashed once, since launches go through sites).
POLICY_PENDING: dict = {}


def _dtype_const(node):
    """The dtype a node names (``dt.float64``, ``tl.float32``, ``np.float64``, ``"float64"``), else None."""
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return node.value
    if isinstance(node, ast.Attribute):
        return node.attr
    return None


def _names_dtype(node, name) -> bool:
    """``node`` is a comparison of something with the dtype ``name`` (``d is dt.float64``,
    ``x.dtype.element_ty == tl.float64``, ``d.name == "float64"``)."""
    return (isinstance(node, ast.Compare) and len(node.ops) == 1 and isinstance(node.ops[0], (ast.Is, ast.Eq))
            and _dtype_const(node.comparators[0]) == name)


def _policy_copies(tree):
    """The places a module writes one of the policy's rules out again: fp64-stays-fp64-else-fp32
    (``float_compute``), int64-stays-int64-else-int32 (``compute`` of integers), fp16/bf16-in-fp32
    (``widened``), each as the conditional expression every copy was written as."""
    for node in ast.walk(tree):
        if not isinstance(node, ast.IfExp):
            continue
        body = _dtype_const(node.body)
        if body == "float64" and _names_dtype(node.test, "float64"):
            yield node.lineno, "fp64 else fp32 (dtype_policy.float_compute)"
        elif body == "int64" and _names_dtype(node.test, "int64"):
            yield node.lineno, "int64 else int32 (dtype_policy.compute)"
        elif (body == "float32" and isinstance(node.test, ast.Compare) and isinstance(node.test.ops[0], ast.In)
              and isinstance(node.test.comparators[0], ast.Tuple)
              and {_dtype_const(e) for e in node.test.comparators[0].elts} == {"float16", "bfloat16"}):
            yield node.lineno, "fp16/bf16 in fp32 (dtype_policy.widened)"


def test_the_dtype_policy_has_one_home():
    """What arithmetic computes and accumulates in is decided in ``runtime/dtype_policy.py`` only;
    a kernel gets its accumulator dtype from its launcher, which asks the policy."""
    found = [f"{_fmt(name)} line {line}: {rule}" for name, tree in TREES.items()
             if name != POLICY and name not in POLICY_PENDING for line, rule in _policy_copies(tree)]
    assert not found, "copies of the dtype policy (use tritensor/runtime/dtype_policy.py):\n" + "\n".join(found)


def test_the_policy_copy_finder_finds_each_form():
    """The finder above catches every form the copies were written in, and the policy's own rules."""
    forms = ['a = dt.float64 if d is dt.float64 else dt.float32',
             'ACC: tl.constexpr = tl.float64 if Q.dtype.element_ty == tl.float64 else tl.float32',
             'c = "float64" if x.dtype.name == "float64" else "float32"',
             'c = ("float64" if d is dt.float64 else "float32") if d.is_floating_point else (\n'
             '    "int64" if d is dt.int64 else "int32")',
             'z = dt.float32 if d in (dt.float16, dt.bfloat16) else d']
    assert [len(list(_policy_copies(ast.parse(src)))) for src in forms] == [1, 1, 1, 2, 1]
    assert len(list(_policy_copies(TREES[POLICY]))) == 3
    # a pending module that no longer holds a copy leaves the list (it only shrinks)
    assert [name for name in POLICY_PENDING if not list(_policy_copies(TREES[name]))] == []


# What core/tensor.py's Tensor class may write out besides Python's protocol (dunders): host
# interop, which is no op. Every composite method (flatten, split, half ...) lives in its family's
# module in core/ops/ and reaches Tensor through the op table's COMPOSITE_METHODS.
TENSOR_HOST_INTEROP = {"numpy", "item", "tolist"}


def test_composites_live_in_their_family_modules():
    """No core/composites.py, and the Tensor class writes out no composite of its own."""
    assert ("core", "composites") not in MODULES
    tensor = next(n for n in TREES[("core", "tensor")].body if isinstance(n, ast.ClassDef) and n.name == "Tensor")
    own = {n.name for n in tensor.body if isinstance(n, ast.FunctionDef) and not n.name.startswith("_")}
    assert own <= TENSOR_HOST_INTEROP, f"composites written in core/tensor.py: {sorted(own - TENSOR_HOST_INTEROP)}"
