#!/usr/bin/env python3
"""The peers of benchmarks/cumsum_bench.cpp: cumsum of float32 over 1M elements as one row and
over a [1024, 1024] matrix along each axis, with torch.cumsum (CPU) or jax.numpy.cumsum
(jax.jit, CPU). Prints the lines the C++ driver parses (<peer> is torch or jax):

    <peer>_version <v>
    <peer>_threads <n>          (torch: "<n> or 1", the faster of the two per case)
    <peer>_row_ms <median milliseconds>
    <peer>_axis0_ms <median milliseconds>
    <peer>_axis1_ms <median milliseconds>

If the framework cannot be imported it prints `<peer>_unavailable <reason>` and exits 0.
"""
import argparse
import os
import sys

from bench_common import median_ms


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--peer", choices=["torch", "jax"], default="torch")
    parser.add_argument("--reps", type=int, default=50, help="timed repetitions (median reported)")
    parser.add_argument("--warmup", type=int, default=3, help="untimed repetitions first")
    parser.add_argument("--threads", type=int, default=0, help="threads (0: the framework's default)")
    args = parser.parse_args()
    p = args.peer
    if p == "jax" and args.threads > 0:  # before jax is imported: XLA reads its flags once
        os.environ["XLA_FLAGS"] = (os.environ.get("XLA_FLAGS", "") +
                                   f" --xla_cpu_multi_thread_eigen={'true' if args.threads > 1 else 'false'}"
                                   f" intra_op_parallelism_threads={args.threads}")
    try:
        if p == "torch":
            import torch
        else:
            import jax
            import jax.numpy as jnp
    except Exception as e:  # ImportError, or a broken install
        print(f"{p}_unavailable {type(e).__name__}: {e}")
        return 0
    shapes = {"row": ((1 << 20,), 0), "axis0": ((1024, 1024), 0), "axis1": ((1024, 1024), 1)}
    if p == "torch":
        # torch at the given thread count and at one thread, the faster per case: its
        # parallel cumsum along a non-last axis can be slower than its serial one.
        counts = sorted({args.threads if args.threads > 0 else torch.get_num_threads(), 1}, reverse=True)
        print(f"torch_version {torch.__version__}")
        print(f"torch_threads {' or '.join(str(c) for c in counts)}")
        best = {}
        for count in counts:
            torch.set_num_threads(count)
            for key, (shape, dim) in shapes.items():
                x = torch.rand(shape) * 2 - 1
                out = torch.empty_like(x)
                ms = median_ms(lambda: torch.cumsum(x, dim, out=out), max(args.warmup, 1), args.reps)
                best[key] = min(best.get(key, ms), ms)
        for key, ms in best.items():
            print(f"torch_{key}_ms {ms:.4f}")
    else:
        print(f"jax_version {jax.__version__}")
        print(f"jax_threads {args.threads if args.threads > 0 else os.cpu_count()}")
        for key, (shape, dim) in shapes.items():
            x = jax.random.uniform(jax.random.PRNGKey(0), shape, jnp.float32, -1.0, 1.0)
            f = jax.jit(lambda v, d=dim: jnp.cumsum(v, axis=d))
            print(f"jax_{key}_ms {median_ms(lambda: f(x).block_until_ready(), max(args.warmup, 1), args.reps):.4f}")
    sys.stdout.flush()
    return 0


if __name__ == "__main__":
    sys.exit(main())
