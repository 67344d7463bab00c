#!/usr/bin/env python3
"""The PyTorch peer of the Llama benchmark: a GGUF Llama-class model loaded by transformers
(dequantized to f32), eager, on the CPU, measured the way llama.cpp's llama-bench measures:

  pp<N>  prompt processing: one forward over a batch of N random token ids from an empty
         cache (logits of the last position only, as llama-bench asks llama.cpp for);
  tg<M>  generation: M forwards of one token each with the KV cache, starting from an empty
         cache (the tokens are random, as in llama-bench: no sampling is timed).

Each test runs once untimed, then --reps times, every rep from a fresh cache; the figure is
the mean of the reps' tokens/s with its standard deviation, as llama-bench reports
(avg_ts ± stddev_ts). The best rep is printed too. Lines for the C++ driver:

    torch_version <v>
    torch_transformers_version <v>
    torch_threads <n>
    torch_reps <n>
    torch_attention <eager|sdpa>
    torch_pp512 <mean tokens/s>       torch_pp512_stddev <t/s>   torch_pp512_best <t/s>
    torch_tg128 <mean tokens/s>       torch_tg128_stddev <t/s>   torch_tg128_best <t/s>

If torch or transformers cannot be imported it prints `torch_unavailable <reason>` and
exits 0. Install them with benchmarks/llama_peers.sh, then e.g.:

    build/peers/torch-venv/bin/python benchmarks/llama_torch.py \\
        --model SmolLM2-135M-Instruct.Q4_1.gguf --threads 2 --pp 512 --tg 128 --reps 5
"""
import argparse
import inspect
import os
import statistics
import sys
import time

os.environ.setdefault("TQDM_DISABLE", "1")  # transformers' GGUF conversion bar: noise in the driver's log
try:
    import torch
    import transformers
    from transformers import AutoModelForCausalLM, DynamicCache
except Exception as error:  # noqa: BLE001 - reported to the caller
    print(f"torch_unavailable {error}")
    sys.exit(0)


def load_model(path, attention="sdpa"):
    """The GGUF at `path`, dequantized to f32 by transformers."""
    folder, name = os.path.split(os.path.abspath(path))
    try:
        model = AutoModelForCausalLM.from_pretrained(folder, gguf_file=name, dtype=torch.float32,
                                                     attn_implementation=attention)
    except TypeError:  # transformers before `dtype` replaced `torch_dtype`
        model = AutoModelForCausalLM.from_pretrained(folder, gguf_file=name, torch_dtype=torch.float32,
                                                     attn_implementation=attention)
    return model.eval()


def cache_argument(model):
    """The name forward() takes the KV cache by: `cache` in newer transformers, which
    deprecate `past_key_values`."""
    return "cache" if "cache" in inspect.signature(model.forward).parameters else "past_key_values"


def prompt_step(model, n_tokens, generator):
    """One forward over n_tokens random ids into an empty cache; returns seconds."""
    ids = torch.randint(0, model.config.vocab_size, (1, n_tokens), generator=generator)
    cache = {cache_argument(model): DynamicCache()}
    start = time.perf_counter()
    model(input_ids=ids, use_cache=True, logits_to_keep=1, **cache)
    return time.perf_counter() - start


def generation_step(model, n_tokens, generator):
    """n_tokens forwards of one random id each, the cache growing from empty; returns seconds."""
    ids = torch.randint(0, model.config.vocab_size, (n_tokens, 1, 1), generator=generator)
    cache = {cache_argument(model): DynamicCache()}
    start = time.perf_counter()
    for i in range(n_tokens):
        model(input_ids=ids[i], use_cache=True, **cache)
    return time.perf_counter() - start


def measure(step, model, n_tokens, reps, generator):
    """tokens/s of `reps` timed runs after one untimed run: (mean, stddev, best)."""
    step(model, n_tokens, generator)
    rates = [n_tokens / step(model, n_tokens, generator) for _ in range(reps)]
    stddev = statistics.stdev(rates) if len(rates) > 1 else 0.0
    return statistics.mean(rates), stddev, max(rates)


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--model", required=True, help="a GGUF file transformers can load")
    parser.add_argument("--threads", type=int, default=0, help="torch threads (0: torch's default)")
    parser.add_argument("--pp", type=int, default=512, help="prompt tokens (0 skips the test)")
    parser.add_argument("--tg", type=int, default=128, help="generated tokens (0 skips the test)")
    parser.add_argument("--reps", type=int, default=5, help="timed repetitions of each test")
    parser.add_argument("--seed", type=int, default=1234)
    parser.add_argument("--attention", default="eager", choices=("eager", "sdpa"),
                        help="transformers' attention: eager by default, as torch's CPU sdpa (flash "
                             "attention) spends most of a one-token step in its kernel")
    args = parser.parse_args()
    if not os.path.isfile(args.model):
        print(f"torch_unavailable no model file {args.model}")
        return
    if args.reps < 1 or args.pp < 0 or args.tg < 0:
        parser.error("--reps must be at least 1, --pp and --tg not negative")

    if args.threads > 0:
        torch.set_num_threads(args.threads)
    transformers.utils.logging.disable_progress_bar()
    model = load_model(args.model, args.attention)
    generator = torch.Generator().manual_seed(args.seed)
    print(f"torch_version {torch.__version__}")
    print(f"torch_transformers_version {transformers.__version__}")
    print(f"torch_threads {torch.get_num_threads()}")
    print(f"torch_reps {args.reps}")
    print(f"torch_attention {args.attention}")
    with torch.inference_mode():
        for name, n_tokens, step in (("pp", args.pp, prompt_step), ("tg", args.tg, generation_step)):
            if n_tokens == 0:
                continue
            mean, stddev, best = measure(step, model, n_tokens, args.reps, generator)
            key = f"torch_{name}{n_tokens}"
            print(f"{key} {mean:.2f}")
            print(f"{key}_stddev {stddev:.2f}")
            print(f"{key}_best {best:.2f}", flush=True)


if __name__ == "__main__":
    main()
