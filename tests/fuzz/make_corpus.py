#!/usr/bin/env python3
"""Writes the seed corpus of the fuzz harnesses (tests/fuzz/corpus/), small files that
cover the formats' branches: valid files of every dtype, and one of each kind of hostile
file that fuzzing or hand-made files found (issue 18). Deterministic; run it again after
changing it:   python3 tests/fuzz/make_corpus.py"""
import gzip
import json
import os
import shutil
import struct

HERE = os.path.dirname(os.path.abspath(__file__))
CORPUS = os.path.join(HERE, "corpus")


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


def write(kind, name, data):
    os.makedirs(os.path.join(CORPUS, kind), exist_ok=True)
    with open(os.path.join(CORPUS, kind, name), "wb") as out:
        out.write(data)


def main():
    shutil.rmtree(CORPUS, ignore_errors=True)
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


if __name__ == "__main__":
    main()
