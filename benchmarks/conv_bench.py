#!/usr/bin/env python3
"""PyTorch CPU side of benchmarks/conv_bench.cpp: forward + backward of a plain, a depthwise
and a dilated Conv2d(32, 32, 3) on x [32, 32, 32, 32], the gradients of sum(conv(x) * r) with
respect to x, weight and bias. Prints the lines the C++ driver parses:

    torch_version <v>
    torch_threads <n>
    torch_plain_ms <median milliseconds>
    torch_depthwise_ms <median milliseconds>
    torch_dilated_ms <median milliseconds>

If torch cannot be imported it prints `torch_unavailable <reason>` and exits 0.
"""
import argparse
import statistics
import sys
import time


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--reps", type=int, default=20, help="timed repetitions (median reported)")
    parser.add_argument("--warmup", type=int, default=3, help="untimed repetitions first")
    parser.add_argument("--threads", type=int, default=0, help="torch.set_num_threads (0: leave torch's default)")
    args = parser.parse_args()
    try:
        import torch
    except Exception as e:  # ImportError, or a broken install
        print(f"torch_unavailable {type(e).__name__}: {e}")
        return 0
    if args.threads > 0:
        torch.set_num_threads(args.threads)
    print(f"torch_version {torch.__version__}")
    print(f"torch_threads {torch.get_num_threads()}")
    torch.manual_seed(0)
    cases = {
        "plain": torch.nn.Conv2d(32, 32, 3, padding=1),
        "depthwise": torch.nn.Conv2d(32, 32, 3, padding=1, groups=32),
        "dilated": torch.nn.Conv2d(32, 32, 3, padding=2, dilation=2),
    }
    x = (torch.rand(32, 32, 32, 32) * 2 - 1).requires_grad_(True)
    for name, conv in cases.items():
        r = torch.rand(32, 32, 32, 32) * 2 - 1

        def step():
            x.grad = None
            conv.zero_grad(set_to_none=True)
            (conv(x) * r).sum().backward()

        for _ in range(max(args.warmup, 1)):
            step()
        times = []
        for _ in range(args.reps):
            start = time.perf_counter()
            step()
            times.append((time.perf_counter() - start) * 1e3)
        print(f"torch_{name}_ms {statistics.median(times):.4f}")
    sys.stdout.flush()
    return 0


if __name__ == "__main__":
    sys.exit(main())
