#!/usr/bin/env python3
"""The PyTorch side of benchmarks/cuda/train_step_cuda.cu: one training step (forward,
backward, Adam update) of the 784-512-512-10 ReLU MLP on the GPU, eager, f32.

A step is optimizer.zero_grad(set_to_none=True); F.cross_entropy(model(x), labels).backward();
optimizer.step(); torch.cuda.synchronize(). Prints lines the C++ driver parses:

    torch_version <v>
    torch_mlp_step_ms  <median milliseconds per step>

If torch cannot be imported or has no CUDA device it prints `torch_unavailable <reason>`
and exits 0. Alone: python3 benchmarks/cuda/train_step_cuda.py --batch 128 --reps 50
"""
import argparse
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
from bench_common import median_ms  # noqa: E402 - benchmarks/bench_common.py

try:
    import torch
    import torch.nn.functional as F
except Exception as error:  # noqa: BLE001 - reported to the caller
    print(f"torch_unavailable {error}")
    sys.exit(0)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--batch", type=int, default=128)
    parser.add_argument("--reps", type=int, default=50)
    parser.add_argument("--warmup", type=int, default=5)
    args = parser.parse_args()
    if not torch.cuda.is_available():
        print("torch_unavailable torch has no CUDA device")
        return 0
    device = torch.device("cuda")
    torch.manual_seed(0)
    nn = torch.nn
    model = nn.Sequential(nn.Linear(784, 512), nn.ReLU(), nn.Linear(512, 512), nn.ReLU(),
                          nn.Linear(512, 10)).to(device)
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-3)
    x = torch.rand(args.batch, 784, device=device)
    labels = torch.randint(0, 10, (args.batch,), device=device)

    def step():
        optimizer.zero_grad(set_to_none=True)
        F.cross_entropy(model(x), labels).backward()
        optimizer.step()
        torch.cuda.synchronize()

    step_ms = median_ms(step, args.warmup, args.reps)
    print(f"torch_version {torch.__version__}")
    print(f"torch_mlp_step_ms {step_ms:.4f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
