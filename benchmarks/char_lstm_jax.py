#!/usr/bin/env python3
"""The JAX side of benchmarks/char_lstm.cpp: training steps of the same character LSTM as
char_gpt.py --model lstm (Embedding(256, 64) -> a 2-layer LSTM(64 -> 128, batch_first, torch's
gate order i, f, g, o and its weight_ih / weight_hh / bias_ih / bias_hh per layer) ->
Linear(128, 256)), f32 on the CPU, cross-entropy over every position (mean), the whole step
(loss, gradients, global-norm clipping to 1.0, AdamW as torch.optim.AdamW's defaults and
luminal's adamw{.lr = 1e-3f}: betas 0.9, 0.999, eps 1e-8, weight decay 0.01) as one
`jax.jit` function, the recurrence a `jax.lax.scan` over time. Random byte tokens and
targets.

Prints lines the C++ driver parses:

    jax_version <v>
    jax_threads <n>
    jax_lstm_step_ms      <median milliseconds per step, compile excluded>
    jax_lstm_tokens_per_s <batch * context / median step seconds>
    jax_lstm_first_loss   <the loss of the first step (about log 256 = 5.545)>
    jax_lstm_last_loss    <the loss of the last timed step>

If jax cannot be imported it prints `jax_unavailable <reason>` and exits 0.
Alone: python3 benchmarks/char_lstm_jax.py --context 64 --batch 32 --threads 2
"""
import argparse
import math
import os
import sys

from bench_common import median_ms
from bench_jax import clipped_adamw_step, import_jax, initial_state


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--context", type=int, default=64)
    parser.add_argument("--batch", type=int, default=32)
    parser.add_argument("--vocab", type=int, default=256)
    parser.add_argument("--embed", type=int, default=64)
    parser.add_argument("--hidden", type=int, default=128)
    parser.add_argument("--layers", type=int, default=2)
    parser.add_argument("--reps", type=int, default=10)
    parser.add_argument("--warmup", type=int, default=2)
    parser.add_argument("--threads", type=int, default=0)
    args = parser.parse_args()
    imported = import_jax(args.threads)  # before anything else imports jax
    if imported is None:
        return 0
    jax, jnp = imported

    v, e, hd = args.vocab, args.embed, args.hidden
    keys = iter(jax.random.split(jax.random.PRNGKey(0), 8 + 4 * args.layers))

    def uniform(shape, bound):
        return jax.random.uniform(next(keys), shape, jnp.float32, -bound, bound)

    # torch's initialization: Embedding N(0, 1), LSTM U(-1/sqrt(hidden), 1/sqrt(hidden)),
    # Linear U(-1/sqrt(in), 1/sqrt(in)).
    k = 1.0 / math.sqrt(hd)
    params = {
        "embed": jax.random.normal(next(keys), (v, e), jnp.float32),
        "lstm": [{"weight_ih": uniform((4 * hd, e if layer == 0 else hd), k),
                  "weight_hh": uniform((4 * hd, hd), k),
                  "bias_ih": uniform((4 * hd,), k),
                  "bias_hh": uniform((4 * hd,), k)} for layer in range(args.layers)],
        "head": {"w": uniform((v, hd), 1.0 / math.sqrt(hd)), "b": uniform((v,), 1.0 / math.sqrt(hd))},
    }

    def lstm_layer(p, x):
        """x [batch, time, in] -> h [batch, time, hidden]; zero initial state."""
        b = x.shape[0]
        xw = x @ p["weight_ih"].T + (p["bias_ih"] + p["bias_hh"])  # the whole sequence at once
        w_hh_t = p["weight_hh"].T

        def cell(carry, xw_t):
            h, c = carry
            gates = xw_t + h @ w_hh_t
            i, f, g, o = jnp.split(gates, 4, axis=-1)  # torch's order
            c = jax.nn.sigmoid(f) * c + jax.nn.sigmoid(i) * jnp.tanh(g)
            h = jax.nn.sigmoid(o) * jnp.tanh(c)
            return (h, c), h

        zeros = jnp.zeros((b, hd), x.dtype)
        _, hs = jax.lax.scan(cell, (zeros, zeros), xw.transpose(1, 0, 2))
        return hs.transpose(1, 0, 2)

    def forward(p, tokens):
        x = p["embed"][tokens]
        for layer in p["lstm"]:
            x = lstm_layer(layer, x)
        return x @ p["head"]["w"].T + p["head"]["b"]

    def loss_fn(p, tokens, targets):
        logp = jax.nn.log_softmax(forward(p, tokens), axis=-1)
        return -jnp.mean(jnp.take_along_axis(logp, targets[..., None], axis=-1))

    step = clipped_adamw_step(jax, jnp, loss_fn)

    tokens = jax.random.randint(jax.random.PRNGKey(1), (args.batch, args.context), 0, v)
    targets = jax.random.randint(jax.random.PRNGKey(2), (args.batch, args.context), 0, v)
    state = initial_state(jax, jnp, params)
    losses = []

    def run():
        state[0], state[1], state[2], state[3], loss = step(*state, tokens, targets)
        losses.append(float(loss.block_until_ready()))

    run()  # compiles
    median = median_ms(run, args.warmup, args.reps) / 1e3
    print(f"jax_version {jax.__version__}")
    print(f"jax_threads {args.threads if args.threads > 0 else os.cpu_count()}")
    print(f"jax_lstm_step_ms {median * 1e3:.3f}")
    print(f"jax_lstm_tokens_per_s {args.batch * args.context / median:.1f}")
    print(f"jax_lstm_first_loss {losses[0]:.4f}")
    print(f"jax_lstm_last_loss {losses[-1]:.4f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
