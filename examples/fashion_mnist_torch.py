#!/usr/bin/python3
"""PyTorch reads what examples/fashion_mnist trains, and writes models it can start from.

    /usr/bin/python3 examples/fashion_mnist_torch.py evaluate model.safetensors
        loads a luminal checkpoint (parameters under torch.nn's names; the optimizer
        state is skipped) into the same model built from torch.nn, runs it on the
        Fashion-MNIST test set and prints its accuracy: it matches what the luminal
        trainer printed for that epoch.

    /usr/bin/python3 examples/fashion_mnist_torch.py init --model cnn torch_init.safetensors
        writes a freshly initialized torch.nn model (parameters only);
        `fashion_mnist --model cnn --checkpoint torch_init.safetensors --resume` then
        trains it in luminal.

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
    if name not in ("mlp", "cnn"):
        sys.exit(f"{args.checkpoint}: no 'model' in its metadata; pass --model mlp|cnn")
    model = MLP() if name == "mlp" else CNN()
    params = {k: v for k, v in tensors.items() if not k.startswith("optimizer.")}
    model.load_state_dict(params, strict=True)  # every parameter, with its shape
    x, y = load_split("t10k", args.data)
    with torch.no_grad():
        predicted = torch.cat([model(x[i : i + 1000]).argmax(1) for i in range(0, len(x), 1000)])
    accuracy = (predicted == y).double().mean().item()
    print(f"{args.checkpoint}: {name}, epoch {metadata.get('epoch', '?')}, step {metadata.get('luminal.step', '?')}")
    print(f"torch {torch.__version__} test accuracy {accuracy:.4f}")


def init(args):
    torch.manual_seed(args.seed)
    model = MLP() if args.model == "mlp" else CNN()
    tensors = {k: v.detach().contiguous() for k, v in model.state_dict().items()}
    safetensors_interop.write(args.output, tensors, {"model": args.model, "written_by": f"torch {torch.__version__}"})
    print(f"wrote {args.output}: {len(tensors)} tensors of a torch-initialized {args.model}")


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = parser.add_subparsers(dest="command", required=True)
    e = sub.add_parser("evaluate", help="test accuracy of a luminal checkpoint in PyTorch")
    e.add_argument("checkpoint")
    e.add_argument("--model", choices=("mlp", "cnn"))
    e.add_argument("--data", default=DATA)
    i = sub.add_parser("init", help="write a torch-initialized model for luminal to train")
    i.add_argument("output")
    i.add_argument("--model", choices=("mlp", "cnn"), default="mlp")
    i.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    evaluate(args) if args.command == "evaluate" else init(args)


if __name__ == "__main__":
    main()
