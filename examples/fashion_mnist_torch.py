#!/usr/bin/python3
"""PyTorch reads what examples/fashion_mnist trains, and writes models it can start from.

    /usr/bin/python3 examples/fashion_mnist_torch.py evaluate model.safetensors
        loads a luminal checkpoint (parameters under torch.nn's names; the optimizer
        state is skipped) into the same model built from torch.nn, runs it on the
        Fashion-MNIST test set and prints its accuracy: it matches what the luminal
        trainer printed for that epoch.

    /usr/bin/python3 examples/fashion_mnist_torch.py init --model cnn torch_init.safetensors
        writes a freshly initialized torch.nn model (parameters and buffers only);
        `fashion_mnist --model cnn --checkpoint torch_init.safetensors --resume` then
        trains it in luminal.

    /usr/bin/python3 examples/fashion_mnist_torch.py compare --model cnn --trainer build/examples/fashion_mnist
        trains the same torch-initialized model in luminal (the trainer, from a copy of the
        initial weights) and in PyTorch, with the same batches (luminal::shuffled_batches:
        std::mt19937_64 and Fisher-Yates, rebuilt here), the same cosine-decayed AdamW and
        the same --epochs and --limit, prints both losses of each of the first --steps steps
        beside torch's float64 run, and their largest relative difference; fails above twice
        torch's own float32 vs float64 drift (at least --tolerance); then times
        PyTorch's training step on the same batch size (torch's CPU threads as it chooses).

Needs torch (Debian: python3-torch) and numpy; the safetensors format is read and
written by tests/fixtures/safetensors_interop.py, so the safetensors package is optional.
"""
import argparse
import gzip
import os
import struct
import sys

import numpy as np
import torch

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests", "fixtures"))
import safetensors_interop  # noqa: E402
from mt19937_64 import MT19937_64  # noqa: E402  (beside this script)

DATA = "/usr/share/datasets/fashion-mnist"
MEAN, STD = 0.28604060, 0.35302424  # luminal::fashion_mnist_mean / _std


class MLP(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.fc1 = torch.nn.Linear(784, 512)
        self.fc2 = torch.nn.Linear(512, 256)
        self.fc3 = torch.nn.Linear(256, 10)

    def forward(self, x):  # dropout is off in evaluation
        return self.fc3(torch.relu(self.fc2(torch.relu(self.fc1(x)))))


class CNN(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.conv1 = torch.nn.Conv2d(1, 32, 3, 1, 1)
        self.conv2 = torch.nn.Conv2d(32, 64, 3, 1, 1)
        self.fc1 = torch.nn.Linear(64 * 7 * 7, 128)
        self.fc2 = torch.nn.Linear(128, 10)

    def forward(self, x):
        x = x.reshape(-1, 1, 28, 28)
        x = torch.nn.functional.max_pool2d(torch.relu(self.conv1(x)), 2)
        x = torch.nn.functional.max_pool2d(torch.relu(self.conv2(x)), 2)
        return self.fc2(torch.relu(self.fc1(x.flatten(1))))


class BasicBlock(torch.nn.Module):
    """torchvision's BasicBlock; the shortcut projects (1x1 convolution + BatchNorm) when
    the block changes the channels or the plane."""

    def __init__(self, cin, cout, stride):
        super().__init__()
        self.conv1 = torch.nn.Conv2d(cin, cout, 3, stride, 1, bias=False)
        self.bn1 = torch.nn.BatchNorm2d(cout)
        self.conv2 = torch.nn.Conv2d(cout, cout, 3, 1, 1, bias=False)
        self.bn2 = torch.nn.BatchNorm2d(cout)
        self.downsample = None
        if stride != 1 or cin != cout:
            self.downsample = torch.nn.Sequential(
                torch.nn.Conv2d(cin, cout, 1, stride, 0, bias=False), torch.nn.BatchNorm2d(cout))

    def forward(self, x):
        y = self.bn2(self.conv2(torch.relu(self.bn1(self.conv1(x)))))
        return torch.relu(y + (x if self.downsample is None else self.downsample(x)))


class ResNet(torch.nn.Module):
    """The ResNet of issue 66 (a stem, two downsampling BasicBlocks of 16-32-64 channels, a
    depthwise convolution with BatchNorm, a global average pool, a linear head), under the
    parameter names of `fashion_mnist --model resnet`."""

    def __init__(self):
        super().__init__()
        self.conv1 = torch.nn.Conv2d(1, 16, 3, 1, 1, bias=False)
        self.bn1 = torch.nn.BatchNorm2d(16)
        self.layer1 = torch.nn.Sequential(BasicBlock(16, 32, 2))
        self.layer2 = torch.nn.Sequential(BasicBlock(32, 64, 2))
        self.depthwise = torch.nn.Conv2d(64, 64, 3, 1, 1, groups=64, bias=False)
        self.depthwise_bn = torch.nn.BatchNorm2d(64)
        self.fc = torch.nn.Linear(64, 10)

    def forward(self, x):
        x = torch.relu(self.bn1(self.conv1(x.reshape(-1, 1, 28, 28))))
        x = self.layer2(self.layer1(x))
        x = torch.relu(self.depthwise_bn(self.depthwise(x)))
        return self.fc(torch.nn.functional.adaptive_avg_pool2d(x, 1).flatten(1))


MODELS = {"mlp": MLP, "cnn": CNN, "resnet": ResNet}


def load_split(prefix, data_dir):
    with gzip.open(os.path.join(data_dir, f"{prefix}-images-idx3-ubyte.gz"), "rb") as f:
        magic, n, rows, cols = struct.unpack(">IIII", f.read(16))
        images = np.frombuffer(f.read(), dtype=np.uint8).reshape(n, rows * cols)
    with gzip.open(os.path.join(data_dir, f"{prefix}-labels-idx1-ubyte.gz"), "rb") as f:
        magic, n = struct.unpack(">II", f.read(8))
        labels = np.frombuffer(f.read(), dtype=np.uint8)
    x = (torch.from_numpy(images.astype(np.float32)) / 255.0 - MEAN) / STD
    return x, torch.from_numpy(labels.astype(np.int64))


def evaluate(args):
    tensors, metadata = safetensors_interop.read(args.checkpoint)
    name = args.model or metadata.get("model")
    if name not in MODELS:
        sys.exit(f"{args.checkpoint}: no 'model' in its metadata; pass --model mlp|cnn|resnet")
    model = MODELS[name]()
    model.eval()  # BatchNorm normalizes with its running statistics
    params = {k: v for k, v in tensors.items() if not k.startswith("optimizer.")}
    model.load_state_dict(params, strict=True)  # every parameter, with its shape
    x, y = load_split("t10k", args.data)
    with torch.no_grad():
        predicted = torch.cat([model(x[i : i + 1000]).argmax(1) for i in range(0, len(x), 1000)])
    accuracy = (predicted == y).double().mean().item()
    print(f"{args.checkpoint}: {name}, epoch {metadata.get('epoch', '?')}, step {metadata.get('luminal.step', '?')}")
    print(f"torch {torch.__version__} test accuracy {accuracy:.4f}")


def state_tensors(model):
    """The state_dict as safetensors_interop writes it: num_batches_tracked as int32 (luminal's)."""
    return {k: (v.to(torch.int32) if v.dtype == torch.int64 else v).detach().contiguous()
            for k, v in model.state_dict().items()}


def init(args):
    torch.manual_seed(args.seed)
    model = MODELS[args.model]()
    tensors = state_tensors(model)
    safetensors_interop.write(args.output, tensors, {"model": args.model, "written_by": f"torch {torch.__version__}"})
    print(f"wrote {args.output}: {len(tensors)} tensors of a torch-initialized {args.model}")


def shuffled_batches(n, batch_size, seed):
    """luminal::shuffled_batches(n, batch_size, seed, drop_last=true)."""
    rng = MT19937_64(seed)
    p = list(range(n))
    for i in range(n, 1, -1):
        threshold = ((1 << 64) - i) % i  # unbiased: reject the first 2^64 mod i values
        while True:
            r = rng()
            if r >= threshold:
                break
        j = r % i
        p[i - 1], p[j] = p[j], p[i - 1]
    return [p[b * batch_size : (b + 1) * batch_size] for b in range(n // batch_size)]


def compare(args):
    import copy
    import math
    import subprocess
    import tempfile
    import time

    torch.manual_seed(args.seed)
    model = MODELS[args.model]()
    with tempfile.TemporaryDirectory() as work:
        start = os.path.join(work, "start.safetensors")
        safetensors_interop.write(start, state_tensors(model), {"model": args.model})
        command = [args.trainer, "--model", args.model, "--checkpoint", start, "--resume", "--epochs",
                   str(args.epochs), "--stop-after", "1", "--limit", str(args.limit), "--batch-size",
                   str(args.batch_size), "--lr", str(args.lr), "--weight-decay", str(args.weight_decay), "--seed",
                   str(args.seed), "--data", args.data, "--print-losses", str(args.steps)]
        print("$ " + " ".join(command), flush=True)
        run = subprocess.run(command, capture_output=True, text=True)
        if run.returncode != 0:
            sys.exit(f"the trainer failed ({run.returncode}):\n{run.stdout}\n{run.stderr}")
    luminal_losses = [float(line.split()[3]) for line in run.stdout.splitlines() if line.startswith("step ")]
    if len(luminal_losses) < args.steps:
        sys.exit(f"the trainer printed {len(luminal_losses)} losses, not {args.steps}:\n{run.stdout}")

    x, y = load_split("train", args.data)
    x, y = x[: args.limit], y[: args.limit]
    batches = shuffled_batches(len(y), args.batch_size, args.seed * 1000003 + 1)  # epoch 1
    total = len(batches) * args.epochs

    def train(model, dtype):
        """The first losses of torch's training in dtype, from the same start."""
        optimizer = torch.optim.AdamW(model.parameters(), lr=args.lr, weight_decay=args.weight_decay)
        model.train()
        losses = []
        for t, rows in enumerate(batches[: args.steps]):
            for group in optimizer.param_groups:  # the trainer's cosine decay over the whole run
                group["lr"] = 0.5 * args.lr * (1 + math.cos(math.pi * min(t / total, 1.0)))
            optimizer.zero_grad()
            loss = torch.nn.functional.cross_entropy(model(x[rows].to(dtype)), y[rows])
            loss.backward()
            optimizer.step()
            losses.append(loss.item())
        return model, optimizer, losses

    # Training amplifies rounding (BatchNorm over a batch, Adam's first steps): the float
    # tolerance is how far torch's own float32 run drifts from its float64 run.
    exact = copy.deepcopy(model).double()
    model, optimizer, torch_losses = train(model, torch.float32)
    _, _, exact_losses = train(exact, torch.float64)
    worst = drift = 0.0
    print(" step   luminal loss   torch loss   torch f64 loss   luminal vs torch   torch vs f64")
    for t in range(args.steps):
        ours, theirs, reference = luminal_losses[t], torch_losses[t], exact_losses[t]
        difference, own = abs(ours - theirs) / abs(theirs), abs(theirs - reference) / abs(reference)
        worst, drift = max(worst, difference), max(drift, own)
        print(f"{t + 1:5d}   {ours:.7f}      {theirs:.7f}    {reference:.7f}        {difference:.2e}           {own:.2e}")
    tolerance = max(args.tolerance, 2 * drift)
    print(f"largest relative difference over {args.steps} steps: {worst:.2e}; torch float32 vs float64: "
          f"{drift:.2e} (tolerance {tolerance:.2e})")
    for line in run.stdout.splitlines():
        if line.startswith("epoch "):
            print("luminal " + line)  # its time per step

    rows = batches[0]
    for _ in range(3):  # warm-up
        optimizer.zero_grad()
        torch.nn.functional.cross_entropy(model(x[rows]), y[rows]).backward()
        optimizer.step()
    begin = time.perf_counter()
    for t in range(args.time_steps):
        rows = batches[t % len(batches)]
        optimizer.zero_grad()
        torch.nn.functional.cross_entropy(model(x[rows]), y[rows]).backward()
        optimizer.step()
    elapsed = time.perf_counter() - begin
    print(f"torch {torch.__version__} ({torch.get_num_threads()} threads): "
          f"{1e3 * elapsed / args.time_steps:.1f} ms/step at batch {args.batch_size}")
    if worst > tolerance:
        sys.exit(f"the losses differ by more than {tolerance:.2e}")


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = parser.add_subparsers(dest="command", required=True)
    e = sub.add_parser("evaluate", help="test accuracy of a luminal checkpoint in PyTorch")
    e.add_argument("checkpoint")
    e.add_argument("--model", choices=tuple(MODELS))
    e.add_argument("--data", default=DATA)
    i = sub.add_parser("init", help="write a torch-initialized model for luminal to train")
    i.add_argument("output")
    i.add_argument("--model", choices=tuple(MODELS), default="mlp")
    i.add_argument("--seed", type=int, default=0)
    c = sub.add_parser("compare", help="the first losses of luminal's and PyTorch's training, side by side")
    c.add_argument("--trainer", required=True, help="the fashion_mnist program")
    c.add_argument("--model", choices=("cnn", "resnet"), default="cnn")  # the mlp's dropout masks differ
    c.add_argument("--steps", type=int, default=20)
    c.add_argument("--epochs", type=int, default=6, help="the cosine schedule's length, in epochs of --limit")
    c.add_argument("--limit", type=int, default=2560)
    c.add_argument("--batch-size", type=int, default=128)
    c.add_argument("--lr", type=float, default=1e-3)
    c.add_argument("--weight-decay", type=float, default=0.0)
    c.add_argument("--seed", type=int, default=1)
    c.add_argument("--tolerance", type=float, default=1e-5,
                   help="the least tolerance; twice torch's own float32 vs float64 drift if larger")
    c.add_argument("--time-steps", type=int, default=50, help="PyTorch steps timed after the comparison")
    c.add_argument("--data", default=DATA)
    args = parser.parse_args()
    {"evaluate": evaluate, "init": init, "compare": compare}[args.command](args)


if __name__ == "__main__":
    main()
