#!/usr/bin/env python3
"""Golden vectors from the formats' owners, for quanta's bit-exactness tests.

Uses MLX (`pip install "mlx[cpu]"`) for affine / mxfp4 / mxfp8 / nvfp4 quantize, dequantize
and quantized_matmul, and ml_dtypes for the fp8 / fp4 / e8m0 code tables. Never quanta.
Writes raw little-endian files under tests/golden/{mlx,ml_dtypes}/ and a MANIFEST.json per
folder recording shapes, seeds and package versions. Re-run:

    python3 scripts/golden/make_mlx_goldens.py
"""
import json
import pathlib
import platform
import sys

import ml_dtypes
import mlx.core as mx
import numpy as np

ROOT = pathlib.Path(__file__).resolve().parents[2] / "tests" / "golden"
SEED = 20261129
N, K, M = 4, 256, 3
DTYPES = {"f32": mx.float32, "f16": mx.float16, "bf16": mx.bfloat16}


def weights(rng, dtype_name):
    w = rng.standard_normal((N, K)).astype(np.float32)
    w *= rng.uniform(0.02, 4.0, (N, 1)).astype(np.float32)
    w[1, 0:32] = 0.0                    # an all-zero group
    w[1, 32:64] = 0.37                  # a constant group (zero range)
    w[2, 64:96] = np.abs(w[2, 64:96])   # a one-signed group
    w[3, 100] = -9.0                    # a dominant negative edge
    if dtype_name == "f16":
        return w.astype(np.float16)
    if dtype_name == "bf16":
        return w.astype(ml_dtypes.bfloat16)
    return w


def to_mx(a):
    if a.dtype == ml_dtypes.bfloat16:
        return mx.array(a.astype(np.float32)).astype(mx.bfloat16)
    return mx.array(a)


def raw(a):
    """Bytes of an mlx or numpy array, bf16 as its uint16 bits."""
    if isinstance(a, mx.array):
        if a.dtype == mx.bfloat16:
            return np.array(a.view(mx.uint16)).tobytes()
        return np.array(a).tobytes()
    if a.dtype == ml_dtypes.bfloat16:
        return a.view(np.uint16).tobytes()
    return a.tobytes()


def write(folder, name, data):
    (folder / name).write_bytes(data)
    return name


def mlx_cases():
    out = ROOT / "mlx"
    out.mkdir(parents=True, exist_ok=True)
    mx.set_default_device(mx.cpu)
    rng = np.random.default_rng(SEED)
    cases = []
    specs = [("affine", b, g) for b in (2, 3, 4, 5, 6, 8) for g in (32, 64, 128)]
    specs += [("mxfp4", 4, 32), ("mxfp8", 8, 32), ("nvfp4", 4, 16), ("nvfp4_global", 4, 16)]
    for mode, bits, group in specs:
        for dt in DTYPES:
            w = weights(rng, dt)
            wm = to_mx(w)
            name = f"{mode}_b{bits}_g{group}_{dt}"
            kw = dict(group_size=group, bits=bits, mode=mode.replace("_global", ""))
            if mode == "nvfp4_global":
                amax = mx.abs(wm.astype(mx.float32)).max()
                kw["global_scale"] = amax
            res = mx.quantize(wm, **kw)
            wq, scales = res[0], res[1]
            biases = res[2] if mode == "affine" else None
            dq_kw = dict(kw)
            # MLX 0.32 returns f32 from an nvfp4 dequantize with a global scale whatever
            # `dtype` says; cast so every file holds the case's dtype.
            dq = mx.dequantize(wq, scales, biases, dtype=DTYPES[dt], **dq_kw).astype(DTYPES[dt])
            case = {
                "name": name, "mode": kw["mode"], "bits": bits, "group": group, "dtype": dt,
                "n": N, "k": K,
                "input": write(out, f"{name}.w", raw(w)),
                "codes": write(out, f"{name}.codes", raw(wq)),
                "scales": write(out, f"{name}.scales", raw(scales)),
                "dequant": write(out, f"{name}.dequant", raw(dq)),
            }
            if biases is not None:
                case["biases"] = write(out, f"{name}.biases", raw(biases))
            if mode == "nvfp4_global":
                case["global_amax"] = float(np.array(kw["global_scale"]))
            if dt == "f32":  # the owner's matmul, for a check "within fp32 rounding"
                x = rng.standard_normal((M, K)).astype(np.float32)
                y = mx.quantized_matmul(mx.array(x), wq, scales, biases, transpose=True, **kw_no_global(kw))
                case["m"] = M
                case["x"] = write(out, f"{name}.x", raw(x))
                case["y"] = write(out, f"{name}.y", raw(y))
            cases.append(case)
    manifest = {
        "generator": "scripts/golden/make_mlx_goldens.py",
        "seed": SEED,
        "packages": {"mlx": mx.__version__, "numpy": np.__version__,
                     "ml_dtypes": ml_dtypes.__version__, "python": platform.python_version()},
        "layout": "row-major little-endian; codes as MLX's uint32 words; bf16 as uint16 bits; "
                  "w [n, k]; x [m, k] f32; y [m, n] f32 = quantized_matmul(x, w, transpose=True)",
        "cases": cases,
    }
    (out / "MANIFEST.json").write_text(json.dumps(manifest, indent=1) + "\n")


def kw_no_global(kw):
    return {k: v for k, v in kw.items() if k != "global_scale"}


def ml_dtypes_tables():
    out = ROOT / "ml_dtypes"
    out.mkdir(parents=True, exist_ok=True)
    codes = np.arange(256, dtype=np.uint8)
    tables = {}
    for name, t in [("e4m3fn", ml_dtypes.float8_e4m3fn), ("e5m2", ml_dtypes.float8_e5m2),
                    ("e8m0fnu", ml_dtypes.float8_e8m0fnu)]:
        tables[name] = write(out, f"{name}.decode.f32", codes.view(t).astype(np.float32).tobytes())
    tables["e2m1fn"] = write(out, "e2m1fn.decode.f32",
                             codes[:16].view(ml_dtypes.float4_e2m1fn).astype(np.float32).tobytes())
    # Encode probes: every representable value, every midpoint (ties), random values in range.
    rng = np.random.default_rng(SEED)
    enc = {}
    for name, t, mx_ in [("e4m3fn", ml_dtypes.float8_e4m3fn, 448.0), ("e5m2", ml_dtypes.float8_e5m2, 57344.0)]:
        vals = np.sort(np.unique(np.abs(codes.view(t).astype(np.float32))))
        vals = vals[np.isfinite(vals) & (vals <= mx_)]
        mids = ((vals[1:].astype(np.float64) + vals[:-1]) / 2).astype(np.float32)
        rnd = (rng.uniform(-1, 1, 2000) * mx_ * np.exp2(-rng.integers(0, 24, 2000))).astype(np.float32)
        probe = np.concatenate([vals, -vals, mids, -mids, np.nextafter(mids, 0), np.nextafter(mids, np.inf), rnd]).astype(np.float32)
        enc[name] = {"input": write(out, f"{name}.probe.f32", probe.tobytes()),
                     "codes": write(out, f"{name}.probe.codes", probe.astype(t).view(np.uint8).tobytes()),
                     "count": int(probe.size)}
    # fp8 weights: quanta's documented scale rule (amax / max_finite per output row or per
    # tensor, 1 for an all-zero row), elements converted by the owner's RNE cast.
    weights_fp8 = {}
    for name, t, mx_ in [("e4m3", ml_dtypes.float8_e4m3fn, 448.0), ("e5m2", ml_dtypes.float8_e5m2, 57344.0)]:
        w = weights(rng, "f32")
        for gran in ("channel", "tensor"):
            amax = np.abs(w).max(axis=1, keepdims=True) if gran == "channel" else np.abs(w).max(keepdims=True)
            scale = np.where(amax > 0, amax / np.float32(mx_), np.float32(1)).astype(np.float32)
            q = (w / scale).astype(np.float32).astype(t).view(np.uint8)
            key = f"{name}_{gran}"
            weights_fp8[key] = {"n": N, "k": K,
                                "input": write(out, f"{key}.w.f32", w.tobytes()),
                                "codes": write(out, f"{key}.codes", q.tobytes()),
                                "scales": write(out, f"{key}.scales.f32", scale.reshape(-1).tobytes())}
    manifest = {
        "generator": "scripts/golden/make_mlx_goldens.py",
        "packages": {"ml_dtypes": ml_dtypes.__version__, "numpy": np.__version__},
        "decode": tables,
        "encode": enc,
        "fp8_weights": weights_fp8,
        "note": "ml_dtypes astype is round-to-nearest-even; probes stay within the finite range",
    }
    (out / "MANIFEST.json").write_text(json.dumps(manifest, indent=1) + "\n")


if __name__ == "__main__":
    mlx_cases()
    ml_dtypes_tables()
    print("goldens written under", ROOT, file=sys.stderr)
