"""tritensor.inference_mode: no_grad plus inference tensors, as torch.inference_mode."""
from __future__ import annotations

import threading

import pytest

import tritensor as tt


def test_context_manager_and_inference_tensors():
    w = tt.ones(3, requires_grad=True)
    with tt.inference_mode():
        assert not tt.is_grad_enabled() and tt.is_inference_mode_enabled()
        y = w * 2
        assert y.is_inference() and not y.requires_grad and y.grad_fn is None
        y.requires_grad_()  # allowed inside the mode, as torch
        y.requires_grad_(False)
    assert tt.is_grad_enabled() and not tt.is_inference_mode_enabled()
    assert not w.is_inference() and not tt.ones(1).is_inference()
    with pytest.raises(RuntimeError, match="Setting requires_grad=True on inference tensor outside InferenceMode"):
        y.requires_grad_()
    with pytest.raises(RuntimeError, match="Inference tensors cannot be saved for backward"):
        (w * y).sum()  # mul saves its inputs for backward
    z = y.clone()  # the documented way out: a clone made outside is a normal tensor
    assert not z.is_inference()
    (w * z).sum().backward()
    assert w.grad.tolist() == [2.0, 2.0, 2.0]


def test_decorator_forms_nesting_and_threads():
    @tt.inference_mode
    def bare():
        return tt.ones(1).is_inference(), tt.is_grad_enabled()

    @tt.inference_mode()
    def called():
        return tt.ones(1).is_inference()

    @tt.inference_mode(False)
    def off():
        return tt.ones(1).is_inference(), tt.is_grad_enabled()

    assert bare() == (True, False) and called() is True and off() == (False, True)
    with tt.inference_mode():
        with tt.inference_mode(False):
            assert not tt.ones(1).is_inference() and not tt.is_grad_enabled()
        assert tt.ones(1).is_inference()
        seen = []
        th = threading.Thread(target=lambda: seen.append(tt.ones(1).is_inference()))
        th.start()
        th.join()
        assert seen == [False]  # thread-local, as grad mode
    with pytest.raises(TypeError, match="argument 'mode' must be bool"):
        tt.inference_mode(1)
