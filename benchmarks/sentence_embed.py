"""The PyTorch peer of sentence_embed_bench: all-MiniLM-L6-v2 as transformers' BertModel
under torch.inference_mode, mean pooling and L2 normalization (what sentence-transformers
computes), on the token id batches the benchmark wrote. Prints `torch_* value` lines and
writes the embeddings (a list per batch) as JSON for the benchmark to compare."""
import argparse
import json
import sys

from bench_common import median_ms

parser = argparse.ArgumentParser()
parser.add_argument("--model-dir", required=True)
parser.add_argument("--ids", required=True)
parser.add_argument("--out", required=True)
parser.add_argument("--threads", type=int, default=2)
args = parser.parse_args()
try:
    import torch
    import transformers
except ImportError as e:
    print(f"torch_unavailable 1  ({e}: set LUMINAL_BENCH_PYTHON to a python with torch and transformers)")
    sys.exit(0)

torch.set_num_threads(args.threads)
model = transformers.AutoModel.from_pretrained(args.model_dir, dtype=torch.float32).eval()
batches = []
for b in json.load(open(args.ids)):
    shape = b["shape"]
    batches.append((torch.tensor(b["ids"]).reshape(shape), torch.tensor(b["mask"]).reshape(shape)))


def embed(ids, mask):
    hidden = model(input_ids=ids, attention_mask=mask).last_hidden_state
    m = mask.unsqueeze(-1).to(hidden.dtype)
    pooled = (hidden * m).sum(1) / m.sum(1)
    return torch.nn.functional.normalize(pooled, dim=-1)


outputs = []
with torch.inference_mode():
    def run():
        outputs.clear()
        for ids, mask in batches:
            outputs.append(embed(ids, mask))
    ms = median_ms(run, 1, 3)
sentences = sum(ids.shape[0] for ids, _ in batches)
print(f"torch_version {torch.__version__}")
print(f"torch_transformers {transformers.__version__}")
print(f"torch_sentences_per_s {sentences / (ms / 1e3):.1f}")
json.dump([o.tolist() for o in outputs], open(args.out, "w"))
