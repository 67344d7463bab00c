#!/usr/bin/python3
"""The PyTorch twin of examples/char_lstm: the same character LSTM (Embedding(256, 64) ->
LSTM(64, 128, num_layers=2, batch_first=True) -> Linear(128, 256)) under the same names.

    examples/char_lstm_torch.py init torch_start.safetensors
        writes a freshly torch-initialized model; `char_lstm --init torch_start.safetensors`
        trains it in luminal.

    examples/char_lstm_torch.py compare --trainer build/examples/char_lstm
        trains the same torch-initialized model in luminal (the trainer, from a copy of the
        initial weights) and in PyTorch, on the same windows of the same corpus (drawn from
        std::mt19937_64 as the trainer's draw_below() does, rebuilt here), with the same
        cosine-decayed AdamW and global-norm clipping, prints both losses of each of the
        first --steps steps and their largest relative difference, fails above --tolerance,
        and then times PyTorch's training step on the same shapes.

Needs torch and numpy; safetensors are read and written by tests/fixtures/safetensors_interop.py.
"""
import argparse
import math
import os
import subprocess
import sys
import tempfile
import time

import numpy as np
import torch
from torch import nn

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests", "fixtures"))
import safetensors_interop  # noqa: E402
from mt19937_64 import MT19937_64  # noqa: E402  (beside this script)

CORPUS = "/usr/share/games/fortunes"


class CharLSTM(nn.Module):
    def __init__(self, vocab=256, embed=64, hidden=128, layers=2):
        super().__init__()
        self.embed = nn.Embedding(vocab, embed)
        self.lstm = nn.LSTM(embed, hidden, num_layers=layers, batch_first=True)
        self.head = nn.Linear(hidden, vocab)

    def forward(self, tokens):
        return self.head(self.lstm(self.embed(tokens))[0])


def read_corpus(where):
    """examples/text_corpus.hpp's read_corpus: a file, or a directory's files, sorted, without *.dat."""
    if os.path.isdir(where):
        names = sorted(n for n in os.listdir(where) if not n.endswith(".dat"))
        paths = [os.path.join(where, n) for n in names]
        paths = [p for p in paths if os.path.isfile(p) and not os.path.islink(p)]
    else:
        paths = [where]
    return b"".join(open(p, "rb").read() for p in paths)


def draw_below(rng, n):
    """char_lstm's draw_below: unbiased, the first 2^64 mod n values rejected."""
    threshold = ((1 << 64) - n) % n
    while True:
        r = rng()
        if r >= threshold:
            return r % n


def windows(text, batch, context, rng):
    """char_lstm's sample_windows: tokens and next-byte targets [batch, context]."""
    starts = [draw_below(rng, len(text) - context) for _ in range(batch)]
    data = np.frombuffer(text, dtype=np.uint8)
    tokens = np.stack([data[s : s + context] for s in starts]).astype(np.int64)
    targets = np.stack([data[s + 1 : s + context + 1] for s in starts]).astype(np.int64)
    return torch.from_numpy(tokens), torch.from_numpy(targets)


def train_step(model, optimizer, tokens, targets):
    optimizer.zero_grad(set_to_none=True)
    logits = model(tokens)
    loss = nn.functional.cross_entropy(logits.reshape(-1, logits.shape[-1]), targets.reshape(-1))
    loss.backward()
    torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
    optimizer.step()
    return loss.item()


def state_tensors(model):
    return {k: v.detach().contiguous() for k, v in model.state_dict().items()}


def init(args):
    torch.manual_seed(args.seed)
    safetensors_interop.write(args.output, state_tensors(CharLSTM()), {"written_by": f"torch {torch.__version__}"})
    print(f"wrote {args.output}")


def compare(args):
    torch.manual_seed(args.seed)
    model = CharLSTM()
    with tempfile.TemporaryDirectory() as work:
        start = os.path.join(work, "start.safetensors")
        safetensors_interop.write(start, state_tensors(model), {})
        command = [args.trainer, "--init", start, "--steps", str(args.total_steps), "--stop-after", str(args.steps),
                   "--print-losses", str(args.steps),
                   "--batch", str(args.batch), "--context", str(args.context), "--lr", str(args.lr),
                   "--weight-decay", str(args.weight_decay), "--seed", str(args.seed), "--corpus", args.corpus,
                   "--eval-every", str(args.steps), "--sample", "0"]
        print("$ " + " ".join(command), flush=True)
        run = subprocess.run(command, capture_output=True, text=True)
        if run.returncode != 0:
            sys.exit(f"the trainer failed ({run.returncode}):\n{run.stdout}\n{run.stderr}")
    ours = [float(line.split()[3]) for line in run.stdout.splitlines() if line.startswith("step ") and " loss " in line]
    if len(ours) < args.steps:
        sys.exit(f"the trainer printed {len(ours)} losses, not {args.steps}:\n{run.stdout}")

    text = read_corpus(args.corpus)
    train_text = text[: len(text) // 10 * 9]
    optimizer = torch.optim.AdamW(model.parameters(), lr=args.lr, weight_decay=float(np.float32(args.weight_decay)))
    rng = MT19937_64(args.seed)
    worst = 0.0
    print(" step   luminal loss   torch loss     relative difference")
    for t in range(args.steps):
        lr = float(np.float32(args.lr)) * (0.1 + 0.45 * (1 + math.cos(math.pi * t / args.total_steps)))
        for group in optimizer.param_groups:  # the trainer's rate, rounded to float as it is
            group["lr"] = float(np.float32(lr))
        tokens, targets = windows(train_text, args.batch, args.context, rng)
        theirs = train_step(model, optimizer, tokens, targets)
        difference = abs(ours[t] - theirs) / abs(theirs)
        worst = max(worst, difference)
        print(f"{t + 1:5d}   {ours[t]:.7f}      {theirs:.7f}      {difference:.2e}")
    print(f"largest relative difference over {args.steps} steps: {worst:.2e} (tolerance {args.tolerance:g})")

    if args.time_steps == 0:
        return check(worst, args.tolerance)
    for _ in range(3):  # warm-up
        train_step(model, optimizer, tokens, targets)
    begin = time.perf_counter()
    for _ in range(args.time_steps):
        train_step(model, optimizer, tokens, targets)
    elapsed = time.perf_counter() - begin
    print(f"torch {torch.__version__} ({torch.get_num_threads()} threads): "
          f"{1e3 * elapsed / args.time_steps:.1f} ms/step at batch {args.batch}, context {args.context}")
    check(worst, args.tolerance)


def check(worst, tolerance):
    if worst > tolerance:
        sys.exit(f"the losses differ by more than {tolerance:g}")


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    commands = parser.add_subparsers(dest="command", required=True)
    p = commands.add_parser("init")
    p.add_argument("output")
    p.add_argument("--seed", type=int, default=1)
    p.set_defaults(run=init)
    p = commands.add_parser("compare")
    p.add_argument("--trainer", default="build/examples/char_lstm")
    p.add_argument("--corpus", default=CORPUS)
    p.add_argument("--steps", type=int, default=20, help="losses compared")
    p.add_argument("--total-steps", type=int, default=2000, help="the run the learning-rate schedule spans")
    p.add_argument("--batch", type=int, default=32)
    p.add_argument("--context", type=int, default=64)
    p.add_argument("--lr", type=float, default=4e-3)
    p.add_argument("--weight-decay", type=float, default=0.01)
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--tolerance", type=float, default=1e-4)
    p.add_argument("--time-steps", type=int, default=20, help="PyTorch steps timed afterwards (0: none)")
    p.set_defaults(run=compare)
    args = parser.parse_args()
    if args.command == "compare" and args.steps > args.total_steps:
        parser.error("--steps must not exceed --total-steps")
    args.run(args)


if __name__ == "__main__":
    main()
