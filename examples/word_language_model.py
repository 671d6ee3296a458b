"""A word-level language model, written as a PyTorch script and run on tritensor with nothing
changed but its three imports (the lines marked ``# torch:``).

    python examples/word_language_model.py --data DIR           # DIR holds train.txt, valid.txt, test.txt
    python examples/word_language_model.py --data DIR --model Transformer --epochs 6
    python examples/word_language_model.py --demo               # writes a small corpus first

The idioms are the ones such scripts use: a ``Dictionary``/``Corpus`` that turns text into an
int64 tensor, ``batchify`` with ``narrow``/``view``/``t``/``contiguous``, truncated
backpropagation through time with the hidden state detached between chunks, an ``RNNModel``
built with ``getattr(nn, rnn_type)`` (LSTM, GRU, RNN_TANH, RNN_RELU; optionally tied weights) or
a ``TransformerModel`` with sinusoidal positions and a causal mask, ``NLLLoss`` of
``log_softmax``, ``clip_grad_norm_``, SGD written by hand (``p.data.add_(p.grad, alpha=-lr)``),
the learning rate cut when validation stalls, and the best model kept with ``save(state_dict)``.

``tests/test_word_language_model.py`` runs it on a small generated corpus for every model type
and checks that perplexity falls; the same file with ``import torch`` ... in place of the three
marked lines ran under torch 2.13 with the same flags (2026-11-25).
"""
import argparse
import math
import os
import random
import time

import tritensor as torch  # torch: import torch
import tritensor.nn as nn  # torch: import torch.nn as nn
import tritensor.nn.functional as F  # torch: import torch.nn.functional as F


class Dictionary:
    def __init__(self):
        self.word2idx = {}
        self.idx2word = []

    def add_word(self, word):
        if word not in self.word2idx:
            self.idx2word.append(word)
            self.word2idx[word] = len(self.idx2word) - 1
        return self.word2idx[word]

    def __len__(self):
        return len(self.idx2word)


class Corpus:
    def __init__(self, path):
        self.dictionary = Dictionary()
        self.train = self.tokenize(os.path.join(path, "train.txt"))
        self.valid = self.tokenize(os.path.join(path, "valid.txt"))
        self.test = self.tokenize(os.path.join(path, "test.txt"))

    def tokenize(self, path):
        """One int64 tensor of word ids, an <eos> after each line."""
        assert os.path.exists(path), path
        with open(path, encoding="utf8") as f:
            lines = [line.split() + ["<eos>"] for line in f]
        ids = [torch.tensor([self.dictionary.add_word(w) for w in words], dtype=torch.int64) for words in lines]
        return torch.cat(ids)


class RNNModel(nn.Module):
    """Embedding -> recurrent layers -> linear decoder, with dropout between them."""

    def __init__(self, rnn_type, ntoken, ninp, nhid, nlayers, dropout=0.5, tie_weights=False):
        super().__init__()
        self.ntoken = ntoken
        self.drop = nn.Dropout(dropout)
        self.encoder = nn.Embedding(ntoken, ninp)
        if rnn_type in ("LSTM", "GRU"):
            self.rnn = getattr(nn, rnn_type)(ninp, nhid, nlayers, dropout=dropout)
        else:
            nonlinearity = {"RNN_TANH": "tanh", "RNN_RELU": "relu"}[rnn_type]
            self.rnn = nn.RNN(ninp, nhid, nlayers, nonlinearity=nonlinearity, dropout=dropout)
        self.decoder = nn.Linear(nhid, ntoken)
        if tie_weights:
            if nhid != ninp:
                raise ValueError("When using the tied flag, nhid must be equal to emsize")
            self.decoder.weight = self.encoder.weight
        self.rnn_type, self.nhid, self.nlayers = rnn_type, nhid, nlayers
        initrange = 0.1
        nn.init.uniform_(self.encoder.weight, -initrange, initrange)
        nn.init.zeros_(self.decoder.bias)
        nn.init.uniform_(self.decoder.weight, -initrange, initrange)

    def forward(self, input, hidden):
        emb = self.drop(self.encoder(input))
        output, hidden = self.rnn(emb, hidden)
        output = self.drop(output)
        decoded = self.decoder(output).view(-1, self.ntoken)
        return F.log_softmax(decoded, dim=1), hidden

    def init_hidden(self, bsz):
        weight = next(self.parameters())
        if self.rnn_type == "LSTM":
            return (weight.new_zeros(self.nlayers, bsz, self.nhid), weight.new_zeros(self.nlayers, bsz, self.nhid))
        return weight.new_zeros(self.nlayers, bsz, self.nhid)


class PositionalEncoding(nn.Module):
    """Sinusoidal positions added to (seq, batch, d_model) inputs."""

    def __init__(self, d_model, dropout=0.1, max_len=5000):
        super().__init__()
        self.dropout = nn.Dropout(p=dropout)
        pe = torch.zeros(max_len, d_model)
        position = torch.arange(0, max_len, dtype=torch.float).unsqueeze(1)
        div_term = torch.exp(torch.arange(0, d_model, 2).float() * (-math.log(10000.0) / d_model))
        pe[:, 0::2] = torch.sin(position * div_term)
        pe[:, 1::2] = torch.cos(position * div_term)
        self.register_buffer("pe", pe.unsqueeze(0).transpose(0, 1))

    def forward(self, x):
        return self.dropout(x + self.pe[: x.size(0), :])


class TransformerModel(nn.Module):
    """Embedding * sqrt(d) + positions -> causal TransformerEncoder -> linear decoder."""

    def __init__(self, ntoken, ninp, nhead, nhid, nlayers, dropout=0.5):
        super().__init__()
        self.model_type = "Transformer"
        self.src_mask = None
        self.pos_encoder = PositionalEncoding(ninp, dropout)
        self.transformer_encoder = nn.TransformerEncoder(nn.TransformerEncoderLayer(ninp, nhead, nhid, dropout),
                                                         nlayers)
        self.encoder = nn.Embedding(ntoken, ninp)
        self.ninp = ninp
        self.decoder = nn.Linear(ninp, ntoken)
        initrange = 0.1
        nn.init.uniform_(self.encoder.weight, -initrange, initrange)
        nn.init.zeros_(self.decoder.bias)
        nn.init.uniform_(self.decoder.weight, -initrange, initrange)

    def forward(self, src, has_mask=True):
        if has_mask:
            if self.src_mask is None or self.src_mask.size(0) != len(src):
                self.src_mask = nn.Transformer.generate_square_subsequent_mask(len(src)).to(src.device)
        else:
            self.src_mask = None
        src = self.pos_encoder(self.encoder(src) * math.sqrt(self.ninp))
        output = self.decoder(self.transformer_encoder(src, self.src_mask))
        return F.log_softmax(output, dim=-1)


def batchify(data, bsz, device):
    """(tokens,) -> (tokens // bsz, bsz): each column an independent stretch of the text."""
    nbatch = data.size(0) // bsz
    data = data.narrow(0, 0, nbatch * bsz)
    return data.view(bsz, -1).t().contiguous().to(device)


def repackage_hidden(h):
    """Detach the hidden state from the graph of the previous chunk."""
    if isinstance(h, torch.Tensor):
        return h.detach()
    return tuple(repackage_hidden(v) for v in h)


def get_batch(source, i, bptt):
    seq_len = min(bptt, len(source) - 1 - i)
    data = source[i: i + seq_len]
    target = source[i + 1: i + 1 + seq_len].view(-1)
    return data, target


def parse_args(argv=None):
    p = argparse.ArgumentParser(description="word-level language model (RNN/LSTM/GRU/Transformer)")
    p.add_argument("--data", type=str, default="./data/wikitext-2", help="location of the data corpus")
    p.add_argument("--demo", action="store_true", help="write a small generated corpus into --data first")
    p.add_argument("--model", type=str, default="LSTM", help="RNN_TANH, RNN_RELU, LSTM, GRU, Transformer")
    p.add_argument("--emsize", type=int, default=200, help="size of word embeddings")
    p.add_argument("--nhid", type=int, default=200, help="number of hidden units per layer")
    p.add_argument("--nlayers", type=int, default=2, help="number of layers")
    p.add_argument("--lr", type=float, default=20, help="initial learning rate")
    p.add_argument("--clip", type=float, default=0.25, help="gradient clipping")
    p.add_argument("--epochs", type=int, default=40, help="upper epoch limit")
    p.add_argument("--batch_size", type=int, default=20, metavar="N", help="batch size")
    p.add_argument("--bptt", type=int, default=35, help="sequence length")
    p.add_argument("--dropout", type=float, default=0.2, help="dropout applied to layers (0 = no dropout)")
    p.add_argument("--tied", action="store_true", help="tie the word embedding and softmax weights")
    p.add_argument("--seed", type=int, default=1111, help="random seed")
    p.add_argument("--cuda", action="store_true", help="use CUDA")
    p.add_argument("--log-interval", type=int, default=200, metavar="N", help="report interval")
    p.add_argument("--save", type=str, default="model.pt", help="path to save the final model")
    p.add_argument("--nhead", type=int, default=2, help="the number of heads of the Transformer's attention")
    return p.parse_args(argv)


def write_demo_corpus(path, seed=0, lines=(400, 60, 60)):
    """A small corpus with structure a model can learn: sentences from a tiny grammar, ``lines``
    of them in train.txt, valid.txt and test.txt."""
    rng = random.Random(seed)
    subjects, verbs, objects = ["the cat", "a dog", "the bird", "my friend"], ["sees", "likes", "finds"], \
        ["the ball", "a tree", "the house", "some food"]
    os.makedirs(path, exist_ok=True)
    for name, n in zip(("train.txt", "valid.txt", "test.txt"), lines):
        with open(os.path.join(path, name), "w", encoding="utf8") as f:
            for _ in range(n):
                f.write(f"{rng.choice(subjects)} {rng.choice(verbs)} {rng.choice(objects)} .\n")


def main(argv=None):
    args = parse_args(argv)
    if args.demo:
        write_demo_corpus(args.data, args.seed)
    torch.manual_seed(args.seed)
    if torch.cuda.is_available() and not args.cuda:
        print("WARNING: You have a CUDA device, so you should probably run with --cuda")
    device = torch.device("cuda" if args.cuda else "cpu")

    corpus = Corpus(args.data)
    eval_batch_size = 10
    train_data = batchify(corpus.train, args.batch_size, device)
    val_data = batchify(corpus.valid, eval_batch_size, device)
    test_data = batchify(corpus.test, eval_batch_size, device)

    ntokens = len(corpus.dictionary)
    if args.model == "Transformer":
        model = TransformerModel(ntokens, args.emsize, args.nhead, args.nhid, args.nlayers, args.dropout).to(device)
    else:
        model = RNNModel(args.model, ntokens, args.emsize, args.nhid, args.nlayers, args.dropout,
                         args.tied).to(device)
    criterion = nn.NLLLoss()

    def evaluate(data_source):
        model.eval()
        total_loss = 0.0
        if args.model != "Transformer":
            hidden = model.init_hidden(eval_batch_size)
        with torch.no_grad():
            for i in range(0, data_source.size(0) - 1, args.bptt):
                data, targets = get_batch(data_source, i, args.bptt)
                if args.model == "Transformer":
                    output = model(data).view(-1, ntokens)
                else:
                    output, hidden = model(data, hidden)
                    hidden = repackage_hidden(hidden)
                total_loss += len(data) * criterion(output, targets).item()
        return total_loss / (len(data_source) - 1)

    def train(epoch, lr):
        model.train()
        total_loss = 0.0
        start_time = time.time()
        if args.model != "Transformer":
            hidden = model.init_hidden(args.batch_size)
        for batch, i in enumerate(range(0, train_data.size(0) - 1, args.bptt)):
            data, targets = get_batch(train_data, i, args.bptt)
            model.zero_grad()
            if args.model == "Transformer":
                output = model(data).view(-1, ntokens)
            else:
                hidden = repackage_hidden(hidden)
                output, hidden = model(data, hidden)
            loss = criterion(output, targets)
            loss.backward()
            torch.nn.utils.clip_grad_norm_(model.parameters(), args.clip)
            for p in model.parameters():
                p.data.add_(p.grad, alpha=-lr)
            total_loss += loss.item()
            if batch % args.log_interval == 0 and batch > 0:
                cur_loss = total_loss / args.log_interval
                elapsed = time.time() - start_time
                print(f"| epoch {epoch:3d} | {batch:5d}/{len(train_data) // args.bptt:5d} batches | lr {lr:02.2f} | "
                      f"ms/batch {elapsed * 1000 / args.log_interval:5.2f} | loss {cur_loss:5.2f} | "
                      f"ppl {math.exp(cur_loss):8.2f}")
                total_loss = 0.0
                start_time = time.time()

    lr = args.lr
    best_val_loss = None
    history = []
    for epoch in range(1, args.epochs + 1):
        epoch_start_time = time.time()
        train(epoch, lr)
        val_loss = evaluate(val_data)
        history.append(val_loss)
        print("-" * 89)
        print(f"| end of epoch {epoch:3d} | time: {time.time() - epoch_start_time:5.2f}s | valid loss {val_loss:5.2f} | "
              f"valid ppl {math.exp(val_loss):8.2f}")
        print("-" * 89)
        if best_val_loss is None or val_loss < best_val_loss:
            with open(args.save, "wb") as f:
                torch.save(model.state_dict(), f)
            best_val_loss = val_loss
        else:
            lr /= 4.0  # no improvement on the validation set: anneal

    with open(args.save, "rb") as f:
        model.load_state_dict(torch.load(f))
        if args.model in ("RNN_TANH", "RNN_RELU", "LSTM", "GRU"):
            model.rnn.flatten_parameters()
    test_loss = evaluate(test_data)
    print("=" * 89)
    print(f"| End of training | test loss {test_loss:5.2f} | test ppl {math.exp(test_loss):8.2f}")
    print("=" * 89)
    return history, test_loss, ntokens


if __name__ == "__main__":
    main()
