#!/usr/bin/env python3
"""Checks luminal's byte-level BPE tokenizer (luminal/text/bpe.hpp, through the bpe_tokenize
command) against Hugging Face tokenizers on SmolLM2's vocabulary at scale, and times both.

    pip install tokenizers gguf            # the reference (+ transformers torch for --transformers)
    g++ -std=c++20 -O2 -march=native -Iinclude benchmarks/bpe_tokenize.cpp -lutf8proc -o bpe_tokenize
    python3 benchmarks/bpe_compare.py --cli ./bpe_tokenize [--random 300000] [--transformers] [--time]

Strings: every line and every whole file of the fortunes corpus (/usr/share/games/fortunes,
Debian's `fortunes`), and --random strings from tests/fixtures/make_bpe_fixtures.py's
generator (many scripts, marks, emoji, digits, whitespace runs, contractions, special tokens
whole and broken, any code point). The reference is SmolLM2's original tokenizer rebuilt from
the GGUF (make_bpe_fixtures.original_tokenizer). For each string it counts the ids that differ
and whether decode(encode(s)) gives s back (less the bytes the vocabulary has no token for).

--pre-tokenizers also compares the pieces of luminal's gpt2, smollm and llama3 pre-tokenizers
with HF's (ByteLevel; Digits + ByteLevel; Split with Llama 3's expression) on every string.
--transformers also counts where transformers' own GGUF conversion (AutoTokenizer with
gguf_file=) differs from the original tokenizer. --time prints encode throughput (MB/s) on the
fortunes files: luminal (one thread) and HF (encode_batch on all threads, and one by one).
Exit status 1 if luminal differs from the reference anywhere.
"""
import argparse
import glob
import json
import os
import pathlib
import random
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent.parent / "tests" / "fixtures"))
import make_bpe_fixtures as fx  # noqa: E402


def fortunes():
    """(lines, whole files, file paths) of the fortunes corpus, the files that are UTF-8."""
    lines, files, paths = [], [], []
    for f in sorted(glob.glob("/usr/share/games/fortunes/**/*", recursive=True)):
        if os.path.isdir(f) or f.endswith((".dat", ".u8")) or os.path.islink(f):
            continue
        try:
            text = open(f, encoding="utf-8", errors="strict").read()
        except (UnicodeDecodeError, OSError):
            continue
        files.append(text)
        paths.append(f)
        lines += text.split("\n")
    return lines, files, paths


def run_cli(cli, vocab_json, texts):
    payload = "".join(json.dumps(t) + "\n" for t in texts)
    done = subprocess.run([cli, vocab_json, "encode"], input=payload.encode(), capture_output=True, check=True)
    out = done.stdout.decode().split("\n")[: len(texts)]
    if len(out) != len(texts):
        raise SystemExit(f"bpe_tokenize answered {len(out)} lines for {len(texts)} strings")
    return out


def compare(label, texts, reference, cli_lines, show=5):
    diffs, roundtrip, errors = 0, 0, 0
    for text, ref, line in zip(texts, reference, cli_lines):
        if line.startswith("error"):
            errors += 1
            if errors <= show:
                print(f"  error on {text[:80]!r}: {line}")
            continue
        ids_text, _, status = line.partition("\t")
        ids = [int(x) for x in ids_text.split()] if ids_text else []
        if ids != ref:
            diffs += 1
            if diffs <= show:
                print(f"  differs on {text[:80]!r}:\n    luminal {ids[:20]}\n    HF      {ref[:20]}")
        if status != "ok":
            roundtrip += 1
    print(f"{label}: {len(texts)} strings, {diffs} differ from HF, {roundtrip} round-trip failures, {errors} errors")
    return diffs + roundtrip + errors


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--gguf")
    parser.add_argument("--cli", required=True, help="the bpe_tokenize executable")
    parser.add_argument("--random", type=int, default=300000, help="random strings (default 300000)")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--transformers", action="store_true", help="also compare transformers' GGUF tokenizer")
    parser.add_argument("--time", action="store_true", help="encode throughput on the fortunes files")
    parser.add_argument("--pre-tokenizers", action="store_true", help="compare the pre-tokenizers' pieces too")
    parser.add_argument("--repeats", type=int, default=5)
    args = parser.parse_args()

    gguf_path = fx.find_gguf(args.gguf)
    vocab = fx.load_vocabulary(gguf_path)
    ref_tok = fx.original_tokenizer(vocab)
    work = tempfile.mkdtemp(prefix="bpe_compare_")
    vocab_json = os.path.join(work, "vocab.json")
    with open(vocab_json, "w") as f:
        json.dump(vocab, f)

    lines, files, paths = fortunes()
    rng = random.Random(args.seed)
    randoms = [fx.random_string(rng) for _ in range(args.random)]
    print(f"fortunes: {len(paths)} files, {len(lines)} lines; {len(randoms)} random strings; "
          f"reference: tokenizers {__import__('tokenizers').__version__}")
    failures = 0
    for label, texts in (("fortunes lines", lines), ("fortunes files", files), ("random strings", randoms)):
        if not texts:
            print(f"{label}: none (apt-get install fortunes)")
            continue
        reference = [e.ids for e in ref_tok.encode_batch(texts, add_special_tokens=False)]
        failures += compare(label, texts, reference, run_cli(args.cli, vocab_json, texts))

    if args.pre_tokenizers:
        for name, pre in fx.pre_tokenizers_by_name().items():
            texts = lines + randoms
            payload = "".join(json.dumps(t) + "\n" for t in texts).encode()
            out = subprocess.run([args.cli, "-", "split", name], input=payload, capture_output=True,
                                 check=True).stdout.decode().split("\n")[: len(texts)]
            differ = [(t, o) for t, o in zip(texts, out) if o.startswith("error") or json.loads(o) != fx.pieces(pre, t)]
            print(f"pre-tokenizer {name}: {len(texts)} strings, {len(differ)} differ from HF")
            for t, o in differ[:3]:
                print(f"  {t[:60]!r}: luminal {o[:100]} HF {fx.pieces(pre, t)[:8]}")
            failures += len(differ)

    if args.transformers:
        hf_gguf = fx.transformers_gguf_tokenizer(gguf_path).backend_tokenizer
        print(f"transformers {__import__('transformers').__version__} GGUF conversion, pre_tokenizer: "
              f"{json.loads(hf_gguf.to_str())['pre_tokenizer']}")
        for label, texts in (("fortunes lines", lines), ("fortunes files", files), ("random strings", randoms)):
            a = ref_tok.encode_batch(texts, add_special_tokens=False)
            b = hf_gguf.encode_batch(texts, add_special_tokens=False)
            differ = [(t, x.tokens, y.tokens) for t, x, y in zip(texts, a, b) if x.ids != y.ids]
            print(f"  {label}: transformers' GGUF tokenizer differs from the original on {len(differ)} of {len(texts)}")
            for t, x, y in differ[:3]:
                k = next(i for i in range(min(len(x), len(y)) + 1) if i >= min(len(x), len(y)) or x[i] != y[i])
                print(f"    {t[:60]!r}: original {x[max(0, k - 2):k + 4]} transformers {y[max(0, k - 2):k + 4]}")

    if args.time and files:
        # Wall time and CPU time, the best of --repeats: on a shared machine the wall time also
        # counts other processes' turns. HF's batch runs on all threads (its CPU time is theirs).
        total = sum(len(t.encode()) for t in files)
        out = subprocess.run([args.cli, vocab_json, "time", str(args.repeats)] + paths,
                             capture_output=True, check=True, text=True).stdout.split("\n")
        wall = sum(float(l.split()[3]) for l in out if l.startswith("bytes"))
        cpu = sum(float(l.split()[5]) for l in out if l.startswith("bytes"))
        print(f"encode throughput on {len(files)} fortunes files, {total / 1e6:.2f} MB (MB/s wall, MB/s CPU):")
        print(f"  luminal, one file at a time (1 thread):  {total / wall / 1e6:7.2f} {total / cpu / 1e6:7.2f}")
        for label, run in (("HF tokenizers, one file at a time", lambda: [ref_tok.encode(t, add_special_tokens=False) for t in files]),
                           (f"HF tokenizers, encode_batch ({os.cpu_count()} threads)", lambda: ref_tok.encode_batch(files, add_special_tokens=False))):
            best_wall = best_cpu = 1e30
            for _ in range(args.repeats):
                t0, c0 = time.perf_counter(), time.process_time()
                run()
                best_wall, best_cpu = min(best_wall, time.perf_counter() - t0), min(best_cpu, time.process_time() - c0)
            print(f"  {label + ':':40s} {total / best_wall / 1e6:7.2f} {total / best_cpu / 1e6:7.2f}")
    sys.exit(1 if failures else 0)


if __name__ == "__main__":
    main()
