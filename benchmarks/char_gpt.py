#!/usr/bin/env python3
"""The PyTorch side of benchmarks/char_gpt.cpp: training steps of the same character GPT
(luminal's nn::GPT: token + learned position embeddings, pre-norm blocks of causal
multi-head attention and a GELU(tanh) MLP, final LayerNorm, linear head), eager, f32, on
the CPU or (--device cuda, for benchmarks/cuda/char_gpt_cuda) the GPU.

A step is zero_grad(set_to_none=True); cross_entropy(model(tokens), targets).backward();
clip_grad_norm_(1.0); AdamW.step(); loss.item(), which waits for the GPU. Prints lines the C++ driver parses:

    torch_version <v>
    torch_threads <n>
    torch_step_ms      <median milliseconds per step>
    torch_tokens_per_s <batch * context / median step seconds>

--model lstm times benchmarks/char_lstm.cpp's step instead: Embedding(256, 64) ->
torch.nn.LSTM(64, 128, num_layers=2, batch_first=True) -> Linear(128, 256) (the model of
examples/char_lstm), the same step and printed lines.

--autocast bf16 runs the forward and the loss under torch.autocast(device, torch.bfloat16),
PyTorch's mixed precision (f32 parameters, matmuls in bf16), as luminal's autocast<bf16>.

If torch cannot be imported, or has no CUDA device when asked for one, it prints
`torch_unavailable <reason>` and exits 0.
Alone: python3 benchmarks/char_gpt.py --layers 4 --width 256 --heads 4 --context 128 --batch 8
       python3 benchmarks/char_gpt.py --model lstm --context 64 --batch 32
"""
import argparse
import math
import os
import sys

from bench_common import median_ms

try:
    import torch
    import torch.nn.functional as F
    from torch import nn
except Exception as error:  # noqa: BLE001 - reported to the caller
    print(f"torch_unavailable {error}")
    sys.exit(0)

# The LSTM twin of examples/char_lstm, as its own comparison script defines it.
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "examples"))
from char_lstm_torch import CharLSTM  # noqa: E402


class Attention(nn.Module):
    def __init__(self, width, heads):
        super().__init__()
        self.heads = heads
        self.q = nn.Linear(width, width)
        self.k = nn.Linear(width, width)
        self.v = nn.Linear(width, width)
        self.proj = nn.Linear(width, width)

    def forward(self, x):
        b, t, d = x.shape
        q, k, v = (z(x).view(b, t, self.heads, d // self.heads).transpose(1, 2) for z in (self.q, self.k, self.v))
        scores = (q @ k.transpose(-2, -1)) / math.sqrt(d // self.heads)
        mask = torch.ones(t, t, dtype=torch.bool, device=x.device).tril()
        scores = scores.masked_fill(~mask, -1e30)
        y = torch.softmax(scores, dim=-1) @ v
        return self.proj(y.transpose(1, 2).reshape(b, t, d))


class Block(nn.Module):
    def __init__(self, width, heads):
        super().__init__()
        self.ln1 = nn.LayerNorm(width)
        self.attn = Attention(width, heads)
        self.ln2 = nn.LayerNorm(width)
        self.mlp = nn.Sequential(nn.Linear(width, 4 * width), nn.GELU(approximate="tanh"), nn.Linear(4 * width, width))

    def forward(self, x):
        x = x + self.attn(self.ln1(x))
        return x + self.mlp(self.ln2(x))


class GPT(nn.Module):
    def __init__(self, vocab, width, heads, layers, max_context):
        super().__init__()
        self.wte = nn.Embedding(vocab, width)
        self.wpe = nn.Embedding(max_context, width)
        self.h = nn.ModuleList(Block(width, heads) for _ in range(layers))
        self.ln_f = nn.LayerNorm(width)
        self.lm_head = nn.Linear(width, vocab)

    def forward(self, tokens):
        x = self.wte(tokens) + self.wpe(torch.arange(tokens.shape[1], device=tokens.device))
        for block in self.h:
            x = block(x)
        return self.lm_head(self.ln_f(x))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--model", default="gpt", choices=["gpt", "lstm"])
    parser.add_argument("--layers", type=int, default=4)
    parser.add_argument("--width", type=int, default=256)
    parser.add_argument("--heads", type=int, default=4)
    parser.add_argument("--context", type=int, default=128)
    parser.add_argument("--batch", type=int, default=8)
    parser.add_argument("--vocab", type=int, default=256)
    parser.add_argument("--max-context", type=int, default=256)
    parser.add_argument("--reps", type=int, default=10)
    parser.add_argument("--warmup", type=int, default=2)
    parser.add_argument("--threads", type=int, default=0)
    parser.add_argument("--device", default="cpu", help="cpu or cuda")
    parser.add_argument("--autocast", default="none", choices=["none", "bf16"])
    args = parser.parse_args()
    if args.device.startswith("cuda") and not torch.cuda.is_available():
        print(f"torch_unavailable torch {torch.__version__} has no CUDA device")
        return 0
    if args.threads > 0:
        torch.set_num_threads(args.threads)
    torch.manual_seed(0)
    if args.model == "lstm":
        model = CharLSTM(args.vocab).to(args.device)
    else:
        model = GPT(args.vocab, args.width, args.heads, args.layers, args.max_context).to(args.device)
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3)
    tokens = torch.randint(0, args.vocab, (args.batch, args.context), device=args.device)
    targets = torch.randint(0, args.vocab, (args.batch, args.context), device=args.device)

    def step():
        optimizer.zero_grad(set_to_none=True)
        with torch.autocast(args.device.split(":")[0], dtype=torch.bfloat16, enabled=args.autocast == "bf16"):
            loss = F.cross_entropy(model(tokens).reshape(-1, args.vocab), targets.reshape(-1))
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        optimizer.step()
        return loss.item()

    median = median_ms(step, args.warmup, args.reps) / 1e3  # seconds
    print(f"torch_version {torch.__version__}")
    print(f"torch_threads {torch.get_num_threads()}")
    print(f"torch_step_ms {median * 1e3:.3f}")
    print(f"torch_tokens_per_s {args.batch * args.context / median:.1f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
