#!/usr/bin/env python3
"""The JAX side of benchmarks/char_gpt.cpp: training steps of the same character GPT as
char_gpt.py (token + learned position embeddings, pre-norm blocks of causal multi-head
attention and a GELU(tanh) MLP, final LayerNorm, linear head), f32 on the CPU, the whole
step (loss, gradients, global-norm clipping to 1.0, AdamW as torch.optim.AdamW's
defaults) as one `jax.jit` function.

Prints lines the C++ driver parses:

    jax_version <v>
    jax_threads <n>
    jax_gpt_step_ms      <median milliseconds per step>
    jax_gpt_tokens_per_s <batch * context / median step seconds>

If jax cannot be imported it prints `jax_unavailable <reason>` and exits 0.
Alone: python3 benchmarks/char_gpt_jax.py --layers 4 --width 256 --heads 4 --context 128 --batch 8
"""
import argparse
import math
import os
import sys

from bench_common import median_ms
from bench_jax import clipped_adamw_step, import_jax, initial_state


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
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
    args = parser.parse_args()
    imported = import_jax(args.threads)  # before anything else imports jax
    if imported is None:
        return 0
    jax, jnp = imported

    d, h, v = args.width, args.heads, args.vocab
    keys = iter(jax.random.split(jax.random.PRNGKey(0), 8 + 16 * args.layers))

    def linear(n_in, n_out):
        bound = 1.0 / math.sqrt(n_in)
        return {"w": jax.random.uniform(next(keys), (n_out, n_in), jnp.float32, -bound, bound),
                "b": jax.random.uniform(next(keys), (n_out,), jnp.float32, -bound, bound)}

    def norm():
        return {"g": jnp.ones((d,), jnp.float32), "b": jnp.zeros((d,), jnp.float32)}

    params = {
        "wte": jax.random.normal(next(keys), (v, d), jnp.float32),
        "wpe": jax.random.normal(next(keys), (args.max_context, d), jnp.float32),
        "blocks": [{"ln1": norm(), "q": linear(d, d), "k": linear(d, d), "v": linear(d, d), "proj": linear(d, d),
                    "ln2": norm(), "fc": linear(d, 4 * d), "out": linear(4 * d, d)} for _ in range(args.layers)],
        "ln_f": norm(),
        "head": linear(d, v),
    }

    def dense(p, x):
        return x @ p["w"].T + p["b"]

    def layer_norm(p, x):
        mean = x.mean(-1, keepdims=True)
        var = ((x - mean) ** 2).mean(-1, keepdims=True)
        return (x - mean) / jnp.sqrt(var + 1e-5) * p["g"] + p["b"]

    def attention(p, x):
        b, t, _ = x.shape
        split = lambda z: z.reshape(b, t, h, d // h).transpose(0, 2, 1, 3)
        q, k, val = split(dense(p["q"], x)), split(dense(p["k"], x)), split(dense(p["v"], x))
        scores = q @ k.transpose(0, 1, 3, 2) / math.sqrt(d // h)
        mask = jnp.tril(jnp.ones((t, t), bool))
        scores = jnp.where(mask, scores, -1e30)
        y = jax.nn.softmax(scores, axis=-1) @ val
        return dense(p["proj"], y.transpose(0, 2, 1, 3).reshape(b, t, d))

    def forward(p, tokens):
        x = p["wte"][tokens] + p["wpe"][: tokens.shape[1]]
        for blk in p["blocks"]:
            x = x + attention(blk, layer_norm(blk["ln1"], x))
            x = x + dense(blk["out"], jax.nn.gelu(dense(blk["fc"], layer_norm(blk["ln2"], x)), approximate=True))
        return dense(p["head"], layer_norm(p["ln_f"], x))

    def loss_fn(p, tokens, targets):
        logp = jax.nn.log_softmax(forward(p, tokens), axis=-1)
        return -jnp.mean(jnp.take_along_axis(logp, targets[..., None], axis=-1))

    step = clipped_adamw_step(jax, jnp, loss_fn)

    rng = jax.random.PRNGKey(1)
    tokens = jax.random.randint(rng, (args.batch, args.context), 0, v)
    targets = jax.random.randint(jax.random.PRNGKey(2), (args.batch, args.context), 0, v)
    state = initial_state(jax, jnp, params)

    def run():
        state[0], state[1], state[2], state[3], loss = step(*state, tokens, targets)
        return float(loss.block_until_ready())

    run()  # compiles
    median = median_ms(run, args.warmup, args.reps) / 1e3
    print(f"jax_version {jax.__version__}")
    print(f"jax_threads {args.threads if args.threads > 0 else os.cpu_count()}")
    print(f"jax_gpt_step_ms {median * 1e3:.3f}")
    print(f"jax_gpt_tokens_per_s {args.batch * args.context / median:.1f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
