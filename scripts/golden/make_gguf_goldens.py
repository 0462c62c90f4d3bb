#!/usr/bin/env python3
"""Writes the GGUF block golden vectors under tests/golden/gguf/ using gguf-py (never quanta).

For the encodable types (q4_0, q4_1, q5_0, q5_1, q8_0):
    <type>.input.f32    f32 input, ROWS x COLS_32, row-major, little-endian
    <type>.quant.bin    gguf.quantize(input, type) bytes
    <type>.dequant.f32  gguf.dequantize(quant, type)
For the K-quants (q2_K .. q6_K, decode only in quanta):
    <type>.quant.bin    random block bytes with the f16 d / dmin fields set to small finite values
    <type>.dequant.f32  gguf.dequantize(quant, type)
MANIFEST.json records shapes, seed, byte counts, sha256 and the package versions.

Usage: python3 scripts/golden/make_gguf_goldens.py [--out DIR]
"""
from __future__ import annotations

import argparse
import hashlib
import json
import platform
import sys
from importlib.metadata import version
from pathlib import Path

import numpy as np

import gguf
from gguf import GGML_QUANT_SIZES, GGMLQuantizationType as T

SEED = 20250611
ROWS = 6
COLS_32 = 256  # 8 blocks of 32 per row
COLS_K = 512  # 2 super-blocks of 256 per row
ENCODABLE = {"q4_0": T.Q4_0, "q4_1": T.Q4_1, "q5_0": T.Q5_0, "q5_1": T.Q5_1, "q8_0": T.Q8_0}
K_QUANTS = {"q2_K": T.Q2_K, "q3_K": T.Q3_K, "q4_K": T.Q4_K, "q5_K": T.Q5_K, "q6_K": T.Q6_K}
# Byte offsets of the f16 super-block scales in each K block (ggml-common.h).
K_F16_FIELDS = {"q2_K": (80, 82), "q3_K": (108,), "q4_K": (0, 2), "q5_K": (0, 2), "q6_K": (208,)}
MAX_TOTAL_BYTES = 300_000


def make_input(rng: np.random.Generator) -> np.ndarray:
    """ROWS x COLS_32 f32 with the edge cases the encoders branch on."""
    x = rng.standard_normal((ROWS, COLS_32)).astype(np.float32)
    blocks = x.reshape(ROWS, -1, 32)
    # Row 0: unit scale. Row 1: small scale, and block 1 exactly zero (d = 0, id = 0 path).
    blocks[1] *= np.float32(0.01)
    blocks[1, 1] = 0.0
    # Row 2: large scale; in every block the element of largest |x| is negative, so the
    # signed max of Q4_0/Q5_0 is negative and d comes out positive.
    blocks[2] *= np.float32(37.5)
    imax = np.abs(blocks[2]).argmax(axis=-1)
    blocks[2, np.arange(blocks.shape[1]), imax] = -np.abs(blocks[2, np.arange(blocks.shape[1]), imax])
    # Row 3: a different scale per block (1e-3 .. 1e3), one constant block (Q4_1 d = 0 with
    # m != 0), one block whose largest |x| is a +/- tie (argmax takes the first: positive).
    blocks[3] *= (10.0 ** rng.uniform(-3, 3, size=(blocks.shape[1], 1))).astype(np.float32)
    blocks[3, 6] = np.float32(0.75)
    blocks[3, 7] = np.clip(blocks[3, 7], -1.5, 1.5)
    blocks[3, 7, 5] = np.float32(2.0)
    blocks[3, 7, 9] = np.float32(-2.0)
    # Rows 4, 5: values on a coarse grid (integers, quarters). x * id then often lands on or
    # next to a rounding boundary, so any change of operation order shows up in the bytes
    # (e.g. (max - min) * (1/15) instead of / 15 flips ~10% of these Q4_1 blocks).
    blocks[4] = rng.integers(-20, 21, size=blocks[4].shape).astype(np.float32)
    blocks[5] = (rng.integers(-64, 65, size=blocks[5].shape) / 4).astype(np.float32)
    assert not np.any(np.signbit(x) & (x == 0)), "no -0: numpy's min of +-0 is lane-dependent"
    return np.ascontiguousarray(blocks.reshape(ROWS, COLS_32))


def make_k_blocks(rng: np.random.Generator, name: str, qtype: T) -> np.ndarray:
    """Random K-quant block bytes (ROWS x COLS_K elements) with small finite f16 scales."""
    block_size, type_size = GGML_QUANT_SIZES[qtype]
    n_blocks = ROWS * COLS_K // block_size
    raw = rng.integers(0, 256, size=(n_blocks, type_size), dtype=np.uint8)
    for off in K_F16_FIELDS[name]:
        mag = (2.0 ** rng.uniform(-12, 2, size=n_blocks)).astype(np.float32)
        sign = np.where(rng.random(n_blocks) < 0.25, -1.0, 1.0).astype(np.float32)
        raw[:, off:off + 2] = (mag * sign).astype(np.float16).reshape(-1, 1).view(np.uint8)
    # Block 1 gets a subnormal f16 d (bits 0x0003) and block 2 a zero d: the f16 decode edges.
    raw[1, K_F16_FIELDS[name][0]:K_F16_FIELDS[name][0] + 2] = (3, 0)
    raw[2, K_F16_FIELDS[name][0]:K_F16_FIELDS[name][0] + 2] = (0, 0)
    return raw.reshape(ROWS, COLS_K // block_size * type_size)


def write(out: Path, name: str, arr: np.ndarray, files: dict) -> None:
    data = np.ascontiguousarray(arr).astype(arr.dtype.newbyteorder("<"), copy=False).tobytes()
    (out / name).write_bytes(data)
    files[name] = {"bytes": len(data), "sha256": hashlib.sha256(data).hexdigest()}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    default_out = Path(__file__).resolve().parents[2] / "tests" / "golden" / "gguf"
    ap.add_argument("--out", type=Path, default=default_out)
    args = ap.parse_args()
    out: Path = args.out
    out.mkdir(parents=True, exist_ok=True)

    rng = np.random.default_rng(SEED)
    x = make_input(rng)
    types: dict = {}
    files: dict = {}

    for name, qtype in ENCODABLE.items():
        block_size, type_size = GGML_QUANT_SIZES[qtype]
        q = gguf.quantize(x, qtype)
        y = gguf.dequantize(q, qtype)
        assert q.dtype == np.uint8 and q.shape == (ROWS, COLS_32 // block_size * type_size)
        assert y.dtype == np.float32 and y.shape == x.shape and np.all(np.isfinite(y))
        # The reconstruction error of these round-to-nearest codecs is at most one step d.
        assert np.all(np.abs(y - x) <= np.abs(x).max() / 3.0 + 1e-6), name
        write(out, f"{name}.input.f32", x, files)
        write(out, f"{name}.quant.bin", q, files)
        write(out, f"{name}.dequant.f32", y, files)
        types[name] = {"ggml_type": qtype.name, "mode": "encode+decode", "rows": ROWS,
                       "cols": COLS_32, "block_elems": block_size, "block_bytes": type_size,
                       "files": [f"{name}.input.f32", f"{name}.quant.bin", f"{name}.dequant.f32"]}

    for name, qtype in K_QUANTS.items():
        block_size, type_size = GGML_QUANT_SIZES[qtype]
        q = make_k_blocks(rng, name, qtype)
        y = gguf.dequantize(q, qtype)
        assert y.dtype == np.float32 and y.shape == (ROWS, COLS_K) and np.all(np.isfinite(y))
        write(out, f"{name}.quant.bin", q, files)
        write(out, f"{name}.dequant.f32", y, files)
        types[name] = {"ggml_type": qtype.name, "mode": "decode", "rows": ROWS, "cols": COLS_K,
                       "block_elems": block_size, "block_bytes": type_size,
                       "files": [f"{name}.quant.bin", f"{name}.dequant.f32"]}

    manifest = {
        "generator": "scripts/golden/make_gguf_goldens.py",
        "oracle": "gguf-py quantize()/dequantize() (gguf/quants.py)",
        "seed": SEED,
        "layout": "raw little-endian, row-major; .f32 = float32, .bin = ggml block bytes",
        "versions": {"gguf": version("gguf"), "numpy": np.__version__,
                     "python": platform.python_version()},
        "types": types,
        "files": files,
    }
    (out / "MANIFEST.json").write_text(json.dumps(manifest, indent=2) + "\n")

    total = sum(f["bytes"] for f in files.values()) + (out / "MANIFEST.json").stat().st_size
    assert total < MAX_TOTAL_BYTES, total
    print(f"wrote {len(files)} files + MANIFEST.json to {out} ({total} bytes)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
