#!/usr/bin/env python3
"""Writes a small synthetic dense checkpoint in the shape of a real model (Llama layout:
embeddings, attention q/k/v/o, SwiGLU MLP, RMSNorms, lm_head) so `quanta quantize` and
`quanta check` can be shown end to end on a fresh machine. Needs only numpy.

  python3 scripts/synth_checkpoint.py OUT_DIR [--layers 4] [--hidden 512] [--shards 2]

The weights are random (normal, std 0.02 like an initialised model, with a few larger
outlier columns as trained models have), so the quantization error is that of
Gaussian-like data.
"""
import argparse
import json
import os
import struct

import numpy as np


def bf16_bytes(a: np.ndarray) -> bytes:
    """float32 -> bfloat16 with round-to-nearest-even (numpy has no bfloat16)."""
    u = np.ascontiguousarray(a, dtype=np.float32).view(np.uint32)
    rounded = (u + 0x7FFF + ((u >> 16) & 1)) >> 16
    return rounded.astype(np.uint16).tobytes()


def encode(a: np.ndarray, dtype: str) -> bytes:
    if dtype == "BF16":
        return bf16_bytes(a)
    if dtype == "F16":
        return np.ascontiguousarray(a, dtype=np.float16).tobytes()
    return np.ascontiguousarray(a, dtype=np.float32).tobytes()


def write_safetensors(path: str, tensors: dict, dtype: str) -> None:
    """The safetensors layout by hand: u64 header length, JSON header, contiguous data."""
    header, blobs, offset = {"__metadata__": {"format": "pt"}}, [], 0
    for name in sorted(tensors):
        data = encode(tensors[name], dtype)
        header[name] = {"dtype": dtype, "shape": list(tensors[name].shape),
                        "data_offsets": [offset, offset + len(data)]}
        blobs.append(data)
        offset += len(data)
    text = json.dumps(header, separators=(",", ":")).encode()
    text += b" " * ((8 - len(text) % 8) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(text)))
        f.write(text)
        for b in blobs:
            f.write(b)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("out")
    p.add_argument("--layers", type=int, default=4)
    p.add_argument("--hidden", type=int, default=512)
    p.add_argument("--intermediate", type=int, default=1408)
    p.add_argument("--heads", type=int, default=8)
    p.add_argument("--kv-heads", type=int, default=2)
    p.add_argument("--vocab", type=int, default=8192)
    p.add_argument("--dtype", choices=["BF16", "F16", "F32"], default="BF16")
    p.add_argument("--shards", type=int, default=1, help="split into this many files + index")
    p.add_argument("--seed", type=int, default=0)
    a = p.parse_args()

    rng = np.random.default_rng(a.seed)
    head_dim = a.hidden // a.heads

    def linear(n_out, n_in):
        w = rng.standard_normal((n_out, n_in), dtype=np.float32) * 0.02
        cols = rng.choice(n_in, size=max(1, n_in // 256), replace=False)
        w[:, cols] *= 8.0  # outlier input channels
        return w

    def norm(n):
        return (1.0 + 0.05 * rng.standard_normal(n)).astype(np.float32)

    t = {"model.embed_tokens.weight": linear(a.vocab, a.hidden),
         "model.norm.weight": norm(a.hidden),
         "lm_head.weight": linear(a.vocab, a.hidden)}
    for i in range(a.layers):
        pre = f"model.layers.{i}."
        t[pre + "input_layernorm.weight"] = norm(a.hidden)
        t[pre + "post_attention_layernorm.weight"] = norm(a.hidden)
        t[pre + "self_attn.q_proj.weight"] = linear(a.heads * head_dim, a.hidden)
        t[pre + "self_attn.k_proj.weight"] = linear(a.kv_heads * head_dim, a.hidden)
        t[pre + "self_attn.v_proj.weight"] = linear(a.kv_heads * head_dim, a.hidden)
        t[pre + "self_attn.o_proj.weight"] = linear(a.hidden, a.heads * head_dim)
        t[pre + "mlp.gate_proj.weight"] = linear(a.intermediate, a.hidden)
        t[pre + "mlp.up_proj.weight"] = linear(a.intermediate, a.hidden)
        t[pre + "mlp.down_proj.weight"] = linear(a.hidden, a.intermediate)

    os.makedirs(a.out, exist_ok=True)
    names = sorted(t)
    if a.shards <= 1:
        write_safetensors(os.path.join(a.out, "model.safetensors"), t, a.dtype)
    else:
        weight_map, total = {}, 0
        per = -(-len(names) // a.shards)
        for s in range(a.shards):
            part = {n: t[n] for n in names[s * per:(s + 1) * per]}
            fname = f"model-{s + 1:05d}-of-{a.shards:05d}.safetensors"
            write_safetensors(os.path.join(a.out, fname), part, a.dtype)
            for n in part:
                weight_map[n] = fname
                total += t[n].size * (4 if a.dtype == "F32" else 2)
        with open(os.path.join(a.out, "model.safetensors.index.json"), "w") as f:
            json.dump({"metadata": {"total_size": total}, "weight_map": weight_map}, f, indent=2)

    config = {
        "architectures": ["LlamaForCausalLM"], "model_type": "llama",
        "hidden_size": a.hidden, "intermediate_size": a.intermediate,
        "num_hidden_layers": a.layers, "num_attention_heads": a.heads,
        "num_key_value_heads": a.kv_heads, "vocab_size": a.vocab, "rms_norm_eps": 1e-5,
        "rope_theta": 10000.0, "max_position_embeddings": 4096, "tie_word_embeddings": False,
        "torch_dtype": {"BF16": "bfloat16", "F16": "float16", "F32": "float32"}[a.dtype],
    }
    with open(os.path.join(a.out, "config.json"), "w") as f:
        json.dump(config, f, indent=2)
    params = sum(v.size for v in t.values())
    print(f"wrote {a.out}: {len(t)} tensors, {params / 1e6:.1f} M params, {a.dtype}, "
          f"{max(1, a.shards)} file(s)")


if __name__ == "__main__":
    main()
