"""What the JAX peers of luminal's benchmarks share: importing JAX on the CPU with a thread
count, and one training step as a jax.jit function (value_and_grad, global-norm clipping at
1.0, AdamW as torch.optim.AdamW and luminal's adamw{.lr = 1e-3f} run it: betas 0.9, 0.999,
eps 1e-8, weight decay 0.01 applied to the parameter first)."""
import os


def import_jax(threads):
    """(jax, jax.numpy) on the CPU with `threads` threads (0: XLA's default), or None after
    printing `jax_unavailable <reason>` when JAX cannot be imported. XLA reads its flags
    once, so this runs before anything else imports jax."""
    if threads > 0:
        os.environ["XLA_FLAGS"] = (os.environ.get("XLA_FLAGS", "") +
                                   f" --xla_cpu_multi_thread_eigen={'true' if threads > 1 else 'false'}"
                                   f" intra_op_parallelism_threads={threads}")
    try:
        import jax
        import jax.numpy as jnp
    except Exception as error:  # noqa: BLE001 - reported to the caller
        print(f"jax_unavailable {error}")
        return None
    jax.config.update("jax_platforms", "cpu")
    return jax, jnp


def clipped_adamw_step(jax, jnp, loss_fn, lr=1e-3, weight_decay=0.01):
    """step(params, m, s, t, *batch) -> (params, m, s, t, loss), jitted: the gradients of
    loss_fn(params, *batch) clipped to a global norm of 1.0, then one AdamW update."""
    tree = jax.tree_util.tree_map

    @jax.jit
    def step(p, m, s, t, *batch):
        loss, g = jax.value_and_grad(loss_fn)(p, *batch)
        norm_sq = sum(jnp.sum(x * x) for x in jax.tree_util.tree_leaves(g))
        g = tree(lambda x: x * jnp.minimum(1.0, 1.0 / (jnp.sqrt(norm_sq) + 1e-6)), g)
        t = t + 1
        m = tree(lambda m, g: 0.9 * m + 0.1 * g, m, g)
        s = tree(lambda s, g: 0.999 * s + 0.001 * g * g, s, g)
        c1, c2 = 1 - 0.9 ** t, 1 - 0.999 ** t
        p = tree(lambda p, m, s: p * (1 - lr * weight_decay) - lr * (m / c1) / (jnp.sqrt(s / c2) + 1e-8), p, m, s)
        return p, m, s, t, loss

    return step


def initial_state(jax, jnp, params):
    """[params, m, s, t]: AdamW's moments at zero and no step taken."""
    zeros = jax.tree_util.tree_map(jnp.zeros_like, params)
    return [params, zeros, jax.tree_util.tree_map(jnp.zeros_like, params), jnp.float32(0)]
