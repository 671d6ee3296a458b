"""A real PyTorch training script on tritensor: ``examples/word_language_model.py`` is written
against torch's API (Dictionary/Corpus, batchify, truncated BPTT with detached hidden states,
RNN/LSTM/GRU built with ``getattr(nn, rnn_type)``, a causal Transformer, NLLLoss of log_softmax,
clip_grad_norm_, SGD by hand with ``p.data.add_(p.grad, alpha=-lr)``, lr annealing, the best
model saved and reloaded as a state_dict) and differs from a torch script only in its three
imports. Each model type learns a small generated corpus: validation perplexity falls well below
the vocabulary's size (a model that learnt nothing sits near it).
"""
import ast
import importlib.util
import math
import pathlib

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[1]
SCRIPT = ROOT / "examples" / "word_language_model.py"


def _load():
    spec = importlib.util.spec_from_file_location("word_language_model", SCRIPT)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def test_only_the_imports_differ_from_a_torch_script():
    source = SCRIPT.read_text()
    docstring = ast.get_docstring(ast.parse(source), clean=False)
    code = source.replace(docstring, "", 1)
    mentions = [line for line in code.splitlines() if "tritensor" in line]
    assert mentions == ["import tritensor as torch  # torch: import torch",
                        "import tritensor.nn as nn  # torch: import torch.nn as nn",
                        "import tritensor.nn.functional as F  # torch: import torch.nn.functional as F"]


def _run(tmp_path, model, epochs=2, bptt=10, extra=()):
    mod = _load()
    data = tmp_path / "data"
    mod.write_demo_corpus(str(data), seed=0, lines=(120, 30, 30))
    args = ["--data", str(data), "--model", model, "--emsize", "16", "--nhid", "16", "--nlayers", "1",
            "--epochs", str(epochs), "--batch_size", "4", "--bptt", str(bptt), "--lr", "5", "--dropout", "0.1",
            "--save", str(tmp_path / "model.pt"), "--log-interval", "10", *extra]
    history, test_loss, ntokens = mod.main(args)
    return history, test_loss, ntokens


def _learnt(history, test_loss, ntokens):
    assert all(math.isfinite(v) for v in history) and math.isfinite(test_loss)
    # uniform guessing has perplexity ntokens (16 words + <eos>); the grammar's true entropy is far lower
    assert math.exp(history[-1]) < ntokens / 3, (history, ntokens)
    assert math.exp(test_loss) < ntokens / 3


def test_transformer_learns(tmp_path):
    # longer chunks, fewer steps: a step's cost in CPU mode is its launches, not its length
    _learnt(*_run(tmp_path, "Transformer", bptt=35, extra=("--nhead", "2")))


def test_lstm_learns_and_the_best_state_reloads(tmp_path):
    # one layer with dropout: torch's warning that dropout only acts between layers, then training
    with pytest.warns(UserWarning, match="non-zero dropout expects num_layers greater than 1"):
        history, test_loss, ntokens = _run(tmp_path, "LSTM")
    _learnt(history, test_loss, ntokens)
    assert (tmp_path / "model.pt").stat().st_size > 0


@pytest.mark.slow
@pytest.mark.filterwarnings("ignore:dropout option adds dropout")
@pytest.mark.parametrize("model", ["GRU", "RNN_TANH", "RNN_RELU"])
def test_other_recurrent_models_learn(tmp_path, model):
    _learnt(*_run(tmp_path, model))


@pytest.mark.slow
@pytest.mark.filterwarnings("ignore:dropout option adds dropout")
def test_tied_weights(tmp_path):
    _learnt(*_run(tmp_path, "LSTM", extra=("--tied",)))
