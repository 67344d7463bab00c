"""The PyTorch side of benchmarks/mlp_grad.cpp: forward, and forward + backward, of the
same MLP loss (784-512-512-10, ReLU, softmax cross-entropy), eager, f32, CPU.
Prints `torch_* value` lines that the C++ benchmark reads."""
import argparse
import sys

import bench_common

try:
    import torch
except Exception as error:  # noqa: BLE001 - reported to the caller
    print(f"torch_unavailable {error}")
    sys.exit(0)

parser = argparse.ArgumentParser()
parser.add_argument("--batch", type=int, default=128)
parser.add_argument("--reps", type=int, default=30)
parser.add_argument("--warmup", type=int, default=3)
parser.add_argument("--threads", type=int, default=0)
args = parser.parse_args()
if args.threads > 0:
    torch.set_num_threads(args.threads)
torch.manual_seed(0)

x = torch.randn(args.batch, 784)
labels = torch.arange(args.batch) % 10
model = torch.nn.Sequential(
    torch.nn.Linear(784, 512), torch.nn.ReLU(),
    torch.nn.Linear(512, 512), torch.nn.ReLU(),
    torch.nn.Linear(512, 10))


# Debian's torch 1.13 is built with BLAS_INFO=generic, so the layout of the weights can
# matter: the model is timed with nn.Linear (x @ W^T) and with weights stored [in, out]
# (x @ W + b), and the C++ side compares against the faster of the two.
weights = [torch.nn.Parameter(torch.randn(i, o) * 0.05) for i, o in ((784, 512), (512, 512), (512, 10))]
biases = [torch.nn.Parameter(torch.zeros(o)) for o in (512, 512, 10)]


def manual_model(inputs):
    h = torch.relu(inputs @ weights[0] + biases[0])
    h = torch.relu(h @ weights[1] + biases[1])
    return h @ weights[2] + biases[2]


def median_ms(step):
    return bench_common.median_ms(step, args.warmup, args.reps)


def forward():
    with torch.no_grad():
        torch.nn.functional.cross_entropy(model(x), labels)


def forward_backward():
    model.zero_grad(set_to_none=True)
    torch.nn.functional.cross_entropy(model(x), labels).backward()


def manual_forward():
    with torch.no_grad():
        torch.nn.functional.cross_entropy(manual_model(x), labels)


def manual_forward_backward():
    for p in weights + biases:
        p.grad = None
    torch.nn.functional.cross_entropy(manual_model(x), labels).backward()


print(f"torch_version {torch.__version__}")
print(f"torch_threads {torch.get_num_threads()}")
print(f"torch_linear_fwd_ms {median_ms(forward):.4f}")
print(f"torch_linear_fwdbwd_ms {median_ms(forward_backward):.4f}")
print(f"torch_fwd_ms {median_ms(manual_forward):.4f}")
print(f"torch_fwdbwd_ms {median_ms(manual_forward_backward):.4f}")
