#!/usr/bin/env python3
"""The PyTorch side of benchmarks/cuda/train_step_cuda.cu: one training step (forward,
backward, Adam update) of the 784-512-512-10 ReLU MLP on the GPU, eager, f32.

A step is optimizer.zero_grad(set_to_none=True); F.cross_entropy(model(x), labels).backward();
optimizer.step(); torch.cuda.synchronize(). Prints lines the C++ driver parses:

    torch_version <v>
    torch_mlp_step_ms  <median milliseconds per step>
    torch_compile_mlp_step_ms  <the same step through torch.compile>   (with --compile)

With --compile the same step runs a second time with the loss (forward and backward) and
the optimizer's step each through torch.compile (default mode, Inductor's Triton kernels);
compilation happens in the warm-up steps and is not timed. If it fails, the line
`torch_compile_unavailable <reason>` replaces the timing.

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
    parser.add_argument("--compile", action="store_true", help="also time the step through torch.compile")
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
    print(f"torch_mlp_step_ms {step_ms:.4f}", flush=True)
    if args.compile:
        try:
            compiled_loss = torch.compile(lambda: F.cross_entropy(model(x), labels))
            compiled_update = torch.compile(optimizer.step)

            def compiled_step():
                optimizer.zero_grad(set_to_none=True)
                compiled_loss().backward()
                compiled_update()
                torch.cuda.synchronize()

            compiled_ms = median_ms(compiled_step, max(args.warmup, 3), args.reps)
            print(f"torch_compile_mlp_step_ms {compiled_ms:.4f}")
        except Exception as error:  # noqa: BLE001 - reported to the caller
            print(f"torch_compile_unavailable {type(error).__name__}: {str(error).splitlines()[0][:200]}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
