#!/usr/bin/env python3
"""Writes the seed corpus of the fuzz harnesses (tests/fuzz/corpus/), small files that
cover the formats' branches: valid files of every dtype (for GGUF, of every value type and
several tensor types), and one of each kind of hostile file that fuzzing or hand-made
files found (issue 18) or that the reader must refuse. Deterministic; run it again after
changing it:   python3 tests/fuzz/make_corpus.py"""
import gzip
import json
import os
import shutil
import struct

HERE = os.path.dirname(os.path.abspath(__file__))
CORPUS = os.path.join(HERE, "corpus")
# The folders this script writes, and so clears first; other harnesses' folders are left alone.
KINDS = ("safetensors", "idx", "checkpoint", "gguf", "bpe", "llama_hf")


def safetensors(tensors, metadata=None, raw_header=None, pad=b" "):
    """tensors: list of (name, dtype, shape, data bytes), laid out in order."""
    if raw_header is None:
        header, offset = {}, 0
        if metadata:
            header["__metadata__"] = metadata
        for name, dtype, shape, data in tensors:
            header[name] = {"dtype": dtype, "shape": shape, "data_offsets": [offset, offset + len(data)]}
            offset += len(data)
        raw_header = json.dumps(header, separators=(",", ":")).encode()
    raw_header += pad * ((8 - len(raw_header) % 8) % 8)
    return struct.pack("<Q", len(raw_header)) + raw_header + b"".join(t[3] for t in tensors)


def f32(*values):
    return struct.pack("<%df" % len(values), *values)


def idx(type_byte, dims, data):
    return bytes([0, 0, type_byte, len(dims)]) + b"".join(struct.pack(">I", d) for d in dims) + data


def gz(data):
    return gzip.compress(data, compresslevel=9, mtime=0)


# GGUF value type ids, and struct formats of the scalar ones
GGUF_SCALARS = {"u8": (0, "<B"), "i8": (1, "<b"), "u16": (2, "<H"), "i16": (3, "<h"), "u32": (4, "<I"),
                "i32": (5, "<i"), "f32": (6, "<f"), "bool": (7, "<?"), "u64": (10, "<Q"), "i64": (11, "<q"),
                "f64": (12, "<d")}
GGUF_STRING, GGUF_ARRAY = 8, 9


def gguf_str(text):
    data = text if isinstance(text, bytes) else text.encode()
    return struct.pack("<Q", len(data)) + data


def gguf_kv(key, kind, value):
    """kind: a scalar name, "string", or ("array", element kind) with a list value."""
    out = gguf_str(key)
    if kind == "string":
        return out + struct.pack("<I", GGUF_STRING) + gguf_str(value)
    if isinstance(kind, tuple):
        element = kind[1]
        out += struct.pack("<IIQ", GGUF_ARRAY, GGUF_STRING if element == "string" else GGUF_SCALARS[element][0], len(value))
        return out + b"".join(gguf_str(v) if element == "string" else struct.pack(GGUF_SCALARS[element][1], v)
                              for v in value)
    type_id, fmt = GGUF_SCALARS[kind]
    return out + struct.pack("<I", type_id) + struct.pack(fmt, value)


def gguf(kvs, tensors, version=3, alignment=32, counts=None):
    """kvs: encoded key/values (gguf_kv, or raw bytes); tensors: (name, ne, ggml type, data
    bytes[, offset to write instead of the true one]), laid out in order at multiples of
    `alignment`. counts: (tensor_count, kv_count) to write instead of the true ones."""
    infos, data = b"", b""
    for name, ne, type_id, payload, *offset in tensors:
        data += bytes((alignment - len(data) % alignment) % alignment)
        infos += gguf_str(name) + struct.pack("<I", len(ne)) + b"".join(struct.pack("<Q", n) for n in ne)
        infos += struct.pack("<IQ", type_id, offset[0] if offset else len(data))
        data += payload
    tensor_count, kv_count = counts or (len(tensors), len(kvs))
    out = b"GGUF" + struct.pack("<IQQ", version, tensor_count, kv_count) + b"".join(kvs) + infos
    if data:
        out += bytes((alignment - len(out) % alignment) % alignment)
    return out + data


# A tiny Hugging Face Llama (fuzz_llama_hf.cpp): 1 layer, width 8, 2 heads of 4, 1 key/value
# head, hidden 16, vocabulary 16, tied embeddings.
LLAMA_CONFIG = {"architectures": ["LlamaForCausalLM"], "hidden_act": "silu", "hidden_size": 8,
                "intermediate_size": 16, "num_hidden_layers": 1, "num_attention_heads": 2,
                "num_key_value_heads": 1, "vocab_size": 16, "max_position_embeddings": 32,
                "rms_norm_eps": 1e-05, "rope_theta": 10000.0, "attention_bias": False, "mlp_bias": False,
                "tie_word_embeddings": True, "pad_token_id": None, "model_type": "llama"}
LLAMA_SEPARATOR = b"\n--st--\n"  # between config.json and model.safetensors


def llama_tensors(config, dtype="BF16", untied=False):
    """The tensors `config` needs, Hugging Face's names, filled with a byte pattern."""
    w, h, v = config["hidden_size"], config["intermediate_size"], config["vocab_size"]
    d = w // config["num_attention_heads"]
    q, kv = config["num_attention_heads"] * d, config["num_key_value_heads"] * d
    shapes = [("model.embed_tokens.weight", [v, w]), ("model.norm.weight", [w])]
    if untied:
        shapes.append(("lm_head.weight", [v, w]))
    for l in range(config["num_hidden_layers"]):
        p = "model.layers.%d." % l
        shapes += [(p + "self_attn.q_proj.weight", [q, w]), (p + "self_attn.k_proj.weight", [kv, w]),
                   (p + "self_attn.v_proj.weight", [kv, w]), (p + "self_attn.o_proj.weight", [w, q]),
                   (p + "mlp.gate_proj.weight", [h, w]), (p + "mlp.up_proj.weight", [h, w]),
                   (p + "mlp.down_proj.weight", [w, h]), (p + "input_layernorm.weight", [w]),
                   (p + "post_attention_layernorm.weight", [w])]
    out = []
    for k, (name, shape) in enumerate(shapes):
        n = 1
        for extent in shape:
            n *= extent
        values = [0.01 * ((k * 7 + i) % 23 - 11) for i in range(n)]
        data = struct.pack("<%de" % n, *values) if dtype == "F16" else f32(*values)
        if dtype == "BF16":
            data = b"".join(data[i + 2:i + 4] for i in range(0, len(data), 4))
        out.append((name, dtype, shape, data))
    return out


def llama_hf(config, tensors=None, header_pad=None, **changes):
    """config.json (a dict, with `changes`, or raw bytes), the separator and model.safetensors
    (tensors; none: no separator, no weights). header_pad: the header's padding, instead of
    spaces to a multiple of 8 (to misalign the data)."""
    if isinstance(config, dict):
        config = json.dumps(dict(config, **changes), indent=2).encode()
    if tensors is None:
        return config
    weights = safetensors(tensors)
    if header_pad is not None:
        length = struct.unpack("<Q", weights[:8])[0]
        header = weights[8:8 + length].rstrip(b" ") + header_pad
        weights = struct.pack("<Q", len(header)) + header + weights[8 + length:]
    return config + LLAMA_SEPARATOR + weights


def write(kind, name, data):
    os.makedirs(os.path.join(CORPUS, kind), exist_ok=True)
    with open(os.path.join(CORPUS, kind, name), "wb") as out:
        out.write(data)


def main():
    for kind in KINDS:
        shutil.rmtree(os.path.join(CORPUS, kind), ignore_errors=True)
    # ---- safetensors ----
    every = [("b", "BOOL", [3], b"\x01\x00\x01"), ("d", "F64", [2], struct.pack("<2d", 1.5, -2.0)),
             ("f", "F32", [2, 2], f32(1, 2, 3, 4)), ("i", "I32", [], struct.pack("<i", -7)),
             ("z", "F32", [0, 3], b"")]
    write("safetensors", "every_dtype", safetensors(every, {"epoch": "3", "note": "\u00e9\n"}))
    write("safetensors", "empty", safetensors([]))
    write("safetensors", "metadata_null", safetensors([], raw_header=b'{"__metadata__":null}'))
    write("safetensors", "deep_shape", safetensors([], raw_header=b'{"w":{"dtype":"F32","shape":' +
                                                    b"[" * 200 + b"]" * 200 + b',"data_offsets":[0,0]}}'))
    write("safetensors", "deep_offsets", safetensors([], raw_header=b'{"w":{"dtype":"F32","shape":[0],'
                                                      b'"data_offsets":' + b"[" * 200 + b"]" * 200 + b"}}"))
    write("safetensors", "nul_padding", safetensors([("w", "F32", [1], f32(1))], pad=b"\0"))
    write("safetensors", "dtype_twice", safetensors([("w", "F32", [1], f32(1))], raw_header=(
        b'{"w":{"dtype":"F64","dtype":"F32","shape":[1],"data_offsets":[0,4]}}')))
    write("safetensors", "escapes", safetensors([("w", "F32", [1], f32(1))], raw_header=(
        b'{"\\ud83d\\ude00\\u0000\\n":{"dtype":"F32","shape":[1],"data_offsets":[0,4],"x":[1,-2.5e3,true,null,{}]}}')))
    write("safetensors", "empty_overflowing_strides", safetensors([], raw_header=(
        b'{"e":{"dtype":"F32","shape":[0,1099511627776,1099511627776],"data_offsets":[0,0]}}')))

    # ---- IDX ----
    write("idx", "u8", idx(0x08, [2, 3], bytes(range(6))))
    write("idx", "f32_gzip", gz(idx(0x0D, [2], struct.pack(">2f", 1.5, -2))))
    write("idx", "f64", idx(0x0E, [1, 1], struct.pack(">d", 3.25)))
    write("idx", "i16_gzip", gz(idx(0x0B, [3], struct.pack(">3h", -1, 2, 300))))
    write("idx", "zero_extent", idx(0x0C, [0, 5], b""))
    write("idx", "zero_then_huge", bytes.fromhex("00000803" "00000000" "ffffffff" "ffffffff"))
    write("idx", "gzip_trailing_garbage", gz(idx(0x08, [2], b"\x01\x02")) + b"garbage")
    write("idx", "gzip_two_members", gz(idx(0x08, [2], b"\x01\x02")) + gz(b"\x03"))
    write("idx", "gzip_trailing_data", gz(idx(0x08, [2], b"\x01\x02") + bytes(5000)))

    # ---- GGUF ----
    every_value = [gguf_kv("general.architecture", "string", "llama"), gguf_kv("llama.block_count", "u32", 2),
                   gguf_kv("u8", "u8", 200), gguf_kv("i8", "i8", -3), gguf_kv("u16", "u16", 60000),
                   gguf_kv("i16", "i16", -300), gguf_kv("i32", "i32", -7), gguf_kv("u64", "u64", 2**63),
                   gguf_kv("i64", "i64", -(2**40)), gguf_kv("f32", "f32", 1e-5), gguf_kv("f64", "f64", 1e300),
                   gguf_kv("yes", "bool", True),
                   gguf_kv("tokenizer.ggml.tokens", ("array", "string"), ["<s>", "\u0120the", ""]),
                   gguf_kv("tokenizer.ggml.token_type", ("array", "i32"), [3, 1, 1]),
                   gguf_kv("tokenizer.ggml.scores", ("array", "f32"), [0.0, -1.5, 2.0]),
                   gguf_kv("wide", ("array", "u64"), [1, 2**64 - 1]), gguf_kv("flags", ("array", "bool"), [True, False])]
    every_type = [("f32", [3], 0, f32(1, 2, 3)), ("f16", [2, 2], 1, bytes(8)), ("q4_0", [32, 2], 2, bytes(range(36))),
                  ("q4_1", [32], 3, bytes(20)), ("q8_0", [64, 1, 1], 8, bytes(68)), ("bf16", [1, 1, 1, 2], 30, bytes(4)),
                  ("q6_k", [256], 14, bytes(210))]
    write("gguf", "every_value_and_type", gguf(every_value, every_type))
    write("gguf", "version2", gguf(every_value[:2], every_type[:1], version=2))
    write("gguf", "alignment_64", gguf([gguf_kv("general.alignment", "u32", 64)], every_type[:3], alignment=64))
    write("gguf", "header_only", gguf([], []))
    write("gguf", "version1", gguf([], [], version=1))
    write("gguf", "big_endian", b"GGUF" + struct.pack(">IQQ", 3, 0, 0))
    write("gguf", "nested_array", gguf([gguf_str("n") + struct.pack("<IIQIQ", GGUF_ARRAY, GGUF_ARRAY, 1, 4, 0)], []))
    write("gguf", "huge_array", gguf([gguf_str("a") + struct.pack("<IIQ", GGUF_ARRAY, 4, 2**61)], []))
    write("gguf", "huge_kv_count", gguf(every_value[:1], [], counts=(0, 2**62)))
    write("gguf", "string_past_end", gguf([gguf_str("s") + struct.pack("<IQ", GGUF_STRING, 1000) + b"short"], []))
    write("gguf", "bad_alignment", gguf([gguf_kv("general.alignment", "u32", 48)], []))
    write("gguf", "unaligned_offset", gguf([], [("w", [4], 0, f32(1, 2, 3, 4) + bytes(4), 4)]))
    write("gguf", "dims_overflow", gguf([], [("w", [2**32, 2**32], 0, b"")]))
    write("gguf", "unknown_ggml_type", gguf([], [("w", [4], 99, bytes(16))]))
    write("gguf", "row_not_whole_blocks", gguf([], [("w", [33], 2, bytes(36))]))
    write("gguf", "tensor_past_end", gguf([], [("w", [64, 64], 8, bytes(100))]))
    write("gguf", "duplicate_key", gguf([gguf_kv("k", "u8", 1), gguf_kv("k", "u8", 2)], []))
    write("gguf", "duplicate_tensor", gguf([], [("w", [4], 0, bytes(16)), ("w", [4], 0, bytes(16))]))
    write("gguf", "invalid_utf8_key", gguf([gguf_kv(b"k\xff", "u8", 1)], []))
    write("gguf", "bool_two", gguf([gguf_str("b") + struct.pack("<IB", 7, 2)], []))

    # ---- checkpoints of the fuzz model: Linear "fc" 4 -> 3, AdamW ----
    weight, bias = f32(*[0.1 * k for k in range(12)]), f32(0.5, -0.5, 0)
    params = [("fc.bias", "F32", [3], bias), ("fc.weight", "F32", [3, 4], weight)]
    state = [("optimizer.exp_avg.fc.bias", "F32", [3], f32(0, 0, 0)),
             ("optimizer.exp_avg.fc.weight", "F32", [3, 4], f32(*[0] * 12)),
             ("optimizer.exp_avg_sq.fc.bias", "F32", [3], f32(1, 1, 1)),
             ("optimizer.exp_avg_sq.fc.weight", "F32", [3, 4], f32(*[1] * 12))]
    meta = {"luminal.step": "10", "luminal.optimizer": "adamw"}
    write("checkpoint", "trained", safetensors(params + state, meta))
    write("checkpoint", "parameters_only", safetensors(params))
    write("checkpoint", "state_without_step", safetensors(params + state))
    write("checkpoint", "wrong_shape", safetensors([("fc.bias", "F32", [4], f32(0, 0, 0, 0))] + params[1:]))
    write("checkpoint", "nan_weight", safetensors([params[0], ("fc.weight", "F32", [3, 4], f32(*[float("nan")] * 12))]))
    write("checkpoint", "negative_second_moment", safetensors(params + state[:2] + [
        ("optimizer.exp_avg_sq.fc.bias", "F32", [3], f32(-1, -1, -1)), state[3]], meta))
    write("checkpoint", "bad_step", safetensors(params + state, {"luminal.step": "-5"}))
    # ---- BPE (fuzz_bpe.cpp): the first byte is the mode (bit 2: decode; bits 0-1: smollm, gpt2,
    # llama3; bit 3: as_text / 4-byte ids; bit 4: refuse unknown bytes / skip specials) ----
    seeds = {
     "encode_smollm_chat": (0, "<|im_start|>user\nHi 42, I'm here!<|im_end|>\n<|im_start|>assistant\n".encode()),
     "encode_gpt2_contractions": (1, "I'm can't we'RE you've 'll 'd x?!'s".encode()),
     "encode_llama3_newlines": (2, "WE'RE ſ 'ſ\n\n  x\r\n\t 1234567 ?!\n\nok".encode()),
     "encode_whitespace_runs": (0, " \t\n \u3000\u00a0\u2028 a   b\t\tc  \n".encode()),
     "encode_digits_many_scripts": (0, "v1.25 ² ½ ① Ⅻ ٣٤ ११ １２ \U00010d40 \U00011de0 \U00016ff4".encode()),
     "encode_scripts_marks_emoji": (1, "Café e\u0301 Ελληνικά Русский 你好 한국어 👨‍👩‍👧 🇺🇸 ❤️".encode()),
     "encode_unknown_bytes_dropped": (0, "a\x04b \U000e0067\U000e007f \U00040000".encode()),
     "encode_unknown_bytes_refused": (16, "a\x04b".encode()),
     "encode_specials_as_text": (8, "<|im_start|>x<|im_start|><tool>".encode()),
     "encode_specials_overlap": (0, "<|im_start|>x<|im_start|<|im_start|>>".encode()),
     "encode_long_piece": (0, ("hello" * 30 + " " * 70 + "a" * 100).encode()),
     "encode_invalid_truncated": (0, b"ab\xc3"),
     "encode_invalid_overlong": (1, b"a\xc0\x80"),
     "encode_invalid_surrogate": (2, b"xy\xed\xa0\x80"),
     "encode_invalid_above_max": (0, b"\xf4\x90\x80\x80"),
     "encode_invalid_continuation": (0, b"ok \x80 \xbf"),
     "encode_empty": (0, b""),
     "decode_emoji_bytes": (4, struct.pack("<5H", 10813, 242, 218, 216, 17)),
     "decode_split_characters": (4, struct.pack("<4H", 242, 218, 10813, 81)),
     "decode_out_of_range": (4, struct.pack("<3H", 81, 49152, 65535)),
     "decode_wide_ids": (12, struct.pack("<3i", 1, 81, -7)),
     "decode_skip_specials": (20, struct.pack("<4H", 1, 4093, 198, 2)),
     "decode_lone_bytes": (4, struct.pack("<6H", 128, 226, 97, 240, 159, 255)),
    }
    for name, (mode, payload) in seeds.items():
        write("bpe", name, bytes([mode]) + payload)

    # ---- Hugging Face Llama folders: config.json, the separator, model.safetensors ----
    tiny = LLAMA_CONFIG
    untied = dict(tiny, tie_word_embeddings=False)
    write("llama_hf", "tiny_bf16_tied", llama_hf(tiny, llama_tensors(tiny)))
    write("llama_hf", "tiny_f32_untied", llama_hf(untied, llama_tensors(untied, "F32", untied=True)))
    write("llama_hf", "tiny_f16_rope_parameters", llama_hf(
        tiny, llama_tensors(tiny, "F16"), head_dim=4, rope_theta=None,
        rope_parameters={"rope_theta": 5000.0, "rope_type": "default"}))
    # the data at 2 bytes past a multiple of 4: F32 tensors are read from aligned copies
    write("llama_hf", "f32_unaligned", llama_hf(tiny, llama_tensors(tiny, "F32"), header_pad=b"  "))
    write("llama_hf", "no_weights", llama_hf(tiny))
    write("llama_hf", "missing_tensor", llama_hf(tiny, llama_tensors(tiny)[:-3]))
    write("llama_hf", "bad_json", llama_hf(b'{"architectures": ["LlamaForCausalLM"], "hidden_size": 8,,}',
                                           llama_tensors(tiny)))
    write("llama_hf", "wrong_architecture", llama_hf(tiny, llama_tensors(tiny), architectures=["MistralForCausalLM"]))
    write("llama_hf", "rope_llama3", llama_hf(tiny, llama_tensors(tiny), rope_scaling={
        "factor": 8.0, "low_freq_factor": 1.0, "high_freq_factor": 4.0,
        "original_max_position_embeddings": 8192, "rope_type": "llama3"}))
    misshapen = llama_tensors(tiny)
    misshapen[3] = (misshapen[3][0], "BF16", [8, 4], misshapen[3][3])  # k_proj [4, 8] as [8, 4]
    write("llama_hf", "misshapen_tensor", llama_hf(tiny, misshapen))
    f64 = llama_tensors(tiny)
    f64[1] = ("model.norm.weight", "F64", [8], struct.pack("<8d", *[1.0] * 8))
    write("llama_hf", "f64_tensor", llama_hf(tiny, f64))
    write("llama_hf", "huge_sizes", llama_hf(tiny, llama_tensors(tiny), hidden_size=10**15,
                                             intermediate_size=10**15, vocab_size=10**15))
    # found by fuzz_llama_hf: heads * head_dim = 2^64 wrapped to 0 rows (then a division by zero)
    wrapped = []
    for name, dtype, shape, data in llama_tensors(tiny):
        if "self_attn" in name:  # q, k, v [0, 8] and o [8, 0]: what 0 query rows would need
            shape, data = ([8, 0] if "o_proj" in name else [0, 8]), b""
        wrapped.append((name, dtype, shape, data))
    write("llama_hf", "heads_overflow", llama_hf(tiny, wrapped, num_attention_heads=2**32,
                                                 num_key_value_heads=2**32, head_dim=2**32))
    # found by fuzz_llama_hf: no vocab_size and an embedding of no rows opened a model of no tokens
    no_rows = llama_tensors(tiny)
    no_rows[0] = ("model.embed_tokens.weight", "BF16", [0, 8], b"")
    write("llama_hf", "vocab_zero", llama_hf(tiny, no_rows, vocab_size=None))


if __name__ == "__main__":
    main()
