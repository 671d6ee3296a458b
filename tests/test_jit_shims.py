"""tt.jit (answers as torch outside TorchScript), tt._assert and autograd.profiler.record_function."""
import pytest

import tritensor as tt
from tritensor import jit
from tritensor.autograd.profiler import record_function


class Block(tt.nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = tt.nn.Linear(2, 2)

    @jit.ignore
    def helper(self, x):
        return x * 2

    @jit.ignore(drop=True)
    def dropped(self, x):
        return x + 1

    @jit.unused
    def unused_path(self, x):
        return x - 1

    @jit.export
    def exported(self, x):
        return x

    def forward(self, x):
        if not jit.is_scripting() and not jit.is_tracing():
            x = self.helper(x)
        return self.lin(self.unused_path(self.dropped(self.exported(x))))


def test_model_code_guarded_by_jit_runs_eagerly():
    m = Block()
    x = tt.ones(3, 2)
    assert jit.is_scripting() is False and jit.is_tracing() is False
    assert tt.equal(m.helper(x), x * 2) and tt.equal(m.dropped(x), x + 1) and tt.equal(m.unused_path(x), x - 1)
    out = m(x)
    ref = m.lin(x * 2)
    assert tt.equal(out, ref)
    assert jit.annotate(int, 3) == 3
    y: jit.Final[int] = 1
    assert y == 1


def test_script_and_trace_say_torchscript_is_not_provided():
    with pytest.raises(NotImplementedError, match="tritensor.jit.script: TorchScript is not provided"):
        jit.script(Block())
    with pytest.raises(NotImplementedError, match="tritensor.jit.trace: TorchScript is not provided"):
        jit.trace(Block(), tt.ones(1, 2))


def test_assert():
    tt._assert(True, "fine")
    with pytest.raises(AssertionError, match="^boom$"):
        tt._assert(False, "boom")
    with pytest.raises(AssertionError, match="shape"):
        tt._assert(tt.tensor(False), "shape")


def test_record_function_is_a_no_op_marker():
    x = tt.tensor([1.0, 2.0], requires_grad=True)
    with record_function("forward") as r:
        y = (x * 3).sum()
    assert r.name == "forward"
    y.backward()
    assert x.grad.cpu().tolist() == [3.0, 3.0]

    @record_function("step")
    def step(a):
        return a + 1

    assert step(2) == 3 and step.__name__ == "step"
    with pytest.raises(TypeError, match="argument 'name' must be str"):
        record_function(3)


def test_torch_profiler_path_is_the_same_marker():
    assert tt.profiler.record_function is record_function
    with tt.profiler.record_function("region"):
        pass
