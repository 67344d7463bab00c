#!/usr/bin/env python3
"""The PyTorch side of benchmarks/train_step.cpp: one full training step (forward,
backward, Adam update) of the same models, eager, f32, CPU.

    mlp: 784-512-512-10, ReLU
    cnn: Conv2d(1, 32, 3, 1, 1) ReLU MaxPool2d(2) Conv2d(32, 64, 3, 1, 1) ReLU MaxPool2d(2)
         Flatten Linear(3136, 128) ReLU Linear(128, 10), on [B, 784] viewed as [B, 1, 28, 28]
    resnet: class ResNet of examples/fashion_mnist_torch.py (imported from there: the twin
         of examples/fashion_models.hpp's), in training mode (BatchNorm on the batch's
         statistics, its running statistics updated by every step); `--model both` is mlp
         and cnn

A step is optimizer.zero_grad(set_to_none=True); F.cross_entropy(model(x), labels).backward();
optimizer.step(), with torch.optim.Adam(lr=1e-3). Prints lines the C++ driver parses:

    torch_version <v>
    torch_threads <n>
    torch_<model>_step_ms     <median milliseconds per step>
    torch_<model>_first_loss  <the loss of the first step>
    torch_<model>_last_loss   <the loss of the last step>

If torch cannot be imported it prints `torch_unavailable <reason>` and exits 0.
Run it alone with e.g. `python3 benchmarks/train_step.py --model both --batch 128 --reps 30 --threads 2`
(or --model resnet).
"""
import argparse
import os
import sys

from bench_common import median_ms

try:
    import torch
    import torch.nn.functional as F
except Exception as error:  # noqa: BLE001 - reported to the caller
    print(f"torch_unavailable {error}")
    sys.exit(0)


def make_model(name):
    nn = torch.nn
    if name == "resnet":  # the examples' own twin, found beside this script's folder
        sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "examples"))
        from fashion_mnist_torch import ResNet  # noqa: E402
        return ResNet().train()
    if name == "mlp":
        return nn.Sequential(nn.Linear(784, 512), nn.ReLU(), nn.Linear(512, 512), nn.ReLU(), nn.Linear(512, 10))
    return nn.Sequential(
        nn.Unflatten(1, (1, 28, 28)),
        nn.Conv2d(1, 32, 3, 1, 1), nn.ReLU(), nn.MaxPool2d(2),
        nn.Conv2d(32, 64, 3, 1, 1), nn.ReLU(), nn.MaxPool2d(2),
        nn.Flatten(), nn.Linear(64 * 7 * 7, 128), nn.ReLU(), nn.Linear(128, 10))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--model", choices=("mlp", "cnn", "both", "resnet"), default="both")
    parser.add_argument("--batch", type=int, default=128)
    parser.add_argument("--reps", type=int, default=30, help="timed steps (median reported)")
    parser.add_argument("--warmup", type=int, default=3, help="untimed steps first")
    parser.add_argument("--threads", type=int, default=0, help="torch.set_num_threads (0: leave torch's default)")
    args = parser.parse_args()
    if args.threads > 0:
        torch.set_num_threads(args.threads)
    torch.manual_seed(0)

    x = torch.randn(args.batch, 784)
    labels = torch.arange(args.batch) % 10
    print(f"torch_version {torch.__version__}")
    print(f"torch_threads {torch.get_num_threads()}")
    for name in ("mlp", "cnn") if args.model == "both" else (args.model,):
        model = make_model(name)
        optimizer = torch.optim.Adam(model.parameters(), lr=1e-3)

        def step():
            optimizer.zero_grad(set_to_none=True)
            loss = F.cross_entropy(model(x), labels)
            loss.backward()
            optimizer.step()
            return loss.item()

        first = step()
        step_ms = median_ms(step, args.warmup, args.reps)
        last = step()
        print(f"torch_{name}_step_ms {step_ms:.4f}")
        print(f"torch_{name}_first_loss {first:.6f}")
        print(f"torch_{name}_last_loss {last:.6f}")
        sys.stdout.flush()
    return 0


if __name__ == "__main__":
    sys.exit(main())
