#!/usr/bin/env python3
"""PyTorch eager side of benchmarks/elementwise_chain.cpp.

Runs the same 6-op elementwise chain on the same inputs as the C++ benchmark:

    t1 = x * y; t2 = t1 + x; t3 = t2 * 0.5; t4 = t3 - y; t5 = relu(t4); t6 = t5 * t5

and prints lines the C++ driver parses:

    torch_version <v>
    torch_threads <n>
    torch_eager_ms <median milliseconds per evaluation of the chain>
    torch_eager_out_ms <the same with out= into preallocated buffers: no allocation>
    torch_checksum <sum of t6, in float64>

If torch cannot be imported it prints `torch_unavailable <reason>` and exits 0.
Run it alone with e.g. `python3 benchmarks/elementwise_chain.py --n 16777216 --reps 20 --threads 8`.
"""
import argparse
import statistics
import sys
import time


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--n", type=int, default=16 * 1024 * 1024, help="elements per input")
    parser.add_argument("--reps", type=int, default=20, help="timed repetitions (median reported)")
    parser.add_argument("--warmup", type=int, default=3, help="untimed repetitions first")
    parser.add_argument("--threads", type=int, default=0, help="torch.set_num_threads (0: leave torch's default)")
    args = parser.parse_args()

    try:
        import torch
    except Exception as e:  # ImportError, or a broken install
        print(f"torch_unavailable {type(e).__name__}: {e}")
        print(f"torch_python {sys.executable}")
        return 0

    if args.threads > 0:
        torch.set_num_threads(args.threads)
    torch.set_grad_enabled(False)

    # The same deterministic inputs as the C++ side: small integers divided by a power of
    # ten, computed exactly in int64 and rounded once to float32 (bit-identical in both).
    i = torch.arange(args.n, dtype=torch.int64)
    x = ((i * 7919) % 2001 - 1000).to(torch.float32) / 500.0
    y = ((i * 104729) % 1999 - 999).to(torch.float32) / 400.0
    del i

    def chain(x, y):
        t1 = x * y
        t2 = t1 + x
        t3 = t2 * 0.5
        t4 = t3 - y
        t5 = torch.relu(t4)
        return t5 * t5

    for _ in range(max(args.warmup, 1)):
        out = chain(x, y)
    times = []
    for _ in range(args.reps):
        start = time.perf_counter()
        out = chain(x, y)
        times.append((time.perf_counter() - start) * 1e3)

    # The same 6 ops writing into preallocated buffers (out=): no allocation, so this
    # separates the cost of torch's kernels from that of allocating fresh outputs.
    bufs = [torch.empty_like(x) for _ in range(6)]

    def chain_out(x, y, b):
        torch.mul(x, y, out=b[0])
        torch.add(b[0], x, out=b[1])
        torch.mul(b[1], 0.5, out=b[2])
        torch.sub(b[2], y, out=b[3])
        torch.clamp(b[3], min=0.0, out=b[4])
        torch.mul(b[4], b[4], out=b[5])
        return b[5]

    for _ in range(max(args.warmup, 1)):
        chain_out(x, y, bufs)
    times_out = []
    for _ in range(args.reps):
        start = time.perf_counter()
        chain_out(x, y, bufs)
        times_out.append((time.perf_counter() - start) * 1e3)
    if not torch.equal(bufs[5], out):
        print("torch_error out= variant differs from the eager result", file=sys.stderr)
        return 1

    print(f"torch_version {torch.__version__}")
    print(f"torch_threads {torch.get_num_threads()}")
    print(f"torch_eager_ms {statistics.median(times):.6f}")
    print(f"torch_eager_out_ms {statistics.median(times_out):.6f}")
    print(f"torch_checksum {out.double().sum().item():.17g}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
