#!/usr/bin/env python3
"""The PINN of examples/pinn.cpp in PyTorch: the same network, points and loss, from the
initial state that `pinn --dump-init FILE` writes. Recomputes the loss and every
parameter's gradient at initialization and compares them with luminal's.

    pinn --steps 1 --dump-init init.safetensors
    python3 examples/pinn_reference.py init.safetensors

u'' is taken twice: by nested reverse mode (torch.autograd.grad with create_graph, any
torch) and, where torch.func exists (torch >= 2.0), by forward over forward
(torch.func.jvp of torch.func.jvp, as luminal does). Exits 1 when the largest relative
difference (max |a - b| / max |b| per tensor) exceeds 1e-9 (f64), 0 otherwise, and 77
(CTest's skip code) when torch is not installed.
"""
import json
import math
import struct
import sys

try:
    import numpy as np
    import torch
except ImportError as e:  # the CTest registers 77 as "skipped"
    print(f"pinn_reference: skipped: {e}")
    sys.exit(77)

PARAMS = ["fc1.weight", "fc1.bias", "fc2.weight", "fc2.bias", "fc3.weight", "fc3.bias"]
TOLERANCE = 1e-9  # f64 throughout


def read_safetensors(path):
    """The tensors of a safetensors file as float64 numpy arrays (the format: an 8-byte
    little-endian header size, a JSON header, then the raw data); no extra package."""
    with open(path, "rb") as f:
        blob = f.read()
    (size,) = struct.unpack("<Q", blob[:8])
    header = json.loads(blob[8 : 8 + size])
    data = blob[8 + size :]
    out = {}
    for name, entry in header.items():
        if name == "__metadata__":
            continue
        if entry["dtype"] != "F64":
            raise SystemExit(f"pinn_reference: '{name}' is {entry['dtype']}, expected F64")
        begin, end = entry["data_offsets"]
        out[name] = np.frombuffer(data[begin:end], dtype="<f8").reshape(entry["shape"]).copy()
    return out


def net(p, x):
    h = torch.tanh(x @ p["fc1.weight"].T + p["fc1.bias"])
    h = torch.tanh(h @ p["fc2.weight"].T + p["fc2.bias"])
    return h @ p["fc3.weight"].T + p["fc3.bias"]


def forcing(x):
    pi = math.pi
    return torch.sin(x * pi) * (pi * pi) + torch.sin(x * (4 * pi)) * (16 * pi * pi)


def u_xx_autograd(p, x):
    """Nested reverse mode: each output row depends on its own input row only, so the
    gradient of sum(u) is u' at every point (and again for u'')."""
    x = x.clone().requires_grad_(True)
    u = net(p, x)
    (u_x,) = torch.autograd.grad(u.sum(), x, create_graph=True)
    (u_xx,) = torch.autograd.grad(u_x.sum(), x, create_graph=True)
    return u_xx


def u_xx_func(p, x):
    """Forward over forward with torch.func, the tangent a column of ones (as pinn.cpp)."""
    ones = torch.ones_like(x)
    u_x = lambda y: torch.func.jvp(lambda z: net(p, z), (y,), (ones,))[1]
    return torch.func.jvp(u_x, (x,), (ones,))[1]


def loss_and_grads(t, second_derivative):
    p = {k: torch.tensor(t[k], requires_grad=True) for k in PARAMS}
    x, xb = torch.tensor(t["x"]), torch.tensor(t["xb"])
    residual = second_derivative(p, x) + forcing(x)
    loss = (residual**2).mean() + float(t["bc_weight"]) * (net(p, xb) ** 2).mean()
    grads = torch.autograd.grad(loss, [p[k] for k in PARAMS])
    return loss.item(), {k: g.numpy() for k, g in zip(PARAMS, grads)}


def main():
    if len(sys.argv) != 2:
        raise SystemExit("usage: pinn_reference.py INIT.safetensors  (written by pinn --dump-init)")
    t = read_safetensors(sys.argv[1])
    torch.set_default_dtype(torch.float64)
    methods = [("nested autograd", u_xx_autograd)]
    if hasattr(torch, "func"):
        methods.append(("torch.func jvp over jvp", u_xx_func))
    else:
        print(f"torch {torch.__version__} has no torch.func: nested autograd only")
    worst = 0.0
    print(f"torch {torch.__version__}; {t['x'].shape[0]} points; luminal's loss at initialization {float(t['loss']):.15e}")
    for label, method in methods:
        loss, grads = loss_and_grads(t, method)
        rel_loss = abs(loss - float(t["loss"])) / abs(loss)
        rel = {k: float(np.max(np.abs(grads[k] - t["grad." + k])) / max(np.max(np.abs(grads[k])), 1e-300)) for k in PARAMS}
        worst = max(worst, rel_loss, *rel.values())
        print(f"{label}: loss {loss:.15e} (relative difference {rel_loss:.2e})")
        print("  gradients, max |luminal - torch| / max |torch|: " + ", ".join(f"{k} {v:.2e}" for k, v in rel.items()))
    ok = worst <= TOLERANCE
    print(f"largest relative difference {worst:.2e}: {'PASS' if ok else 'FAIL'} (tolerance {TOLERANCE:g})")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
