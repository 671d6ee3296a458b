"""Make the small checkpoint files that ``tests/test_serialization_torch.py`` reads: files written
by torch's own ``torch.save``, so tritensor's reader of torch checkpoints is tested against the
real format, without torch installed where the tests run.

Run with an interpreter that has torch (``/tmp/benchenv/bin/python tools/make_torch_fixtures.py``);
it rewrites ``tests/fixtures/torch_files/``. Every file comes in torch's zip format (``*.pt``)
and its legacy pre-1.6 format (``*.legacy.pt``, ``_use_new_zipfile_serialization=False``).
``expected.json`` beside them holds what each tensor must load as (dtype, shape, strides,
offset, values as exact Python numbers), so the tests compare against torch's own values.

Tensors "on cuda" are made on the CPU with the location tag torch writes patched to ``cuda:1``
(``torch.serialization.location_tag``), as a GPU-less torch cannot save from a GPU.
"""
from __future__ import annotations

import json
import os
import pathlib
import unittest.mock

import torch

OUT = pathlib.Path(__file__).resolve().parents[1] / "tests" / "fixtures" / "torch_files"

# every dtype a checkpoint may hold that tritensor has or might have; the tests load the ones
# tritensor's dtype table lists and expect a clear error for the others
DTYPES = ["float32", "float64", "float16", "bfloat16", "int64", "int32", "int16", "int8", "uint8", "bool",
          "complex64", "uint16", "float8_e4m3fn"]


def _values(name: str) -> torch.Tensor:
    """A 2x3 tensor of ``name`` with values exact in that dtype (negatives where it has them)."""
    base = torch.tensor([[0.5, -1.25, 3.0], [7.0, -0.0, 96.0]], dtype=torch.float64)
    if name == "bool":
        return torch.tensor([[True, False, True], [False, False, True]])
    if name in ("uint8", "uint16"):
        return torch.tensor([[0, 1, 200], [7, 255, 96]]).to(getattr(torch, name))
    if name.startswith("int"):
        return torch.tensor([[0, -1, 100], [7, -128, 96]]).to(getattr(torch, name))
    if name == "complex64":
        return (base + 1j * base).to(torch.complex64)
    return base.to(getattr(torch, name))


def _describe(t: torch.Tensor) -> dict:
    values = t.reshape(-1).tolist() if t.dtype != torch.complex64 else None
    return {"dtype": str(t.dtype).removeprefix("torch."), "shape": list(t.shape), "stride": list(t.stride()),
            "offset": t.storage_offset(), "values": values, "parameter": isinstance(t, torch.nn.Parameter),
            "requires_grad": t.requires_grad}


def _expected(obj, path="") -> dict:
    """``{path: description}`` for every tensor in ``obj`` (paths as the tests walk them)."""
    out = {}
    if isinstance(obj, torch.Tensor):
        out[path] = _describe(obj)
    elif isinstance(obj, dict):
        for k, v in obj.items():
            out.update(_expected(v, f"{path}/{k}"))
    elif isinstance(obj, (list, tuple)):
        for i, v in enumerate(obj):
            out.update(_expected(v, f"{path}/{i}"))
    return out


def _save(name: str, obj, *, location: str | None = None) -> dict:
    for suffix, zipfile in ((".pt", True), (".legacy.pt", False)):
        path = OUT / f"{name}{suffix}"
        if location is None:
            torch.save(obj, path, _use_new_zipfile_serialization=zipfile)
        else:
            with unittest.mock.patch("torch.serialization.location_tag", lambda storage: location):
                torch.save(obj, path, _use_new_zipfile_serialization=zipfile)
    return _expected(obj)


def main():
    OUT.mkdir(parents=True, exist_ok=True)
    for old in OUT.glob("*.pt"):
        os.unlink(old)
    torch.manual_seed(0)
    expected = {}

    model = torch.nn.Sequential(torch.nn.Linear(3, 4), torch.nn.ReLU(), torch.nn.BatchNorm1d(4),
                                torch.nn.Linear(4, 2))
    expected["state_dict"] = _save("state_dict", model.state_dict())

    opt = torch.optim.Adam(model.parameters(), lr=0.01)
    model(torch.randn(5, 3)).square().mean().backward()
    opt.step()
    expected["optimizer"] = _save("optimizer", opt.state_dict())

    for name in DTYPES:
        expected[f"dtype_{name}"] = _save(f"dtype_{name}", {"x": _values(name), "empty": _values(name)[:0]})

    base = torch.arange(24, dtype=torch.float32).reshape(4, 6)
    views = [base, base[1:, 2:], base.t(), base[:, ::2], base[2], base.reshape(24)[5:11].view(2, 3)]
    expected["views"] = _save("views", views)

    param = torch.nn.Parameter(torch.tensor([1.0, 2.0]))
    nested = {"a": [torch.tensor([1.5, 2.5]), (torch.tensor(3, dtype=torch.int64), {"b": torch.zeros(0, 2)})],
              "param": param, "frozen": torch.nn.Parameter(torch.ones(1, dtype=torch.float64), requires_grad=False),
              "epoch": 3, "lr": 0.125, "name": "run", "flags": [True, None], "size": torch.Size([2, 3]),
              "dtype": torch.bfloat16, "device": torch.device("cuda", 1), "set": {1, 2}, "frozenset": frozenset({3}),
              "bytes": b"\x00ab", "big": 2**70, "complex": 1 + 2j, "scalar": torch.tensor(2.25)}
    expected["nested"] = _save("nested", nested)
    expected["bare"] = _save("bare", torch.tensor([[1.0, -2.0]], dtype=torch.float16))

    on_cuda = {"w": torch.tensor([1.0, 2.0, 3.0]), "v": torch.tensor([4, 5], dtype=torch.int32)}
    expected["cuda"] = _save("cuda", on_cuda, location="cuda:1")

    # whole torch modules: the file names torch's classes, which tritensor cannot rebuild
    _save("whole_model", torch.nn.Sequential(torch.nn.Linear(2, 2)))
    stateful = torch.nn.Parameter(torch.ones(2))
    stateful.note = "attribute"  # torch saves it through _rebuild_parameter_with_state
    _save("param_with_state", {"p": stateful})

    (OUT / "expected.json").write_text(json.dumps(expected, indent=1, sort_keys=True) + "\n")
    total = sum(p.stat().st_size for p in OUT.iterdir())
    print(f"wrote {len(list(OUT.iterdir()))} files, {total} bytes, to {OUT}")


if __name__ == "__main__":
    main()
