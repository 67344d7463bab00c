#!/usr/bin/env python3
"""The JAX side of benchmarks/train_step.cpp: the same training steps as train_step.py
(forward, backward, Adam update of the MLP and the CNN, f32, CPU), as one `jax.jit`
function each, compiled by XLA.

Prints lines the C++ driver parses:

    jax_version <v>
    jax_threads <n>             (XLA's intra-op threads, from --threads)
    jax_<model>_step_ms     <median milliseconds per step>
    jax_<model>_first_loss  <the loss of the first step>
    jax_<model>_last_loss   <the loss of the last step>

If jax cannot be imported it prints `jax_unavailable <reason>` and exits 0. The driver
runs it with the interpreter in LUMINAL_BENCH_JAX_PYTHON, else benchmarks' own virtual
environment (train_step_bench --install-jax makes one), else python3.
"""
import argparse
import os
import sys

from bench_common import median_ms


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--model", choices=("mlp", "cnn", "both"), default="both")
    parser.add_argument("--batch", type=int, default=128)
    parser.add_argument("--reps", type=int, default=30)
    parser.add_argument("--warmup", type=int, default=3)
    parser.add_argument("--threads", type=int, default=0, help="XLA CPU threads (0: XLA's default)")
    args = parser.parse_args()
    if args.threads > 0:  # before jax is imported: XLA reads its flags once
        os.environ["XLA_FLAGS"] = (os.environ.get("XLA_FLAGS", "") +
                                   f" --xla_cpu_multi_thread_eigen={'true' if args.threads > 1 else 'false'}"
                                   f" intra_op_parallelism_threads={args.threads}")
        os.environ.setdefault("OMP_NUM_THREADS", str(args.threads))
    try:
        import jax
        import jax.numpy as jnp
    except Exception as error:  # noqa: BLE001 - reported to the caller
        print(f"jax_unavailable {error}")
        return 0
    jax.config.update("jax_platforms", "cpu")
    print(f"jax_version {jax.__version__}")
    print(f"jax_threads {args.threads if args.threads > 0 else os.cpu_count()}")

    key = jax.random.PRNGKey(0)
    x = jax.random.normal(key, (args.batch, 784), jnp.float32)
    labels = jnp.arange(args.batch) % 10

    def uniform(key, shape, fan_in):
        bound = 1.0 / fan_in ** 0.5
        return jax.random.uniform(key, shape, jnp.float32, -bound, bound)

    def linear_params(key, n_in, n_out):
        k1, k2 = jax.random.split(key)
        return {"w": uniform(k1, (n_out, n_in), n_in), "b": uniform(k2, (n_out,), n_in)}

    def conv_params(key, c_in, c_out):
        k1, k2 = jax.random.split(key)
        return {"w": uniform(k1, (c_out, c_in, 3, 3), c_in * 9), "b": uniform(k2, (c_out,), c_in * 9)}

    def linear(p, h):
        return h @ p["w"].T + p["b"]

    def conv(p, h):  # NCHW, 3x3, stride 1, padding 1, as torch.nn.Conv2d(c_in, c_out, 3, 1, 1)
        y = jax.lax.conv_general_dilated(h, p["w"], (1, 1), ((1, 1), (1, 1)),
                                         dimension_numbers=("NCHW", "OIHW", "NCHW"))
        return y + p["b"][None, :, None, None]

    def pool(h):  # MaxPool2d(2)
        return jax.lax.reduce_window(h, -jnp.inf, jax.lax.max, (1, 1, 2, 2), (1, 1, 2, 2), "VALID")

    def mlp(p, h):
        h = jax.nn.relu(linear(p["fc1"], h))
        h = jax.nn.relu(linear(p["fc2"], h))
        return linear(p["fc3"], h)

    def cnn(p, h):
        h = h.reshape(h.shape[0], 1, 28, 28)
        h = pool(jax.nn.relu(conv(p["conv1"], h)))
        h = pool(jax.nn.relu(conv(p["conv2"], h)))
        h = jax.nn.relu(linear(p["fc1"], h.reshape(h.shape[0], -1)))
        return linear(p["fc2"], h)

    def init(name):
        keys = jax.random.split(jax.random.PRNGKey(1), 4)
        if name == "mlp":
            return mlp, {"fc1": linear_params(keys[0], 784, 512), "fc2": linear_params(keys[1], 512, 512),
                         "fc3": linear_params(keys[2], 512, 10)}
        return cnn, {"conv1": conv_params(keys[0], 1, 32), "conv2": conv_params(keys[1], 32, 64),
                     "fc1": linear_params(keys[2], 64 * 7 * 7, 128), "fc2": linear_params(keys[3], 128, 10)}

    for name in ("mlp", "cnn") if args.model == "both" else (args.model,):
        model, params = init(name)

        def loss_fn(p):
            logits = model(p, x)
            logp = jax.nn.log_softmax(logits, axis=-1)
            return -jnp.mean(jnp.take_along_axis(logp, labels[:, None], axis=1))

        # torch.optim.Adam(lr=1e-3): betas (0.9, 0.999), eps 1e-8, bias-corrected.
        @jax.jit
        def step(p, m, v, t):
            loss, g = jax.value_and_grad(loss_fn)(p)
            t = t + 1
            m = jax.tree_util.tree_map(lambda m, g: 0.9 * m + 0.1 * g, m, g)
            v = jax.tree_util.tree_map(lambda v, g: 0.999 * v + 0.001 * g * g, v, g)
            scale = 1e-3 * jnp.sqrt(1 - 0.999 ** t) / (1 - 0.9 ** t)
            p = jax.tree_util.tree_map(lambda p, m, v: p - scale * m / (jnp.sqrt(v) + 1e-8), p, m, v)
            return p, m, v, t, loss

        state = [params, jax.tree_util.tree_map(jnp.zeros_like, params),
                 jax.tree_util.tree_map(jnp.zeros_like, params), jnp.float32(0)]

        def run():
            state[0], state[1], state[2], state[3], loss = step(*state)
            return float(loss.block_until_ready())

        first = run()  # compiles
        step_ms = median_ms(run, args.warmup, args.reps)
        last = run()
        print(f"jax_{name}_step_ms {step_ms:.4f}")
        print(f"jax_{name}_first_loss {first:.6f}")
        print(f"jax_{name}_last_loss {last:.6f}")
        sys.stdout.flush()
    return 0


if __name__ == "__main__":
    sys.exit(main())
