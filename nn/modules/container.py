"""The container modules PyTorch users build models from: ``Sequential``, ``ModuleList``,
``ModuleDict``, ``ParameterList``, ``ParameterDict`` (torch's file; ``Identity`` is in ``linear.py``, as torch).

They exist so that modules and parameters held in a list or dict are *registered*: walked by
``parameters()``, ``state_dict()`` (keys ``"0.weight"``, ``"name.weight"``, as torch) and ``to()``.
"""
from __future__ import annotations

import operator
import warnings
from collections import OrderedDict

from ...core.tensor import Tensor
from ..parameter import Parameter
from .module import Module


def _index(idx, n: int) -> int:
    i = operator.index(idx)
    if not -n <= i < n:
        raise IndexError(f"index {idx} is out of range")
    return i % n


class Sequential(Module):
    """Modules called in order, each on the previous one's output, registered as "0", "1", ... (or by the keys of an
    OrderedDict), as torch.nn.Sequential; slicing gives a Sequential."""

    def __init__(self, *modules):
        super().__init__()
        if len(modules) == 1 and isinstance(modules[0], OrderedDict):
            for name, m in modules[0].items():
                self.add_module(name, m)
        else:
            for i, m in enumerate(modules):
                self.add_module(str(i), m)

    def __getitem__(self, idx):
        mods = list(self._modules.values())
        if isinstance(idx, slice):
            return Sequential(*mods[idx])
        return mods[idx]

    def __len__(self) -> int:
        return len(self._modules)

    def __iter__(self):
        return iter(self._modules.values())

    def append(self, module):
        self.add_module(str(len(self)), module)
        return self

    def forward(self, x):
        for m in self._modules.values():
            x = m(x)
        return x


class ModuleList(Module):
    """A list of modules, registered under the keys ``"0"``, ``"1"``, ..."""

    def __init__(self, modules=None):
        super().__init__()
        if modules is not None:
            self.extend(modules)

    def _values(self):
        return list(self._modules.values())

    def __getitem__(self, idx):
        if isinstance(idx, slice):
            return type(self)(self._values()[idx])
        return self._values()[_index(idx, len(self))]

    def __setitem__(self, idx, module) -> None:
        i = _index(idx, len(self))
        self.add_module(str(i), module)

    def __delitem__(self, idx) -> None:
        mods = self._values()
        if isinstance(idx, slice):
            del mods[idx]
        else:
            del mods[_index(idx, len(self))]
        self._modules.clear()  # keys stay 0..n-1, as torch renumbers them
        for i, m in enumerate(mods):
            self.add_module(str(i), m)

    def __len__(self) -> int:
        return len(self._modules)

    def __iter__(self):
        return iter(self._values())

    def __iadd__(self, modules):
        return self.extend(modules)

    def __add__(self, other):
        return ModuleList(self._values() + list(other))

    def append(self, module):
        self.add_module(str(len(self)), module)
        return self

    def extend(self, modules):
        if isinstance(modules, (Module, Tensor)) or not hasattr(modules, "__iter__"):
            raise TypeError("ModuleList.extend should be called with an iterable, but got " + type(modules).__name__)
        for m in modules:
            self.append(m)
        return self

    def insert(self, index: int, module) -> None:
        mods = self._values()
        mods.insert(index, module)
        self._modules.clear()
        for i, m in enumerate(mods):
            self.add_module(str(i), m)

    def pop(self, key=-1):
        m = self[key]
        del self[key]
        return m

    def forward(self, *args, **kwargs):
        raise NotImplementedError("ModuleList has no forward(): iterate over it and call its modules")


class ModuleDict(Module):
    """An ordered dict of modules, registered under their keys."""

    def __init__(self, modules=None):
        super().__init__()
        if modules is not None:
            self.update(modules)

    def __getitem__(self, key: str):
        return self._modules[key]

    def __setitem__(self, key: str, module) -> None:
        self.add_module(key, module)

    def __delitem__(self, key: str) -> None:
        del self._modules[key]

    def __len__(self) -> int:
        return len(self._modules)

    def __iter__(self):
        return iter(self._modules)

    def __contains__(self, key) -> bool:
        return key in self._modules

    def add_module(self, name, module) -> None:
        """Register ``module`` under ``name`` after torch's checks: the name must be a non-empty str without '.'."""
        if not isinstance(name, str):
            raise TypeError(f"module name should be a string. Got {type(name).__name__}")
        if "." in name or name == "":
            raise KeyError(f'module name can\'t contain ".", got: {name}' if name else 'module name can\'t be empty string ""')
        super().add_module(name, module)

    def clear(self) -> None:
        self._modules.clear()

    def pop(self, key: str):
        return self._modules.pop(key)

    def keys(self):
        return self._modules.keys()

    def items(self):
        return self._modules.items()

    def values(self):
        return self._modules.values()

    def update(self, modules) -> None:
        if isinstance(modules, (dict, OrderedDict, ModuleDict)):
            pairs = modules.items()
        else:
            pairs = []
            for j, kv in enumerate(modules):
                if not isinstance(kv, (tuple, list)) or len(kv) != 2:
                    raise ValueError(f"ModuleDict update sequence element #{j} should be an iterable of length 2")
                pairs.append(kv)
        for k, m in pairs:
            self[k] = m

    def forward(self, *args, **kwargs):
        raise NotImplementedError("ModuleDict has no forward(): look its modules up and call them")


class ParameterList(Module):
    """A list of parameters, registered under ``"0"``, ``"1"``, ...; a plain tensor appended is
    wrapped in a :class:`Parameter` (as torch does)."""

    def __init__(self, values=None):
        super().__init__()
        if values is not None:
            self.extend(values)

    def __len__(self) -> int:
        return len(self._parameters)

    def __iter__(self):
        return iter(self._parameters.values())

    def __getitem__(self, idx):
        vals = list(self._parameters.values())
        if isinstance(idx, slice):
            return ParameterList(vals[idx])
        return vals[_index(idx, len(self))]

    def __setitem__(self, idx, param) -> None:
        i = _index(idx, len(self))
        self.register_parameter(str(i), self._wrap(param))

    def __iadd__(self, params):
        return self.extend(params)

    @staticmethod
    def _wrap(p):
        if isinstance(p, Tensor) and not isinstance(p, Parameter):
            return Parameter(p)
        return p

    def append(self, value):
        self.register_parameter(str(len(self)), self._wrap(value))
        return self

    def extend(self, values):
        if isinstance(values, Tensor) or not hasattr(values, "__iter__"):
            raise TypeError("ParameterList.extend should be called with an iterable, but got "
                            + type(values).__name__)
        for v in values:
            self.append(v)
        return self

    def extra_repr(self) -> str:
        return "\n".join(f"({i}): Parameter containing: [{p.dtype} of size {'x'.join(map(str, p.shape))}]"
                         for i, p in enumerate(self))

    def forward(self, *args, **kwargs):
        raise NotImplementedError("ParameterList has no forward()")


class ParameterDict(Module):
    """An ordered dict of parameters, each registered under its key; a plain tensor stored is
    wrapped in a :class:`Parameter` (as torch does). Keys are strings."""

    def __init__(self, parameters=None):
        super().__init__()
        if parameters is not None:
            self.update(parameters)

    @staticmethod
    def _key(key) -> str:
        if not isinstance(key, str):
            raise TypeError(f"ParameterDict keys must be strings, got {type(key).__name__}")
        return key

    def __getitem__(self, key):
        return self._parameters[key]

    def __setitem__(self, key, value) -> None:
        self.register_parameter(self._key(key), ParameterList._wrap(value))

    def __delitem__(self, key) -> None:
        del self._parameters[key]

    def __len__(self) -> int:
        return len(self._parameters)

    def __iter__(self):
        return iter(self._parameters)

    def __reversed__(self):
        return reversed(list(self._parameters))

    def __contains__(self, key) -> bool:
        return key in self._parameters

    def keys(self):
        return self._parameters.keys()

    def values(self):
        return self._parameters.values()

    def items(self):
        return self._parameters.items()

    def get(self, key, default=None):
        return self._parameters.get(key, default)

    def setdefault(self, key, default=None):
        if key not in self._parameters:
            self[key] = default
        return self._parameters[key]

    def pop(self, key):
        v = self._parameters[key]
        del self[key]
        return v

    def popitem(self):
        k = next(reversed(self._parameters))
        return k, self.pop(k)

    def clear(self) -> None:
        self._parameters.clear()

    def copy(self):
        return ParameterDict(OrderedDict(self._parameters))

    def fromkeys(self, keys, default=None):
        return ParameterDict((k, default) for k in keys)

    def update(self, parameters) -> None:
        if isinstance(parameters, Tensor) or not hasattr(parameters, "__iter__"):
            raise TypeError("ParametersDict.update should be called with an iterable of key/value pairs, but got "
                            + type(parameters).__name__)
        items = parameters.items() if hasattr(parameters, "items") else parameters
        for j, kv in enumerate(items):
            if len(kv) != 2:
                raise ValueError(f"ParameterDict update sequence element #{j} has length {len(kv)}; 2 is required")
            self[kv[0]] = kv[1]

    def __or__(self, other):
        out = self.copy()
        out.update(other)
        return out

    def extra_repr(self) -> str:
        return "\n".join(f"({k}): Parameter containing: [{p.dtype} of size {'x'.join(map(str, p.shape))}]"
                         for k, p in self._parameters.items())

    def forward(self, *args, **kwargs):
        raise NotImplementedError("ParameterDict has no forward()")


class Container(Module):
    """torch's deprecated base of the containers: a Module holding the keyword modules it is given,
    with torch's FutureWarning."""

    def __init__(self, **kwargs):
        warnings.warn("`nn.Container` is deprecated. All of its functionality is now implemented in `nn.Module`. "
                      "Subclass that instead.", FutureWarning, stacklevel=2)
        super().__init__()
        for key, value in kwargs.items():
            self.add_module(key, value)
