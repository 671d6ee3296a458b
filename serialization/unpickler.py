"""A pickle reader that runs nothing it was not told to trust: ``tritensor.load``'s
``weights_only=True`` path, for tritensor's whole-object checkpoints and for torch's files.

Python's own unpickler calls whatever a file names (``os.system`` is one REDUCE away), so this
module interprets the pickle opcodes itself, as torch's ``_weights_only_unpickler`` does: a
GLOBAL is looked up in an allow-list (a dict, so nothing is imported), REDUCE calls only
allow-listed functions, NEWOBJ and BUILD make and fill only allow-listed classes, and a
persistent id goes to the caller (which turns tensor records into tensors). The interpreter is a
loop over the bytes with its own stack, so nesting in a file never reaches Python's recursion;
MARK frames nest at most :data:`MAX_MARK_DEPTH` deep. Every length is checked against the bytes
left before anything is read or allocated.
"""
from __future__ import annotations

import _compat_pickle
import codecs
import collections
import copyreg
import pickle
import struct
from pickle import UnpicklingError

MAX_MARK_DEPTH = 1000  # open MARK frames (nested containers); Python's pickler recurses far less deep

_UNPACK_I = struct.Struct("<i").unpack_from
_UNPACK_H = struct.Struct("<H").unpack_from
_UNPACK_UI = struct.Struct("<I").unpack_from
_UNPACK_Q = struct.Struct("<Q").unpack_from
_UNPACK_D = struct.Struct(">d").unpack_from


def _name_of(obj) -> str:
    """How an error names an object of the stream, without running its ``__repr__`` (which a
    half-built object of the file may not survive)."""
    module, qualname = getattr(obj, "__module__", None), getattr(obj, "__qualname__", None)
    if isinstance(module, str) and isinstance(qualname, str):
        return f"{module}.{qualname}"
    return f"a {type(obj).__module__}.{type(obj).__qualname__} object"


class MalformedPickle(UnpicklingError):
    """The bytes are not a well-formed pickle (truncated, a stack or memo used wrong, an argument of
    the wrong type): ``load`` reports it as a malformed file, not as a disallowed global."""


def unsupported_global_message(full_path: str, api: str) -> str:
    """torch's words for a GLOBAL that is not allowed (``api``: where add_safe_globals lives)."""
    if full_path.startswith("builtins."):  # torch names builtins bare: eval, not builtins.eval
        full_path = full_path[len("builtins."):]
    return (f"Unsupported global: GLOBAL {full_path} was not an allowed global by default. Please use "
            f"`{api}.add_safe_globals([{full_path}])` or the `{api}.safe_globals([{full_path}])` context "
            "manager to allowlist this global if you trust this class/function.")


class Policy:
    """What one load may touch: ``names`` maps ``module.qualname`` to the object a GLOBAL of that
    name gives; REDUCE may call any of those objects; NEWOBJ and BUILD may make and fill instances
    of those that are classes, except the classes in ``never_build`` (tensors, which only come
    from persistent ids, fully checked)."""

    def __init__(self, names: dict, *, never_build: tuple = (), api: str = "tritensor.serialization",
                 hint=None, checked: dict | None = None, refused: dict | None = None, passthrough: tuple = ()):
        self.names = names
        self.passthrough = passthrough  # errors of checked callables that are the caller's, not the file's
        self.refused = refused or {}  # full_path -> why a name the allow-list knows cannot load here
        # the allowed callables whose errors mean a malformed file (builtins fed the wrong
        # arguments), not a failure of the user's own code
        self.checked = {id(v) for v in (checked or {}).values()}
        self.objects = {id(v): v for v in names.values()}
        self.never_build = never_build
        self.api = api
        self.hint = hint  # full_path -> extra sentence for the error, or None

    def resolve(self, module: str, name: str):
        """The object a pickle's GLOBAL (``module``, ``name``) may load, after Python 2 name mapping; an
        UnpicklingError saying why (and how to allow it) for any other name, MalformedPickle for names refused
        outright."""
        if (module, name) in _compat_pickle.NAME_MAPPING:  # names written by Python 2 (torch does the same)
            module, name = _compat_pickle.NAME_MAPPING[(module, name)]
        elif module in _compat_pickle.IMPORT_MAPPING:
            module = _compat_pickle.IMPORT_MAPPING[module]
        full_path = f"{module}.{name}"
        if full_path in self.names:
            return self.names[full_path]
        if full_path in self.refused:
            raise MalformedPickle(self.refused[full_path])
        message = unsupported_global_message(full_path, self.api)
        extra = self.hint(full_path) if self.hint is not None else None
        raise UnpicklingError(message + (f" {extra}" if extra else ""))

    def allowed(self, obj) -> bool:
        """Whether ``obj`` is one of the allowlisted objects (by identity)."""
        return self.objects.get(id(obj)) is obj

    def buildable(self, cls) -> bool:
        """Whether instances of ``cls`` may be built by the pickle (allowlisted classes, never a Tensor)."""
        return isinstance(cls, type) and self.allowed(cls) and not issubclass(cls, self.never_build)


def load(data, policy: Policy, persistent_load, *, pos: int = 0, encoding: str = "utf-8"):
    """Run the pickle in ``data`` (bytes) from ``pos``: ``(object, position after its STOP)``.
    ``persistent_load(pid)`` makes the object of a persistent id (BINPERSID/PERSID)."""
    return _Interpreter(data, policy, persistent_load, encoding).run(pos)


class _Interpreter:
    def __init__(self, data, policy, persistent_load, encoding):
        self.data = memoryview(data).cast("B") if not isinstance(data, bytes) else data
        self.policy, self.persistent_load, self.encoding = policy, persistent_load, encoding

    # ----- reading ------------------------------------------------------------------------------
    def take(self, n: int) -> bytes:
        if n < 0 or self.pos + n > len(self.data):
            raise MalformedPickle(f"pickle data was truncated: an opcode at byte {self.pos} needs {n} bytes, "
                                  f"{len(self.data) - self.pos} are left")
        out = bytes(self.data[self.pos:self.pos + n])
        self.pos += n
        return out

    def line(self) -> bytes:
        data, start = self.data, self.pos
        end = bytes(data[start:start + (1 << 16)]).find(b"\n")  # a text argument is short
        if end < 0:
            raise MalformedPickle(f"pickle data was truncated: no end of line after byte {start}")
        self.pos = start + end + 1
        return bytes(data[start:start + end])

    def pop_mark(self) -> list:
        if not self.metastack:
            raise MalformedPickle(f"bad pickle: an opcode at byte {self.pos} needs a MARK there is none of")
        items = self.stack
        self.stack = self.metastack.pop()
        return items

    def pop(self):
        if not self.stack:
            raise MalformedPickle(f"bad pickle: the stack is empty at byte {self.pos}")
        return self.stack.pop()

    def top(self):
        if not self.stack:
            raise MalformedPickle(f"bad pickle: the stack is empty at byte {self.pos}")
        return self.stack[-1]

    def string(self, raw: bytes):
        return raw if self.encoding == "bytes" else self.decode(raw, self.encoding)

    def decode(self, raw: bytes, encoding: str, errors: str = "strict") -> str:
        try:
            return raw.decode(encoding, errors)
        except (UnicodeDecodeError, LookupError) as e:
            raise MalformedPickle(f"bad pickle: a string at byte {self.pos} does not decode: {e}") from None

    # ----- the risky opcodes --------------------------------------------------------------------
    def call(self, func, args):
        if not self.policy.allowed(func) or (isinstance(func, type) and issubclass(func, self.policy.never_build)):
            raise UnpicklingError(f"Trying to call reduce for unrecognized function {_name_of(func)}")
        if not isinstance(args, tuple):
            raise MalformedPickle(f"bad pickle: REDUCE arguments are a {type(args).__name__}, not a tuple")
        try:
            return func(*args)
        except self.policy.passthrough:
            raise
        except (TypeError, ValueError, KeyError, IndexError, AttributeError, OverflowError) as e:
            # allowed code fed arguments it refuses: a malformed file (the user's own classes' errors
            # stay chained as the cause)
            raise MalformedPickle(f"bad pickle: {_name_of(func)} of {len(args)} arguments failed: "
                                  f"{type(e).__name__}: {e}") from (None if id(func) in self.policy.checked else e)

    def new(self, cls, args, kwargs=None):
        if not self.policy.buildable(cls):
            raise UnpicklingError("Can only create new object for classes allowlisted via `add_safe_globals` "
                                  f"but got {_name_of(cls)}")
        if not isinstance(args, tuple) or not isinstance(kwargs or {}, dict):
            raise MalformedPickle("bad pickle: NEWOBJ arguments are not a tuple (and a dict)")
        try:
            return cls.__new__(cls, *args, **(kwargs or {}))
        except (TypeError, ValueError, KeyError, IndexError, AttributeError, OverflowError) as e:
            raise MalformedPickle(f"bad pickle: NEWOBJ of {cls.__qualname__} failed: {type(e).__name__}: {e}") \
                from (None if id(cls) in self.policy.checked else e)

    def build(self, inst, state):
        cls = type(inst)
        if cls is collections.OrderedDict:
            if not isinstance(state, dict):
                raise MalformedPickle("bad pickle: BUILD of an OrderedDict with a state that is not a dict")
            inst.__dict__.update(state)  # a state dict's _metadata, as torch
            return
        if not self.policy.buildable(cls):
            raise UnpicklingError("Can only build OrderedDict or types allowlisted via `add_safe_globals`, "
                                  f"but got {_name_of(cls)}")
        try:
            self._build(cls, inst, state)
        except (TypeError, ValueError, KeyError, IndexError, AttributeError, OverflowError) as e:
            raise MalformedPickle(f"bad pickle: BUILD of {cls.__qualname__} failed: {type(e).__name__}: {e}") from e

    def _build(self, cls, inst, state):
        setstate = getattr(inst, "__setstate__", None)
        if setstate is not None and getattr(cls, "__setstate__", None) is not None:
            setstate(state)
            return
        slotstate = None
        if isinstance(state, tuple) and len(state) == 2:
            state, slotstate = state
        if state:
            if not isinstance(state, dict):
                raise MalformedPickle(f"bad pickle: BUILD state of {_name_of(cls)} is not a dict")
            inst.__dict__.update(state)
        if slotstate:
            if not isinstance(slotstate, dict):
                raise MalformedPickle(f"bad pickle: BUILD slot state of {_name_of(cls)} is not a dict")
            for k, v in slotstate.items():
                setattr(inst, k, v)

    # ----- the loop -----------------------------------------------------------------------------
    def run(self, pos: int):
        self.pos, self.stack, self.metastack, memo = pos, [], [], {}
        data = self.data
        end = len(data)
        while True:
            if self.pos >= end:
                raise MalformedPickle("pickle data was truncated: no STOP opcode")
            op = data[self.pos]
            self.pos += 1
            stack = self.stack
            if op == 0x80:  # PROTO
                proto = self.take(1)[0]
                if proto > pickle.HIGHEST_PROTOCOL:
                    raise MalformedPickle(f"unsupported pickle protocol: {proto}")
            elif op == 0x95:  # FRAME: only a read-ahead hint
                self.take(8)
            elif op == 0x2E:  # STOP
                return self.pop(), self.pos
            elif op == 0x28:  # MARK
                if len(self.metastack) >= MAX_MARK_DEPTH:
                    raise MalformedPickle(f"the pickle nests containers deeper than {MAX_MARK_DEPTH} levels")
                self.metastack.append(stack)
                self.stack = []
            elif op == 0x30:  # POP
                if stack:
                    stack.pop()
                else:
                    self.pop_mark()
            elif op == 0x31:  # POP_MARK
                self.pop_mark()
            elif op == 0x32:  # DUP
                stack.append(self.top())
            # --- globals and calls
            elif op == 0x63:  # GLOBAL
                module = self.line().decode("utf-8", "replace")
                name = self.line().decode("utf-8", "replace")
                stack.append(self.policy.resolve(module, name))
            elif op == 0x93:  # STACK_GLOBAL
                name, module = self.pop(), self.pop()
                if type(name) is not str or type(module) is not str:
                    raise MalformedPickle("bad pickle: STACK_GLOBAL needs two strings")
                stack.append(self.policy.resolve(module, name))
            elif op in (0x82, 0x83, 0x84):  # EXT1 EXT2 EXT4: copyreg's registry names a global
                code = (self.take(1)[0] if op == 0x82 else _UNPACK_H(self.take(2))[0] if op == 0x83
                        else _UNPACK_I(self.take(4))[0])
                key = copyreg._inverted_registry.get(code)
                if key is None:
                    raise MalformedPickle(f"unregistered extension code {code}")
                stack.append(self.policy.resolve(*key))
            elif op == 0x52:  # REDUCE
                args = self.pop()
                func = self.pop()
                stack.append(self.call(func, args))
            elif op == 0x81:  # NEWOBJ
                args = self.pop()
                cls = self.pop()
                stack.append(self.new(cls, args))
            elif op == 0x92:  # NEWOBJ_EX
                kwargs, args, cls = self.pop(), self.pop(), self.pop()
                stack.append(self.new(cls, args, kwargs))
            elif op == 0x69:  # INST: GLOBAL + MARK'ed args + a call
                module = self.line().decode("utf-8", "replace")
                name = self.line().decode("utf-8", "replace")
                cls = self.policy.resolve(module, name)
                args = tuple(self.pop_mark())
                self.stack.append(self.call(cls, args))
            elif op == 0x6F:  # OBJ
                items = self.pop_mark()
                if not items:
                    raise MalformedPickle("bad pickle: OBJ without a class")
                self.stack.append(self.call(items[0], tuple(items[1:])))
            elif op == 0x62:  # BUILD
                state = self.pop()
                self.build(self.top(), state)
            elif op == 0x51:  # BINPERSID
                stack.append(self.persistent_load(self.pop()))
            elif op == 0x50:  # PERSID
                stack.append(self.persistent_load(self.line().decode("ascii", "replace")))
            # --- containers
            elif op == 0x7D:  # EMPTY_DICT
                stack.append({})
            elif op == 0x5D:  # EMPTY_LIST
                stack.append([])
            elif op == 0x29:  # EMPTY_TUPLE
                stack.append(())
            elif op == 0x8F:  # EMPTY_SET
                stack.append(set())
            elif op == 0x85:  # TUPLE1
                stack.append((self.pop(),))
            elif op == 0x86:  # TUPLE2
                b, a = self.pop(), self.pop()
                stack.append((a, b))
            elif op == 0x87:  # TUPLE3
                c, b, a = self.pop(), self.pop(), self.pop()
                stack.append((a, b, c))
            elif op == 0x74:  # TUPLE
                items = self.pop_mark()
                self.stack.append(tuple(items))
            elif op == 0x6C:  # LIST
                items = self.pop_mark()
                self.stack.append(items)
            elif op == 0x64:  # DICT
                items = self.pop_mark()
                self.stack.append(self.setitems({}, items, "DICT"))
            elif op == 0x91:  # FROZENSET
                items = self.pop_mark()
                self.stack.append(self.hashed(frozenset, items))
            elif op == 0x61:  # APPEND
                item = self.pop()
                self.target(list, "append to").append(item)
            elif op == 0x65:  # APPENDS
                items = self.pop_mark()
                self.target(list, "extend").extend(items)
            elif op == 0x73:  # SETITEM
                v, k = self.pop(), self.pop()
                self.setitems(self.target(dict, "SETITEM for"), [k, v], "SETITEM")
            elif op == 0x75:  # SETITEMS
                items = self.pop_mark()
                self.setitems(self.target(dict, "SETITEMS for"), items, "SETITEMS")
            elif op == 0x90:  # ADDITEMS
                items = self.pop_mark()
                self.target(set, "add items to").update(self.hashed(list, items))
            # --- memo
            elif op in (0x71, 0x72, 0x70):  # BINPUT LONG_BINPUT PUT
                idx = (self.take(1)[0] if op == 0x71 else _UNPACK_UI(self.take(4))[0] if op == 0x72
                       else self.int_line())
                memo[idx] = self.top()
            elif op == 0x94:  # MEMOIZE
                memo[len(memo)] = self.top()
            elif op in (0x68, 0x6A, 0x67):  # BINGET LONG_BINGET GET
                idx = (self.take(1)[0] if op == 0x68 else _UNPACK_UI(self.take(4))[0] if op == 0x6A
                       else self.int_line())
                if idx not in memo:
                    raise MalformedPickle(f"bad pickle: memo entry {idx} was never stored")
                stack.append(memo[idx])
            # --- scalars
            elif op == 0x4E:  # NONE
                stack.append(None)
            elif op == 0x88:  # NEWTRUE
                stack.append(True)
            elif op == 0x89:  # NEWFALSE
                stack.append(False)
            elif op == 0x4B:  # BININT1
                stack.append(self.take(1)[0])
            elif op == 0x4D:  # BININT2
                stack.append(_UNPACK_H(self.take(2))[0])
            elif op == 0x4A:  # BININT
                stack.append(_UNPACK_I(self.take(4))[0])
            elif op == 0x8A:  # LONG1
                stack.append(int.from_bytes(self.take(self.take(1)[0]), "little", signed=True))
            elif op == 0x8B:  # LONG4
                n = _UNPACK_I(self.take(4))[0]
                stack.append(int.from_bytes(self.take(n), "little", signed=True))
            elif op == 0x47:  # BINFLOAT
                stack.append(_UNPACK_D(self.take(8))[0])
            elif op == 0x49:  # INT (text; 00 and 01 are False and True)
                text = self.line()
                stack.append(False if text == b"00" else True if text == b"01" else self.parse(int, text))
            elif op == 0x4C:  # LONG (text)
                stack.append(self.parse(int, self.line().rstrip(b"L")))
            elif op == 0x46:  # FLOAT (text)
                stack.append(self.parse(float, self.line()))
            elif op == 0x58:  # BINUNICODE
                stack.append(self.unicode(self.take(_UNPACK_UI(self.take(4))[0])))
            elif op == 0x8C:  # SHORT_BINUNICODE
                stack.append(self.unicode(self.take(self.take(1)[0])))
            elif op == 0x8D:  # BINUNICODE8
                stack.append(self.unicode(self.take(self.size8())))
            elif op == 0x56:  # UNICODE (text)
                stack.append(self.decode(self.line(), "raw-unicode-escape"))
            elif op == 0x42:  # BINBYTES
                stack.append(self.take(_UNPACK_UI(self.take(4))[0]))
            elif op == 0x43:  # SHORT_BINBYTES
                stack.append(self.take(self.take(1)[0]))
            elif op == 0x8E:  # BINBYTES8
                stack.append(self.take(self.size8()))
            elif op == 0x96:  # BYTEARRAY8
                stack.append(bytearray(self.take(self.size8())))
            elif op == 0x55:  # SHORT_BINSTRING (Python 2 str)
                stack.append(self.string(self.take(self.take(1)[0])))
            elif op == 0x54:  # BINSTRING
                n = _UNPACK_I(self.take(4))[0]
                stack.append(self.string(self.take(n)))
            elif op == 0x53:  # STRING (text, quoted)
                text = self.line()
                if len(text) < 2 or text[0] != text[-1] or text[:1] not in (b"'", b'"'):
                    raise MalformedPickle("bad pickle: the STRING opcode argument must be quoted")
                try:
                    raw = codecs.escape_decode(text[1:-1])[0]
                except ValueError as e:
                    raise MalformedPickle(f"bad pickle: the STRING opcode argument: {e}") from None
                stack.append(self.string(raw))
            elif op in (0x97, 0x98):  # NEXT_BUFFER READONLY_BUFFER
                raise MalformedPickle("out-of-band pickle buffers are not supported")
            else:
                raise UnpicklingError(f"Unsupported operand {op} (byte {self.pos - 1})")

    # ----- helpers ------------------------------------------------------------------------------
    def size8(self) -> int:
        n = _UNPACK_Q(self.take(8))[0]
        if n > len(self.data) - self.pos:
            raise MalformedPickle(f"pickle data was truncated: a length of {n} bytes at byte {self.pos}")
        return n

    def unicode(self, raw: bytes) -> str:
        return self.decode(raw, "utf-8", "surrogatepass")

    def int_line(self) -> int:
        return self.parse(int, self.line())

    def parse(self, kind, text: bytes):
        try:
            return kind(text)
        except ValueError:
            raise MalformedPickle(f"bad pickle: {text[:40]!r} is not a{'n int' if kind is int else ' float'}") from None

    def target(self, kind, what: str):
        obj = self.top()
        if not isinstance(obj, kind) or (kind is dict and type(obj).__module__ not in ("builtins", "collections")):
            raise UnpicklingError(f"Can only {what} {kind.__name__}s, but got {type(obj)}")
        return obj

    def hashed(self, make, items):
        try:
            return make(items)
        except TypeError as e:
            raise MalformedPickle(f"bad pickle: {e}") from None

    def setitems(self, d, items, what: str):
        if len(items) % 2:
            raise MalformedPickle(f"bad pickle: {what} with an odd number of items")
        try:
            for i in range(0, len(items), 2):
                d[items[i]] = items[i + 1]
        except TypeError as e:  # an unhashable key
            raise MalformedPickle(f"bad pickle: {what}: {e}") from None
        return d
