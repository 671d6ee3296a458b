"""conv2d and its two backward ops: PyTorch's argument rules, then the implicit-GEMM kernels.

Argument normalisation (ints or pairs, ``'same'``/``'valid'``), every shape/dtype/device check and
the output size happen here, once, before anything launches; ``triton_kernels/conv.py`` only
sees pointers, shapes and strides. conv2d does that work once per call signature and keeps what
it decided (:class:`_Conv2dPlan`): on a GPU its host time per call, not its kernels, was what a
ResNet layer's conv2d cost, so a repeated call only allocates and launches.

The backward functions take the same geometry arguments as the forward so autograd can call them
with what it saved:

* ``conv2d_backward_input(grad_output, weight, input_shape, stride, padding, dilation, groups)``
* ``conv2d_backward_weight(grad_output, input, weight_shape, stride, padding, dilation, groups)``

(grad of the bias is ``grad_output.sum((0, 2, 3))``, a plain reduction.)

``conv_transpose2d`` is conv2d's gradient with respect to its input, used as a layer: it runs the
grad-input kernel with the layer's input in the place of ``grad_output`` (torch's weight layout
``(C_in, C_out / groups, kH, kW)`` is exactly conv2d's weight for that), so it needs no kernel
of its own; its derivative is conv2d (input) and the grad-weight kernel with the roles swapped.
"""
from __future__ import annotations

from typing import TYPE_CHECKING

import marshal
import numbers
import weakref

from ...backends import cudnn as _cudnn
from ...triton_kernels import conv as _k
from ...triton_kernels import conv_repack as _rp
from ...triton_kernels import matmul as _mm
from ...runtime import dtype as dt
from ...runtime.dtype_policy import float_compute
from ..shape import Size, channels_last, channels_last_strides, contiguous_strides
from ..tensor_base import TensorBase
from . import copies as _copies
from . import elementwise as _ew

if TYPE_CHECKING:  # the annotations' class (core entries import TensorBase, never Tensor: a cycle)
    from ..tensor import Tensor


def _pair(v, name: str, op: str, minimum: int) -> tuple:
    """An int or a pair of ints, each >= minimum, as a pair (PyTorch's _pair)."""
    vals = tuple(v) if isinstance(v, (tuple, list)) else (v, v)
    if len(vals) == 1:
        vals = vals * 2
    if len(vals) != 2 or not all(isinstance(x, numbers.Integral) and not isinstance(x, bool) for x in vals):
        raise TypeError(f"{op}(): {name} must be an int or a pair of ints, got {v!r}")
    if any(x < minimum for x in vals):
        what = {1: "non-positive", 0: "negative"}[minimum]
        raise RuntimeError(f"{op}(): {what} {name} is not supported, got {v!r}")
    return tuple(int(x) for x in vals)


def _check_tensor(x, name: str, op: str) -> None:
    if not isinstance(x, TensorBase):
        raise TypeError(f"{op}(): argument '{name}' must be a Tensor, not {type(x).__name__}")


def _check_dtypes(op: str, **tensors) -> None:
    items = [(k, v) for k, v in tensors.items() if v is not None]
    first_name, first = items[0]
    if first.dtype not in dt.FLOATING:
        raise RuntimeError(f"{op}(): expected a floating-point {first_name} (float16, bfloat16, float32, float64), "
                           f"got {first.dtype.name}")
    for name, t in items[1:]:
        if t.dtype is not first.dtype:
            raise RuntimeError(f"{op}(): {first_name} type ({first.dtype.name}) and {name} type ({t.dtype.name}) "
                               f"should be the same")
        if t.device != first.device:
            raise RuntimeError(f"{op}(): Expected all tensors to be on the same device, but found at least two "
                               f"devices, {first.device} and {t.device}!")


def conv_geometry(op: str, input_shape, weight_shape, stride, padding, dilation, groups):
    """Check a conv2d's shapes and arguments; return (stride, (pad_top, pad_left), dilation, (OH, OW)).

    ``input_shape`` is (N, C, H, W); ``weight_shape`` is (OC, C / groups, KH, KW).
    """
    if isinstance(groups, bool) or not isinstance(groups, numbers.Integral) or groups <= 0:
        raise RuntimeError(f"{op}(): non-positive groups is not supported, got groups={groups!r}")
    N, C, H, W = input_shape
    OC, Cg, KH, KW = weight_shape
    if KH <= 0 or KW <= 0:  # an empty window would sum nothing: a map of zeros, silently
        raise RuntimeError(f"{op}(): kernel size should be greater than zero, but got kernel_height: {KH} "
                           f"kernel_width: {KW}")
    if OC < groups:
        raise RuntimeError(f"{op}(): Given groups={groups}, expected weight to be at least {groups} at dimension 0, "
                           f"but got weight of size {list(weight_shape)} instead")
    if OC % groups:
        raise RuntimeError(f"{op}(): Given groups={groups}, expected weight to be divisible by {groups} at "
                           f"dimension 0, but got weight of size {list(weight_shape)} instead")
    if Cg * groups != C:
        raise RuntimeError(f"{op}(): Given groups={groups}, weight of size {list(weight_shape)}, expected input"
                           f"{list(input_shape)} to have {Cg * groups} channels, but got {C} channels instead")
    stride = _pair(stride, "stride", op, 1)
    dilation = _pair(dilation, "dilation", op, 1)
    span = (dilation[0] * (KH - 1) + 1, dilation[1] * (KW - 1) + 1)  # receptive field
    if isinstance(padding, str) and padding == "same":
        if stride != (1, 1):
            raise RuntimeError(f"{op}(): padding='same' is not supported for strided convolutions")
        # PyTorch pads (span - 1) in total, the odd element at the bottom/right: the kernel
        # gets the top/left padding and the output size, and masks the rest.
        return stride, ((span[0] - 1) // 2, (span[1] - 1) // 2), dilation, (H, W)
    if isinstance(padding, str) and padding != "valid":
        raise ValueError(f"{op}(): Invalid padding string {padding!r}, should be one of {{'valid', 'same'}}")
    pad = (0, 0) if padding == "valid" else _pair(padding, "padding", op, 0)
    padded = (H + 2 * pad[0], W + 2 * pad[1])
    if padded[0] < span[0] or padded[1] < span[1]:
        raise RuntimeError(f"{op}(): Calculated padded input size per channel: ({padded[0]} x {padded[1]}). "
                           f"Kernel size: ({span[0]} x {span[1]}). Kernel size can't be greater than actual "
                           f"input size")
    out = ((padded[0] - span[0]) // stride[0] + 1, (padded[1] - span[1]) // stride[1] + 1)
    return stride, pad, dilation, out


def _batched(input, op: str):
    if input.ndim == 3:
        return input.unsqueeze(0), True
    if input.ndim != 4:
        raise RuntimeError(f"{op}(): Expected 3D (unbatched) or 4D (batched) input to {op}, but got input of size: "
                           f"{list(input.shape)}")
    return input, False


def _operands(op: str, input, weight, bias, weight_layout: str):
    """The checks conv2d and conv_transpose2d share: tensors of one floating dtype and device, a
    3-D (unbatched) or 4-D input, returned 4-D with whether it was unbatched, and a 4-D weight."""
    _check_tensor(input, "input", op)
    _check_tensor(weight, "weight", op)
    if bias is not None:
        _check_tensor(bias, "bias", op)
    _check_dtypes(op, input=input, weight=weight, bias=bias)
    x, unbatched = _batched(input, op)
    if weight.ndim != 4:
        raise RuntimeError(f"{op}(): weight must be 4-D {weight_layout}, got shape {list(weight.shape)}")
    return x, unbatched


def conv2d(input, weight, bias=None, stride=1, padding=0, dilation=1, groups=1) -> Tensor:
    """torch.nn.functional.conv2d over NCHW (or unbatched CHW) input.

    A call is planned once per signature (:class:`_Conv2dPlan`): a repeated call finds its plan
    and goes straight to allocating and launching. What is no part of the signature is handled at
    every call: the tensors' memory, and the packed weight's validity (its version)."""
    try:
        # The arguments by marshal's bytes, not by value: 1, 1.0 and True are one dict key, and
        # torch refuses the last two. (A NumPy int is no marshal type: such a call is planned anew.)
        args = _dumps((stride, padding, dilation, groups))
        key = (input.dtype, input._shape, input._stride, input.device.type, input.device.index, weight.dtype,
               weight._shape, weight._stride, weight.device is input.device, args, _cudnn.allow_tf32,
               None if bias is None else (bias.dtype, bias._shape, bias._stride, bias.device is input.device))
        p = _conv2d_plans.get(key)
    except (AttributeError, ValueError):  # not tensors (the checks say so), or no marshal type
        key = p = None
    if p is None:
        p = _plan_conv2d(input, weight, bias, stride, padding, dilation, groups)
        if key is not None:
            _keep(_conv2d_plans, key, p)
    x = input if p.x_view is None else input._view(*p.x_view)  # unbatched: a batch of one
    y = TensorBase._empty(p.shape, p.dtype, p.dev)
    if p.y_strides is not None:  # channels-last: _empty_channels_last's strides, worked out once
        y._stride = p.y_strides
    if p.conv is not None or p.mm is not None:
        xh = x
        if p.x_repack is not None:
            xh = TensorBase._empty(x._shape, p.dtype, p.dev)
            xh._stride = p.xh_strides
            p.x_repack(xh, x)
        yh = y
        if p.restore is not None:
            yh = TensorBase._empty(p.shape, p.dtype, p.dev)
            yh._stride = p.yh_strides
        w = _pack(weight, "forward", groups) if p.pack else weight
        if p.conv is not None:
            p.conv.run(xh, w, bias if bias is not None else yh, yh)
        else:  # a pointwise convolution: one GEMM over views
            a_layout, b_layout, out_layout, weight_first = p.mm
            a, b = (w, xh) if weight_first else (xh, w)
            _mm.matmul(yh._view(*out_layout), a._view(*a_layout), b._view(*b_layout), bias=bias,
                       allow_tf32=p.allow_tf32)
        if p.restore is not None:
            p.restore(y, yh)
    return y.squeeze(0) if p.x_view is not None else y


_dumps = marshal.dumps
_conv2d_plans: dict = {}  # conv2d's call signature -> _Conv2dPlan
_PLANS_KEPT = 4096  # a workload of ever new shapes starts again rather than grow


def _keep(plans: dict, key, p) -> None:
    """Remember plan ``p`` under ``key`` (a signature's first call only), starting the cache again once full."""
    if len(plans) >= _PLANS_KEPT:
        plans.clear()
    plans[key] = p


class _Conv2dPlan:
    """What conv2d's checks and layout decisions made of one call signature: the tensors' dtypes,
    shapes, strides and devices, stride, padding, dilation, groups and ``cudnn.allow_tf32``.

    ``x_view``: the 4-D (shape, strides) an unbatched input is read as (None: batched). ``shape``,
    ``dtype``, ``dev``, ``y_strides``: the result (``y_strides`` None: contiguous). The work, none
    for an empty result: ``conv`` (the forward kernel's ``triton_kernels/conv.py: LaunchPlan``) or ``mm`` (a
    pointwise convolution's GEMM: the (shape, strides) of its A, B and output views and whether A
    is the weight), on ``xh`` (``x`` repacked NHWC by ``x_repack(xh, x)`` into ``xh_strides``
    where that is set), the weight (packed first where ``pack``), into ``yh`` (an NHWC buffer of
    ``yh_strides`` that ``restore(y, yh)`` copies into ``y``, where that is set, else ``y``)."""

    __slots__ = ("x_view", "shape", "dtype", "dev", "y_strides", "conv", "mm", "allow_tf32", "x_repack",
                 "xh_strides", "pack", "restore", "yh_strides")


def _plan_conv2d(input, weight, bias, stride, padding, dilation, groups) -> _Conv2dPlan:
    """Check a conv2d call (torch's errors, before anything is allocated) and plan its signature."""
    op = "conv2d"
    x, unbatched = _operands(op, input, weight, bias, "(out_channels, in_channels / groups, kH, kW)")
    if bias is not None and (bias.ndim != 1 or bias.shape[0] != weight.shape[0]):
        raise RuntimeError(f"{op}(): bias must have shape [{weight.shape[0]}] (out_channels), got {list(bias.shape)}")
    stride, pad, dilation, (OH, OW) = conv_geometry(op, x.shape, weight.shape, stride, padding, dilation, groups)
    p = _Conv2dPlan()
    p.x_view = (x._shape, x._stride) if unbatched else None
    p.shape, p.dtype, p.dev, p.allow_tf32 = Size((x.shape[0], weight.shape[0], OH, OW)), x.dtype, x.device, \
        _cudnn.allow_tf32
    y = _output(p.shape, x, weight, x.dtype, x.device)  # a probe: the layout decisions are made on it
    p.y_strides = None if y._stride == y._contiguous_strides() else y._stride
    p.conv = p.mm = p.x_repack = p.xh_strides = p.restore = p.yh_strides = None
    p.pack = False
    bias_stride = None if bias is None else bias.stride(0)
    N, C, H, W = x.shape
    OC, Cg = weight.shape[0], weight.shape[1]
    pointwise = _pointwise(weight, stride, pad, groups)
    if y.numel() == 0:
        pass
    elif pointwise and bias is None and _nchw_gemm(x, y):  # y[n] (OC, H*W) = W (OC, C) @ x[n] (C, H*W)
        p.mm = (((N, OC, C), (0, weight.stride(0), weight.stride(1))), ((N, C, H * W), (x.stride(0), x.stride(1), 1)),
                ((N, OC, H * W), (OC * H * W, H * W, 1)), True)
    elif not pointwise and not _k.nhwc(Cg, OC // groups):  # few channels (the stem, depthwise): read in place
        p.conv = _k.LaunchPlan(_k.configure_forward((x.shape, x.stride()), (weight.shape, weight.stride()),
                                                    (y.shape, y.stride()), bias_stride, x.dtype, stride, pad, dilation,
                                                    groups, _cudnn.allow_tf32))
    else:  # NHWC inside: x repacked on the way in (see nhwc), y on the way out (see _nhwc_result, _restore)
        xh_strides, yh_strides = x._stride, y._stride
        if not _is_nhwc(x):
            p.x_repack, p.xh_strides = _repack_in(x), channels_last_strides(x.shape)
            xh_strides = p.xh_strides
        if not _is_nhwc(y):
            p.restore, p.yh_strides = _repack_out(y), channels_last_strides(y.shape)
            yh_strides = p.yh_strides
        if pointwise:  # yh (N*H*W, OC) = xh (N*H*W, C) @ weight (C, OC) + bias: the weight a K-major B
            p.mm = (((N * H * W, C), (C, 1)), ((C, OC), (weight.stride(1), weight.stride(0))),
                    ((N * H * W, OC), (OC, 1)), False)
        else:  # the weight packed (OC, KH, KW, Cg), the forward kernel's K-major B, unless it is so already
            p.pack = not _is_nhwc(weight)
            w_strides = channels_last_strides(weight.shape) if p.pack else weight.stride()
            p.conv = _k.LaunchPlan(_k.configure_forward((x.shape, xh_strides), (weight.shape, w_strides),
                                                        (y.shape, yh_strides), bias_stride, x.dtype, stride, pad,
                                                        dilation, groups, _cudnn.allow_tf32))
    return p


def _output(shape, *inputs_and_dtype):
    """A result laid out channels-last when an input is (PyTorch's choice for convolutions), else
    contiguous: ``_output(shape, t1, t2 ..., dtype, device)``."""
    *tensors, dtype_, dev = inputs_and_dtype
    for t in tensors:
        if t.ndim == 4 and not t.is_contiguous() and t.is_contiguous(memory_format=channels_last):
            return TensorBase._empty_channels_last(shape, dtype_, dev)
    return TensorBase._empty(shape, dtype_, dev)


# ----- NHWC inside: the repack on the way in and out, and the weight cache ----------------------------
def _is_nhwc(t) -> bool:
    return t.is_contiguous(memory_format=channels_last)


def nhwc(t):
    """``t`` (N, C, H, W) laid out channels-last and dense (NHWC), as the NHWC kernels read it:
    ``t`` itself when it already is, else a copy by the repack kernel (any NCHW-like layout whose
    H and W merge) or, for other strides, the general strided copy."""
    if _is_nhwc(t):
        return t
    out = TensorBase._empty_channels_last(t.shape, t.dtype, t.device)
    n, c, h, w = t.shape
    if _transposable(t):
        _rp.transpose(out, t, n, c, h * w, t.stride()[:2], (h * w * c, c))
    else:
        _copies.copy_(out, t)
    return out


def _transposable(t) -> bool:
    """Whether ``t``'s H and W merge into one pixel axis at unit stride: (N, C, H*W), what the
    repack kernel reads."""
    n, c, h, w = t.shape
    sn, sc, sh, sw = t.stride()
    pixel_stride = sw if w > 1 else sh
    return h * w == 1 or (pixel_stride == 1 and (h == 1 or w == 1 or sh == w))


def _repack_in(t):
    """:func:`nhwc`'s copy of a tensor laid out as ``t`` (not NHWC), configured once: a function
    ``repack(out, t)`` for any such tensor and its channels-last ``out``."""
    n, c, h, w = t.shape
    if _transposable(t) and t.numel():
        return _rp.TransposePlan(n, c, h * w, t.stride()[:2], (h * w * c, c), t.dtype.itemsize).run
    return _copies.copy_  # the general strided copy (which moves nothing for an empty t)


def _repack_out(y):
    """:func:`_restore`'s copy for a result laid out as ``y`` (contiguous, not empty), configured
    once: a function ``restore(y, yh)``."""
    n, c, h, w = y.shape
    return _rp.TransposePlan(n, h * w, c, (h * w * c, c), (c * h * w, h * w), y.dtype.itemsize).run


def _nhwc_result(y):
    """Where an NHWC kernel writes a result that must end up in ``y``: ``y`` itself when it is
    channels-last (or both layouts at once), else a channels-last buffer :func:`_restore` copies."""
    return y if _is_nhwc(y) else TensorBase._empty_channels_last(y.shape, y.dtype, y.device)


def _restore(y, yh) -> None:
    """Copy the NHWC result ``yh`` into the contiguous (NCHW) ``y`` by the repack kernel."""
    if yh is not y:
        n, c, h, w = y.shape
        _rp.transpose(y, yh, n, h * w, c, (h * w * c, c), (c * h * w, h * w))


class _Packs:
    """The packed copies of one weight, valid while its storage, layout and version are those seen."""

    __slots__ = ("ref", "storage", "counter", "version", "layout", "packs")


# id(weight) -> _Packs. Each entry holds the weight and its storage by weak reference only, and the
# weight's death removes its entry (the reference's callback): a dead weight's packs die with it.
_PACKS: dict = {}


def _forget(key, ref) -> None:
    e = _PACKS.get(key)
    if e is not None and e.ref is ref:
        del _PACKS[key]


def _pack_forward(weight, groups):
    return nhwc(weight)  # (OC, KH, KW, Cg): the forward kernel's K-major B


def _pack_input_grad(weight, groups):
    """(groups, KH, KW, Cg, OCg) contiguous: the grad-input kernel's B, K-major (output channels
    at unit stride), by the general strided copy (weight-sized, once per update)."""
    OC, Cg, KH, KW = weight.shape
    so, sc, sh, sw = weight.stride()
    OCg = OC // groups
    out = TensorBase._empty((groups, KH, KW, Cg, OCg), weight.dtype, weight.device)
    _copies.copy_(out, weight._view((groups, KH, KW, Cg, OCg), (OCg * so, sh, sw, sc, so)))
    return out


_PACKERS = {"forward": _pack_forward, "input_grad": _pack_input_grad}


def packed_weight(weight, kind: str, groups: int):
    """``weight`` packed for the NHWC ``kind`` kernel ("forward" or "input_grad"), cached.

    A training step repacks a weight once per update, not once per call: the packs are kept per
    weight tensor and reused while its version counter (bumped by every in-place write, the
    optimizers' included), its storage (``.data = ...`` replaces it), its layout and dtype are
    those they were made from. An already channels-last weight is the forward pack itself."""
    if kind == "forward" and _is_nhwc(weight):
        return weight
    return _pack(weight, kind, groups)


def _pack(weight, kind: str, groups: int):
    """:func:`packed_weight` of a weight that needs packing (a plan knows it does): the cached
    pack while it is valid, else a new one."""
    key = id(weight)
    e = _PACKS.get(key)
    layout = (weight._offset, weight._shape, weight._stride, weight.dtype, groups)
    if (e is None or e.ref() is not weight or e.storage() is not weight._storage or e.counter is not
            weight._version_counter or e.version != weight._version or e.layout != layout):
        e = _Packs()
        e.ref = weakref.ref(weight, lambda r, key=key: _forget(key, r))
        e.storage = weakref.ref(weight._storage)
        e.counter, e.version, e.layout, e.packs = weight._version_counter, weight._version, layout, {}
        _PACKS[key] = e
    p = e.packs.get(kind)
    if p is None:
        p = e.packs[kind] = _PACKERS[kind](weight, groups)
    return p


def nhwc_grad_output(grad_output, weight_shape, groups: int):
    """The gradient both backward kernels read, repacked once for the two of them where they run
    NHWC (autograd calls this before ``conv2d_backward_input`` and ``conv2d_backward_weight``)."""
    if _k.nhwc(weight_shape[1], weight_shape[0] // groups) and grad_output.ndim == 4:
        return nhwc(grad_output)
    return grad_output


def _pointwise(weight, stride, pad, groups) -> bool:
    """A 1x1, stride-1, unpadded, ungrouped convolution: a matrix product per image."""
    return weight.shape[2] == weight.shape[3] == 1 and stride == (1, 1) and pad == (0, 0) and groups == 1


def _nchw_gemm(x, y) -> bool:
    """Whether a pointwise convolution runs on NCHW in place, as y[n] (OC, H*W) = W (OC, C) @ x[n]
    (C, H*W): both activations NCHW with H*W at unit stride, rows of whole 16-byte vectors, and
    not TF32 (whose warpgroup MMA wants B K-major: an N-major B is copied 4 bytes at a time). Then
    the GEMM's operands and output are all read and written 16 bytes at a time with no repack,
    which would cost a pointwise convolution (bandwidth-bound) more than the convolution itself."""
    n, c, h, w = x.shape
    if y.is_contiguous(memory_format=channels_last) and not y.is_contiguous():
        return False
    tf32 = x.dtype is dt.float32 and _cudnn.allow_tf32
    hw_unit = h * w == 1 or ((w == 1 or x.stride(3) == 1) and (h == 1 or x.stride(2) == w * x.stride(3)))
    return hw_unit and not tf32 and (h * w * x.dtype.itemsize) % 16 == 0 and y.is_contiguous()


def _check_grad_output(op, grad_output, expected_shape):
    if tuple(grad_output.shape) != tuple(expected_shape):
        raise RuntimeError(f"{op}(): grad_output has shape {list(grad_output.shape)} but the convolution's output "
                           f"has shape {list(expected_shape)}")


def _shape4(shape, name: str, op: str) -> tuple:
    shape = tuple(shape)
    if len(shape) != 4 or not all(isinstance(s, numbers.Integral) and s >= 0 for s in shape):
        raise RuntimeError(f"{op}(): {name} must be 4 non-negative sizes, got {list(shape)}")
    return tuple(int(s) for s in shape)


def _input_grad(dx, dy, weight, stride, pad, dilation, groups) -> None:
    """dx = conv2d's input gradient of dy (conv_transpose2d's forward): NHWC inside where the
    channels allow, the caller's layouts read in place otherwise."""
    OC, Cg = weight.shape[0], weight.shape[1]
    if dx.numel() == 0:
        return
    if _k.nhwc(Cg, OC // groups):
        dxh = _nhwc_result(dx)
        _k.conv2d_backward_input(dxh, nhwc(dy), packed_weight(weight, "input_grad", groups), stride, pad, dilation,
                                 groups, allow_tf32=_cudnn.allow_tf32)
        _restore(dx, dxh)
    else:
        _k.conv2d_backward_input(dx, dy, weight, stride, pad, dilation, groups, allow_tf32=_cudnn.allow_tf32)


def conv2d_backward_input(grad_output, weight, input_shape, stride=1, padding=0, dilation=1, groups=1, *,
                          channels_last_result=None) -> Tensor:
    """d(loss)/d(input) of conv2d, given d(loss)/d(output); returns a tensor of ``input_shape`` (4-D),
    laid out as ``grad_output`` is unless ``channels_last_result`` says (autograd: as the input).
    Planned once per call signature, as conv2d is (:class:`_GradPlan`)."""
    try:
        args = _dumps((tuple(input_shape), stride, padding, dilation, groups, channels_last_result))
        dev = grad_output.device
        key = (grad_output.dtype, grad_output._shape, grad_output._stride, dev.type, dev.index, weight.dtype,
               weight._shape, weight._stride, weight.device is dev, args, _cudnn.allow_tf32)
        p = _input_grad_plans.get(key)
    except (AttributeError, TypeError, ValueError):  # not tensors or no shape (the checks say so), no marshal type
        key = p = None
    if p is None:
        p = _plan_input_grad(grad_output, weight, input_shape, stride, padding, dilation, groups, channels_last_result)
        if key is not None:
            _keep(_input_grad_plans, key, p)
    dx = TensorBase._empty(p.shape, p.dtype, p.dev)
    if p.out_strides is not None:
        dx._stride = p.out_strides
    if p.launch is not None:
        dyh = grad_output
        if p.dy_repack is not None:
            dyh = TensorBase._empty(grad_output._shape, p.dtype, p.dev)
            dyh._stride = p.dyh_strides
            p.dy_repack(dyh, grad_output)
        dxh = dx
        if p.restore is not None:
            dxh = TensorBase._empty(p.shape, p.dtype, p.dev)
            dxh._stride = p.work_strides
        p.launch.run(dyh, _pack(weight, "input_grad", groups) if p.pack else weight, dxh)
        if p.restore is not None:
            p.restore(dx, dxh)
    return dx


def conv2d_backward_weight(grad_output, input, weight_shape, stride=1, padding=0, dilation=1, groups=1) -> Tensor:
    """d(loss)/d(weight) of conv2d, given d(loss)/d(output); returns a tensor of ``weight_shape``.
    Planned once per call signature, as conv2d is (:class:`_GradPlan`)."""
    try:
        args = _dumps((tuple(weight_shape), stride, padding, dilation, groups))
        dev = grad_output.device
        key = (grad_output.dtype, grad_output._shape, grad_output._stride, dev.type, dev.index, input.dtype,
               input._shape, input._stride, input.device is dev, args, _cudnn.allow_tf32)
        p = _weight_grad_plans.get(key)
    except (AttributeError, TypeError, ValueError):
        key = p = None
    if p is None:
        p = _plan_weight_grad(grad_output, input, weight_shape, stride, padding, dilation, groups)
        if key is not None:
            _keep(_weight_grad_plans, key, p)
    dw = TensorBase._empty(p.shape, p.dtype, p.dev)  # contiguous: what an optimizer steps flat
    if p.launch is not None:
        xh, dyh = input, grad_output
        if p.x_repack is not None:
            xh = TensorBase._empty(input._shape, p.dtype, p.dev)
            xh._stride = p.xh_strides
            p.x_repack(xh, input)
        if p.dy_repack is not None:
            dyh = TensorBase._empty(grad_output._shape, p.dtype, p.dev)
            dyh._stride = p.dyh_strides
            p.dy_repack(dyh, grad_output)
        if p.ws_shape is None:
            p.launch.run(xh, dyh, dw)
        else:  # split over pixel chunks into a workspace, then summed in order
            ws = TensorBase._empty(p.ws_shape, p.ws_dtype, p.dev)
            p.launch.run(xh, dyh, ws)
            p.sum_launch.run(ws, dw)
    return dw


_input_grad_plans: dict = {}  # conv2d_backward_input's call signature -> _GradPlan
_weight_grad_plans: dict = {}  # conv2d_backward_weight's call signature -> _GradPlan


class _GradPlan:
    """What a conv2d backward entry's checks and layout decisions made of one call signature (as
    :class:`_Conv2dPlan` for conv2d). ``shape``, ``dtype``, ``dev``, ``out_strides``: the result
    (``out_strides`` None: contiguous). ``launch``: the kernel's ``triton_kernels/conv.py:
    LaunchPlan`` (None: an empty result, nothing to launch). ``dy_repack``/``dyh_strides`` and
    ``x_repack``/``xh_strides``: the gradient's and the input's NHWC repack (None: read as they
    are). grad-input: ``pack`` (the weight packed for its kernel), ``restore``/``work_strides``
    (an NHWC buffer copied into the result, as conv2d's). grad-weight: ``ws_shape``/``ws_dtype``
    (the split-K workspace, None without one) and ``sum_launch``, the LaunchPlan summing it into the
    result."""

    __slots__ = ("shape", "dtype", "dev", "out_strides", "launch", "dy_repack", "dyh_strides", "x_repack",
                 "xh_strides", "pack", "restore", "work_strides", "ws_shape", "ws_dtype", "sum_launch")

    def __init__(self, shape, dtype, dev):
        self.shape, self.dtype, self.dev = shape, dtype, dev
        self.out_strides = self.launch = self.dy_repack = self.dyh_strides = self.x_repack = self.xh_strides = None
        self.restore = self.work_strides = self.ws_shape = self.ws_dtype = self.sum_launch = None
        self.pack = False


def _plan_input_grad(grad_output, weight, input_shape, stride, padding, dilation, groups, channels_last_result):
    """Check a conv2d_backward_input call (its errors, before anything is allocated) and plan it."""
    op = "conv2d_backward_input"
    _check_tensor(grad_output, "grad_output", op)
    _check_tensor(weight, "weight", op)
    _check_dtypes(op, grad_output=grad_output, weight=weight)
    input_shape = _shape4(input_shape, "input_shape", op)
    stride, pad, dilation, (OH, OW) = conv_geometry(op, input_shape, weight.shape, stride, padding, dilation, groups)
    _check_grad_output(op, grad_output, (input_shape[0], weight.shape[0], OH, OW))
    if channels_last_result is None:  # a probe, as conv2d's: the layout decisions are made on it
        dx = _output(input_shape, grad_output, weight.dtype, weight.device)
    elif channels_last_result:
        dx = TensorBase._empty_channels_last(input_shape, weight.dtype, weight.device)
    else:
        dx = TensorBase._empty(input_shape, weight.dtype, weight.device)
    p = _GradPlan(Size(input_shape), weight.dtype, weight.device)
    p.out_strides = None if dx._stride == dx._contiguous_strides() else dx._stride
    OC, Cg = weight.shape[0], weight.shape[1]
    if dx.numel() == 0:
        return p
    if not _k.nhwc(Cg, OC // groups):  # few channels: the caller's layouts read in place
        p.launch = _k.LaunchPlan(_k.configure_input_grad((dx.shape, dx.stride()), (grad_output.shape,
                                                          grad_output.stride()), (weight.shape, weight.stride()),
                                                         weight.dtype, stride, pad, dilation, groups,
                                                         _cudnn.allow_tf32))
        return p
    dy_strides, dx_strides = grad_output._stride, dx._stride
    if not _is_nhwc(grad_output):
        p.dy_repack, p.dyh_strides = _repack_in(grad_output), channels_last_strides(grad_output.shape)
        dy_strides = p.dyh_strides
    if not _is_nhwc(dx):
        p.restore, p.work_strides = _repack_out(dx), channels_last_strides(dx.shape)
        dx_strides = p.work_strides
    p.pack = True  # (groups, KH, KW, Cg, OCg) contiguous: see _pack_input_grad
    packed = (groups, *weight.shape[2:], Cg, OC // groups)
    p.launch = _k.LaunchPlan(_k.configure_input_grad((dx.shape, dx_strides), (grad_output.shape, dy_strides),
                                                     (packed, contiguous_strides(packed)), weight.dtype, stride, pad,
                                                     dilation, groups, _cudnn.allow_tf32))
    return p


def _plan_weight_grad(grad_output, input, weight_shape, stride, padding, dilation, groups):
    """Check a conv2d_backward_weight call (its errors, before anything is allocated) and plan it."""
    op = "conv2d_backward_weight"
    _check_tensor(grad_output, "grad_output", op)
    _check_tensor(input, "input", op)
    _check_dtypes(op, grad_output=grad_output, input=input)
    weight_shape = _shape4(weight_shape, "weight_shape", op)
    if input.ndim != 4:
        raise RuntimeError(f"{op}(): input must be 4-D (N, C, H, W), got shape {list(input.shape)}")
    stride, pad, dilation, (OH, OW) = conv_geometry(op, input.shape, weight_shape, stride, padding, dilation, groups)
    _check_grad_output(op, grad_output, (input.shape[0], weight_shape[0], OH, OW))
    p = _GradPlan(Size(weight_shape), input.dtype, input.device)
    if 0 in weight_shape:
        return p
    x_strides, dy_strides = input._stride, grad_output._stride
    if _k.nhwc(weight_shape[1], weight_shape[0] // groups):  # both NHWC for the split-K kernel
        if not _is_nhwc(input):
            p.x_repack, p.xh_strides = _repack_in(input), channels_last_strides(input.shape)
            x_strides = p.xh_strides
        if not _is_nhwc(grad_output):
            p.dy_repack, p.dyh_strides = _repack_in(grad_output), channels_last_strides(grad_output.shape)
            dy_strides = p.dyh_strides
    ws_shape, first, second = _k.configure_weight_grad((p.shape, contiguous_strides(p.shape)),
                                                       (grad_output.shape, dy_strides), (input.shape, x_strides),
                                                       input.dtype, stride, pad, dilation, groups, _cudnn.allow_tf32)
    p.launch = _k.LaunchPlan(first)
    if ws_shape is not None:
        p.ws_shape, p.ws_dtype, p.sum_launch = ws_shape, float_compute(input.dtype), _k.LaunchPlan(second)
    return p


def conv_transpose_geometry(op: str, input_shape, weight_shape, stride, padding, output_padding, groups, dilation):
    """Check a conv_transpose2d's shapes and arguments (torch's rules and wording); return
    ``(stride, padding, dilation, output_shape, conv_hw)``. ``conv_hw`` is the (H, W) that conv2d
    gives from ``output_shape``: the input's own unless an output padding reaches a whole stride
    (allowed where it is below the dilation), when the input is read as if zero-padded to it."""
    if isinstance(groups, bool) or not isinstance(groups, numbers.Integral) or groups <= 0:
        raise RuntimeError(f"{op}(): non-positive groups is not supported, got groups={groups!r}")
    N, C, H, W = input_shape
    C_in, Cg_out, KH, KW = weight_shape
    if KH <= 0 or KW <= 0:
        raise RuntimeError(f"{op}(): kernel size should be greater than zero, but got kernel_height: {KH} "
                           f"kernel_width: {KW}")
    if C_in % groups:
        raise RuntimeError(f"{op}(): Given groups={groups}, expected weight to be divisible by {groups} at "
                           f"dimension 0, but got weight of size {list(weight_shape)} instead")
    if C != C_in:
        raise RuntimeError(f"{op}(): Given transposed=1, weight of size {list(weight_shape)}, expected input"
                           f"{list(input_shape)} to have {C_in} channels, but got {C} channels instead")
    stride = _pair(stride, "stride", op, 1)
    dilation = _pair(dilation, "dilation", op, 1)
    if isinstance(padding, str):
        raise RuntimeError(f"{op}(): padding must be an int or a pair of ints for a transposed convolution, "
                           f"got {padding!r}")
    pad = _pair(padding, "padding", op, 0)
    out_pad = _pair(output_padding, "output_padding", op, 0)
    if any(o >= s and o >= d for o, s, d in zip(out_pad, stride, dilation)):
        raise RuntimeError(f"{op}(): output padding must be smaller than either stride or dilation, but got "
                           f"output_padding_height: {out_pad[0]} output_padding_width: {out_pad[1]} stride_height: "
                           f"{stride[0]} stride_width: {stride[1]} dilation_height: {dilation[0]} dilation_width: "
                           f"{dilation[1]}")
    out_hw = tuple((n - 1) * s - 2 * p + d * (k - 1) + o + 1
                   for n, s, p, d, k, o in zip((H, W), stride, pad, dilation, (KH, KW), out_pad))
    if out_hw[0] <= 0 or out_hw[1] <= 0:
        raise RuntimeError(f"{op}(): Given input size per channel: ({H} x {W}). Calculated output size per channel: "
                           f"({out_hw[0]} x {out_hw[1]}). Output size is too small")
    conv_hw = tuple((o + 2 * p - d * (k - 1) - 1) // s + 1
                    for o, s, p, d, k in zip(out_hw, stride, pad, dilation, (KH, KW)))
    return stride, pad, dilation, (N, Cg_out * groups, *out_hw), conv_hw


def zero_extend(x, hw):
    """``x`` (N, C, H, W) as (N, C, *hw) with zeros below and to the right (hw >= (H, W))."""
    if tuple(x.shape[2:]) == tuple(hw):
        return x
    big = _copies.fill_(TensorBase._empty((*x.shape[:2], *hw), x.dtype, x.device), 0)
    _copies.copy_(big._view(x.shape, big.stride()), x)
    return big


def conv_transpose2d(input, weight, bias=None, stride=1, padding=0, output_padding=0, groups=1, dilation=1) -> Tensor:
    """torch.nn.functional.conv_transpose2d over NCHW (or unbatched CHW) input; weight
    (C_in, C_out / groups, kH, kW). conv2d's grad-input kernel with the input as its gradient."""
    op = "conv_transpose2d"
    x, unbatched = _operands(op, input, weight, bias, "(in_channels, out_channels / groups, kH, kW)")
    stride, pad, dilation, out_shape, conv_hw = conv_transpose_geometry(op, x.shape, weight.shape, stride, padding,
                                                                        output_padding, groups, dilation)
    if bias is not None and (bias.ndim != 1 or bias.shape[0] != out_shape[1]):
        raise RuntimeError(f"{op}(): bias must have shape [{out_shape[1]}] (out_channels), got {list(bias.shape)}")
    y = _output(out_shape, x, weight, x.dtype, x.device)
    _input_grad(y, zero_extend(x, conv_hw), weight, stride, pad, dilation, groups)
    if bias is not None:
        _ew.binary("add", y, bias._view((1, out_shape[1], 1, 1), (0, bias.stride(0), 0, 0)), out=y)
    return y.squeeze(0) if unbatched else y
