"""The timing loop shared by the PyTorch peers of luminal's benchmarks (the Python twin of
bench_common.hpp). Standard library only, so that a script still reports
`torch_unavailable` when torch cannot be imported."""
import statistics
import time


def median_ms(step, warmup, reps):
    """Calls step() `warmup` times, then times `reps` calls; returns the median in ms."""
    for _ in range(warmup):
        step()
    times = []
    for _ in range(reps):
        start = time.perf_counter()
        step()
        times.append((time.perf_counter() - start) * 1e3)
    return statistics.median(times)
