#!/usr/bin/env python3
# Error of llama.cpp-style Q8_0 activation quantization (per 32: d = amax/127, q = round(x/d))
# on y = x . W for q4_0-like weights, against the exact product, for x in f32.
import numpy as np
rng = np.random.default_rng(0)
K, N = 4096, 512
for dist in ["normal", "heavy-tailed (t3)"]:
    x = rng.standard_normal(K) if dist == "normal" else rng.standard_t(3, K)
    W = (rng.integers(-8, 8, (N, K)) * 0.01).astype(np.float64)
    xb = x.reshape(-1, 32)
    d = np.abs(xb).max(1, keepdims=True) / 127
    xq = (np.round(xb / d) * d).reshape(-1)
    y = W @ x
    yq = W @ xq
    print(f"{dist:18s} rel-L2 of y with Q8_0 activations: {np.linalg.norm(yq-y)/np.linalg.norm(y):.2e}")
