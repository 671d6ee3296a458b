"""``nn.Module``: a tree of modules holding parameters and buffers.

Assigning a :class:`Parameter` or a Module as an attribute registers it (``__setattr__``), so
``parameters()``, ``state_dict()``, ``to()``, ``train()``/``eval()`` walk the tree without any
declaration. Calling a module runs forward pre-hooks, ``forward``, then forward hooks.
"""
from __future__ import annotations

from collections import OrderedDict

from ...autograd.graph import RemovableHandle
from ...autograd.grad_mode import no_grad
from ...core.tensor import Tensor
from ...runtime.dtype import dtype as _dtype
from ..parameter import Buffer, Parameter, is_lazy
from .backward_hooks import BackwardHook


class Module:
    """The base class of every layer, as torch.nn.Module: attributes that are Parameters, buffers or Modules are
    registered, so the tree is walked by parameters(), state_dict(), to() and train(); calling it runs the hooks
    around forward (see the module docstring)."""

    training: bool
    # Made on first registration (and absent from modules pickled before they existed): a module
    # without backward hooks pays one attribute test per call.
    _backward_hooks = None
    _backward_pre_hooks = None

    def __init__(self):
        object.__setattr__(self, "training", True)
        object.__setattr__(self, "_parameters", OrderedDict())
        object.__setattr__(self, "_buffers", OrderedDict())
        object.__setattr__(self, "_non_persistent", set())
        object.__setattr__(self, "_modules", OrderedDict())
        object.__setattr__(self, "_forward_hooks", OrderedDict())
        object.__setattr__(self, "_forward_pre_hooks", OrderedDict())

    # ----- registration --------------------------------------------------------------------
    def __setattr__(self, name, value):
        if "_parameters" not in self.__dict__:
            raise AttributeError("cannot assign attributes before Module.__init__() call")
        if name in self._parameters and not isinstance(value, Parameter):
            if value is not None:
                raise TypeError(f"cannot assign '{type(value).__name__}' as parameter '{name}' "
                                "(tritensor.nn.Parameter or None expected)")
            self._parameters[name] = None
            return
        for d in (self._parameters, self._buffers, self._modules):
            d.pop(name, None)
        if isinstance(value, Buffer):  # torch 2.13's nn.Buffer: registered as a buffer, its persistence kept
            self.register_buffer(name, value, value.persistent)
            return
        if isinstance(value, Parameter):
            self._parameters[name] = value
        elif isinstance(value, Module):
            self._modules[name] = value
        elif name in self.__dict__.get("_buffer_names", ()) and (value is None or isinstance(value, Tensor)):
            self._buffers[name] = value
        else:
            object.__setattr__(self, name, value)
            return
        self.__dict__.pop(name, None)

    def __getattr__(self, name):
        d = self.__dict__
        for store in ("_parameters", "_buffers", "_modules"):
            if store in d and name in d[store]:
                return d[store][name]
        raise AttributeError(f"'{type(self).__name__}' object has no attribute '{name}'")

    def __delattr__(self, name):
        for store in (self._parameters, self._buffers, self._modules):
            if name in store:
                del store[name]
                return
        object.__delattr__(self, name)

    def register_parameter(self, name: str, param) -> None:
        """Register ``param`` (a Parameter, or None for an absent one) under ``name``, replacing a plain attribute of
        that name; anything else is a TypeError, as torch."""
        if param is not None and not isinstance(param, Parameter):
            raise TypeError(f"cannot assign '{type(param).__name__}' object to parameter '{name}' "
                            "(nn.Parameter or None required)")
        self.__dict__.pop(name, None)
        self._parameters[name] = param

    def register_buffer(self, name: str, tensor, persistent: bool = True) -> None:
        """Register a tensor (or None) that is state but not a parameter: moved by to(), saved by state_dict() unless
        ``persistent=False``."""
        if tensor is not None and not isinstance(tensor, Tensor):
            raise TypeError(f"cannot assign '{type(tensor).__name__}' object to buffer '{name}' (Tensor or None required)")
        self.__dict__.setdefault("_buffer_names", set()).add(name)
        self.__dict__.pop(name, None)
        self._buffers[name] = tensor
        if not persistent:
            self._non_persistent.add(name)
        else:
            self._non_persistent.discard(name)

    def add_module(self, name: str, module) -> None:
        """Register a child module (or None) under ``name``; ``register_module`` is the same method, as torch."""
        if module is not None and not isinstance(module, Module):
            raise TypeError(f"{type(module).__name__} is not a Module subclass")
        self._modules[name] = module

    register_module = add_module

    # ----- walking the tree ----------------------------------------------------------------
    def named_modules(self, memo=None, prefix: str = ""):
        """Yield (qualified name, module) for this module and every descendant, each module once even when shared."""
        memo = set() if memo is None else memo
        if id(self) in memo:
            return
        memo.add(id(self))
        yield prefix, self
        for name, m in self._modules.items():
            if m is not None:
                yield from m.named_modules(memo, f"{prefix}.{name}" if prefix else name)

    def modules(self):
        """Yield this module and every descendant, each once (named_modules without the names)."""
        for _, m in self.named_modules():
            yield m

    def named_children(self):
        """Yield (name, module) for the direct children only, each once."""
        seen = set()
        for name, m in self._modules.items():
            if m is not None and id(m) not in seen:
                seen.add(id(m))
                yield name, m

    def children(self):
        """Yield the direct children only (named_children without the names)."""
        for _, m in self.named_children():
            yield m

    def _named_members(self, attr, recurse, prefix=""):
        seen = set()
        mods = self.named_modules(prefix=prefix) if recurse else [(prefix, self)]
        for mp, m in mods:
            for name, v in getattr(m, attr).items():
                if v is None or id(v) in seen:
                    continue
                seen.add(id(v))
                yield (f"{mp}.{name}" if mp else name), v

    def named_parameters(self, prefix: str = "", recurse: bool = True):
        """Yield (qualified name, Parameter) over the tree (or this module alone with ``recurse=False``), each shared
        parameter once."""
        yield from self._named_members("_parameters", recurse, prefix)

    def parameters(self, recurse: bool = True):
        """Yield every Parameter of the tree once (what an optimizer takes); ``recurse=False``: this module's own."""
        for _, p in self.named_parameters(recurse=recurse):
            yield p

    def named_buffers(self, prefix: str = "", recurse: bool = True):
        """Yield (qualified name, buffer) over the tree, each shared buffer once, non-persistent ones included."""
        yield from self._named_members("_buffers", recurse, prefix)

    def buffers(self, recurse: bool = True):
        """Yield every buffer of the tree once, non-persistent ones included."""
        for _, b in self.named_buffers(recurse=recurse):
            yield b

    # ----- modes and gradients -------------------------------------------------------------
    def train(self, mode: bool = True):
        """Set ``training`` on this module and every descendant (dropout and batch norm read it); a non-bool ``mode``
        is a ValueError, as torch. Returns self."""
        if not isinstance(mode, bool):
            raise ValueError("training mode is expected to be boolean")
        for m in self.modules():
            object.__setattr__(m, "training", mode)
        return self

    def eval(self):
        """``train(False)``: inference behaviour for dropout and batch norm (gradients are still recorded; use
        no_grad for that)."""
        return self.train(False)

    def requires_grad_(self, requires_grad: bool = True):
        """Set ``requires_grad`` on every parameter of the tree (freezing or unfreezing it); returns self."""
        for p in self.parameters():
            p.requires_grad_(requires_grad)
        return self

    def zero_grad(self, set_to_none: bool = True) -> None:
        """Clear every parameter's gradient: set it to None (torch's default), or with ``set_to_none=False`` detach
        it and fill it with zeros in place."""
        for p in self.parameters():
            if p.grad is not None:
                if set_to_none:
                    p.grad = None
                else:
                    p.grad = p.grad.detach()
                    p.grad.zero_()

    # ----- state dict ----------------------------------------------------------------------
    def state_dict(self, destination=None, prefix: str = "", keep_vars: bool = False):
        """An OrderedDict of qualified name -> tensor for every parameter and persistent buffer, detached unless
        ``keep_vars=True``; the keys are torch's, so torch checkpoints load."""
        out = OrderedDict() if destination is None else destination
        for mp, m in self.named_modules(prefix=prefix.rstrip(".")):
            pre = f"{mp}." if mp else ""
            for name, p in m._parameters.items():
                if p is not None:  # a lazy module's placeholder is saved as itself, as torch's
                    out[pre + name] = p if keep_vars or is_lazy(p) else p.detach()
            for name, b in m._buffers.items():
                if b is not None and name not in m._non_persistent:
                    out[pre + name] = b if keep_vars or is_lazy(b) else b.detach()
        return out

    def load_state_dict(self, state_dict, strict: bool = True, assign: bool = False):
        """Copy tensors from ``state_dict`` into the parameters and buffers in place, after checking names and shapes
        with torch's error message (missing and unexpected keys are errors with ``strict=True``); returns
        (missing_keys, unexpected_keys). ``assign=True`` is accepted but copies too: the module keeps its own
        tensors."""
        for mp, m in self.named_modules():  # torch's pre-hooks: a lazy module materializes to the loaded shapes
            for hook in list((m.__dict__.get("_load_state_dict_pre_hooks") or {}).values()):
                hook(state_dict, f"{mp}." if mp else "", {}, strict, [], [], [])
        own = self.state_dict(keep_vars=True)
        missing = [k for k in own if k not in state_dict]
        unexpected = [k for k in state_dict if k not in own]
        errors = []
        for k, target in own.items():
            if k not in state_dict:
                continue
            src = state_dict[k]
            if not isinstance(src, Tensor):
                errors.append(f'While copying the parameter named "{k}", expected a Tensor, got {type(src).__name__}')
            elif src.shape != target.shape:
                errors.append(f"size mismatch for {k}: copying a param with shape {src.shape} from checkpoint, "
                              f"the shape in current model is {target.shape}.")
        if strict:
            if unexpected:
                errors.insert(0, "Unexpected key(s) in state_dict: " + ", ".join(f'"{k}"' for k in unexpected) + ". ")
            if missing:
                errors.insert(0, "Missing key(s) in state_dict: " + ", ".join(f'"{k}"' for k in missing) + ". ")
        if errors:
            raise RuntimeError(f"Error(s) in loading state_dict for {type(self).__name__}:\n\t" + "\n\t".join(errors))
        with no_grad():
            for k, target in own.items():
                if k in state_dict:
                    target.copy_(state_dict[k])
        return _IncompatibleKeys(missing, unexpected)

    # ----- devices and dtypes --------------------------------------------------------------
    def _register_load_state_dict_pre_hook(self, hook):
        """``hook(state_dict, prefix, local_metadata, strict, missing_keys, unexpected_keys, error_msgs)``
        before ``load_state_dict`` reads this module's entries (torch's private hook, which the lazy
        modules use); returns a handle whose ``remove()`` unregisters it."""
        return self._add_hook("_load_state_dict_pre_hooks", hook, False)

    def _replicate_for_data_parallel(self):
        """A shallow copy for ``nn.DataParallel``'s replicas (torch's): the same attributes and hooks,
        its own dicts of buffers and children, and no registered parameters, so ``replicate`` can set
        each parameter's per-device copy as a plain attribute (a tensor recorded from the original,
        not a leaf)."""
        replica = self.__new__(type(self))
        d = replica.__dict__
        d.update(self.__dict__)
        d["_parameters"] = OrderedDict()
        d["_buffers"] = self._buffers.copy()
        d["_modules"] = self._modules.copy()
        d["_is_replica"] = True
        return replica

    def _apply(self, fn):
        for m in self.modules():
            for name, p in m._parameters.items():
                if p is not None:
                    with no_grad():
                        new = fn(p)
                    if new is not p:
                        m._parameters[name] = Parameter(new.detach(), p.requires_grad)
            for name, b in m._buffers.items():
                if b is not None:
                    m._buffers[name] = fn(b)
        return self

    def to(self, *args, **kwargs):
        """Move parameters and buffers to a device and/or cast floating point ones to a dtype;
        ``memory_format=tritensor.channels_last`` lays out the 4-D ones channels-last, as torch."""
        fmt = kwargs.pop("memory_format", None)
        given = list(args) + list(kwargs.values())
        dtype = next((a for a in given if isinstance(a, _dtype)), None)
        device = next((a for a in given if a is not None and not isinstance(a, (_dtype, bool))), None)
        if dtype is not None and not dtype.is_floating_point:
            raise TypeError(f"nn.Module.to only accepts floating point dtypes, but got desired dtype={dtype}")

        def convert(t):
            t = t.to(device=device, dtype=dtype if t.dtype.is_floating_point else None)
            return t.contiguous(memory_format=fmt) if fmt is not None and t.ndim == 4 else t
        return self._apply(convert)

    def cuda(self, device=None):
        """Move every parameter and buffer to a CUDA device (the current one, or ``device``); returns self."""
        return self._apply(lambda t: t.cuda(device))

    def cpu(self):
        """Move every parameter and buffer to host memory; returns self."""
        return self._apply(lambda t: t.cpu())

    def float(self):
        """Cast floating point parameters and buffers to float32 (integer ones are left alone); returns self."""
        return self._apply(lambda t: t.float() if t.dtype.is_floating_point else t)

    def double(self):
        """Cast floating point parameters and buffers to float64 (integer ones are left alone); returns self."""
        return self._apply(lambda t: t.double() if t.dtype.is_floating_point else t)

    def half(self):
        """Cast floating point parameters and buffers to float16 (integer ones are left alone); returns self."""
        return self._apply(lambda t: t.half() if t.dtype.is_floating_point else t)

    # ----- calling -------------------------------------------------------------------------
    def register_forward_hook(self, hook):
        """``hook(module, args, output)``; a non-None return replaces the output."""
        h = RemovableHandle(self._forward_hooks)
        self._forward_hooks[h.id] = hook
        return h

    def register_forward_pre_hook(self, hook):
        """``hook(module, args)``; a non-None return replaces the args."""
        h = RemovableHandle(self._forward_pre_hooks)
        self._forward_pre_hooks[h.id] = hook
        return h

    def _add_hook(self, attr: str, hook, prepend: bool):
        hooks = self.__dict__.get(attr)
        if hooks is None:
            hooks = OrderedDict()
            object.__setattr__(self, attr, hooks)
        h = RemovableHandle(hooks)
        hooks[h.id] = hook
        if prepend:
            hooks.move_to_end(h.id, last=False)
        return h

    def register_full_backward_hook(self, hook, prepend: bool = False):
        """``hook(module, grad_input, grad_output)`` once the gradients with respect to the module's
        positional inputs are computed; a non-None return (a tuple as long as ``grad_input``)
        replaces them. Returns a handle whose ``remove()`` unregisters it."""
        return self._add_hook("_backward_hooks", hook, prepend)

    def register_full_backward_pre_hook(self, hook, prepend: bool = False):
        """``hook(module, grad_output)`` when the gradients with respect to the module's outputs are
        known, before any of the module's own backward runs; a non-None return replaces them."""
        return self._add_hook("_backward_pre_hooks", hook, prepend)

    def forward(self, *args, **kwargs):
        """What the module computes; every subclass defines it (calling the module runs it between the hooks)."""
        raise NotImplementedError(f'Module [{type(self).__name__}] is missing the required "forward" function')

    def __call__(self, *args, **kwargs):
        for hook in list(self._forward_pre_hooks.values()):
            r = hook(self, args)
            if r is not None:
                args = r if isinstance(r, tuple) else (r,)
        bw_hook = None
        if self._backward_hooks or self._backward_pre_hooks:
            bw_hook = BackwardHook(self, self._backward_hooks or {}, self._backward_pre_hooks or {})
            args = bw_hook.setup_input_hook(args)
        out = self.forward(*args, **kwargs)
        for hook in list(self._forward_hooks.values()):
            r = hook(self, args, out)
            if r is not None:
                out = r
        if bw_hook is not None:
            out = bw_hook.setup_output_hook(out)
        return out

    def apply(self, fn):
        """Call ``fn`` on every child's tree, then on this module (post-order, as torch; used for custom
        initialisation); returns self."""
        for m in self.children():
            m.apply(fn)
        fn(self)
        return self

    # ----- printing ------------------------------------------------------------------------
    def extra_repr(self) -> str:
        """The text inside the module's repr parentheses (its constructor arguments); subclasses override it as
        torch's do."""
        return ""

    def __repr__(self) -> str:
        lines = [f"({name}): " + repr(m).replace("\n", "\n  ") for name, m in self._modules.items()]
        extra = self.extra_repr()
        if not lines:
            return f"{type(self).__name__}({extra})"
        return f"{type(self).__name__}(\n  " + "\n  ".join(([extra] if extra else []) + lines) + "\n)"


class _IncompatibleKeys(tuple):
    def __new__(cls, missing, unexpected):
        t = super().__new__(cls, (missing, unexpected))
        t.missing_keys, t.unexpected_keys = missing, unexpected
        return t

    def __repr__(self):
        return f"<All keys matched successfully>" if not any(self) else \
            f"_IncompatibleKeys(missing_keys={self.missing_keys}, unexpected_keys={self.unexpected_keys})"


