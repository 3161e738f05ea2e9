"""Realistic single-op cases for the golden-speed benchmark (MobileNet / ResNet / BERT-like sizes).

Each case follows the LiteRT int8 spec table (tests/test_bench.py checks them with
``suite.core.spec.check_case``): int8 activations per-tensor, symmetric per-channel int8 weights,
int32 bias of scale s_in * s_w[c]. Output scales are fitted to the real outputs' spread
(from the exact integer accumulators, as the conv generators do), so outputs use the int8
range instead of saturating. ``scale`` shrinks every spatial / channel size (the smoke test
uses tiny sizes); ``scale=1`` is the benchmark.
"""

from __future__ import annotations

import numpy as np

from suite.core.case import Case, Tensor
from suite.core.errors import QconformError


def _f32(x: float) -> float:
    return float(np.float32(x))


def _act(rng, shape, s: float, z: int) -> Tensor:
    data = rng.integers(-128, 128, size=shape, dtype=np.int64).astype(np.int8)
    return Tensor("int8", tuple(shape), data, [_f32(s)], [int(z)])


def _weights(rng, shape, axis: int, n: int) -> Tensor:
    """Symmetric int8 weights with ``n`` scales (1: per-tensor) on ``axis``."""
    data = rng.integers(-127, 128, size=shape, dtype=np.int64).astype(np.int8)
    scales = [_f32(v) for v in rng.uniform(0.002, 0.02, size=n)]
    return Tensor("int8", tuple(shape), data, scales, [0] * n, axis)


def _bias(rng, s_in: float, w: Tensor, n: int) -> Tensor:
    data = rng.integers(-4096, 4097, size=(n,), dtype=np.int64).astype(np.int32)
    scales = [_f32(np.float32(s_in) * np.float32(s)) for s in w.scale]
    if len(scales) == 1:
        scales = scales * n
    return Tensor("int32", (n,), data, scales, [0] * n, 0)


def _out(shape, acc_std_real: float, z: int = 0) -> Tensor:
    """An output whose scale puts +-4 standard deviations of the real output across int8."""
    s = max(acc_std_real * 8.0 / 255.0, 1e-6)
    return Tensor("int8", tuple(shape), None, [_f32(s)], [int(z)])


def _dim(v: int, scale: int, lo: int = 1) -> int:
    return max(lo, v // scale)


def conv_2d(rng, scale: int = 1) -> Case:
    """CONV_2D 1x56x56x64 -> 64, 3x3, stride 1, SAME (ResNet stage 1)."""
    h, c, o = _dim(56, scale, 4), _dim(64, scale), _dim(64, scale)
    s_in = 0.05
    x = _act(rng, (1, h, h, c), s_in, -3)
    w = _weights(rng, (o, 3, 3, c), 0, o)
    b = _bias(rng, s_in, w, o)
    std = s_in * 74.0 * np.sqrt(9 * c) * float(np.mean(w.scale)) * 73.0
    return Case("CONV_2D", [x, w, b], [_out((1, h, h, o), std, 2)],
                {"padding": "SAME", "stride_h": 1, "stride_w": 1, "dilation_h_factor": 1,
                 "dilation_w_factor": 1, "fused_activation_function": "NONE"},
                id=f"bench-CONV_2D-1x{h}x{h}x{c}-{o}-3x3", variant="bench")


def depthwise_conv_2d(rng, scale: int = 1) -> Case:
    """DEPTHWISE_CONV_2D 1x112x112x32, 3x3, stride 1, SAME, multiplier 1 (MobileNet block 1)."""
    h, c = _dim(112, scale, 4), _dim(32, scale)
    s_in = 0.05
    x = _act(rng, (1, h, h, c), s_in, 5)
    w = _weights(rng, (1, 3, 3, c), 3, c)
    b = _bias(rng, s_in, w, c)
    std = s_in * 74.0 * 3.0 * float(np.mean(w.scale)) * 73.0
    return Case("DEPTHWISE_CONV_2D", [x, w, b], [_out((1, h, h, c), std, -1)],
                {"padding": "SAME", "stride_h": 1, "stride_w": 1, "dilation_h_factor": 1,
                 "dilation_w_factor": 1, "depth_multiplier": 1, "fused_activation_function": "RELU6"},
                id=f"bench-DEPTHWISE_CONV_2D-1x{h}x{h}x{c}-3x3", variant="bench")


def fully_connected(rng, scale: int = 1) -> Case:
    """FULLY_CONNECTED 1x1024 -> 1000 (MobileNet classifier), per-tensor weights and bias (the
    spec's FULLY_CONNECTED bias is per-tensor)."""
    k, o = _dim(1024, scale), _dim(1000, scale)
    s_in = 0.02
    x = _act(rng, (1, k), s_in, -7)
    w = _weights(rng, (o, k), 0, 1)
    b = _bias(rng, s_in, w, o)
    b.scale, b.zero_point = b.scale[:1], [0]
    std = s_in * 74.0 * np.sqrt(k) * float(np.mean(w.scale)) * 73.0
    return Case("FULLY_CONNECTED", [x, w, b], [_out((1, o), std, 0)],
                {"fused_activation_function": "NONE", "keep_num_dims": False},
                id=f"bench-FULLY_CONNECTED-1x{k}-{o}", variant="bench")


def fully_connected_batch(rng, scale: int = 1) -> Case:
    """FULLY_CONNECTED 128x768 -> 768 (a transformer projection over 128 tokens), per-tensor."""
    b, k, o = _dim(128, scale), _dim(768, scale), _dim(768, scale)
    s_in = 0.02
    x = _act(rng, (b, k), s_in, 3)
    w = _weights(rng, (o, k), 0, 1)
    bias = _bias(rng, s_in, w, o)
    bias.scale, bias.zero_point = bias.scale[:1], [0]
    std = s_in * 74.0 * np.sqrt(k) * float(np.mean(w.scale)) * 73.0
    return Case("FULLY_CONNECTED", [x, w, bias], [_out((b, o), std, 0)],
                {"fused_activation_function": "NONE", "keep_num_dims": False},
                id=f"bench-FULLY_CONNECTED-{b}x{k}-{o}", variant="bench")


def batch_matmul(rng, scale: int = 1) -> Case:
    """BATCH_MATMUL 1x8x128x64 @ 1x8x64x128 (attention scores, 8 heads, 128 tokens)."""
    t, d = _dim(128, scale, 2), _dim(64, scale, 2)
    s_a, s_b = 0.03, 0.04
    a = _act(rng, (1, 8, t, d), s_a, 1)
    b = _act(rng, (1, 8, d, t), s_b, -2)
    std = s_a * s_b * 74.0 * 74.0 * np.sqrt(d)
    return Case("BATCH_MATMUL", [a, b], [_out((1, 8, t, t), std, 0)], {"adj_x": False, "adj_y": False},
                id=f"bench-BATCH_MATMUL-8x{t}x{d}x{t}", variant="bench")


def average_pool_2d(rng, scale: int = 1) -> Case:
    """AVERAGE_POOL_2D 1x56x56x64, 3x3, stride 1, SAME (Inception-style branch)."""
    h, c = _dim(56, scale, 4), _dim(64, scale)
    x = _act(rng, (1, h, h, c), 0.05, -4)
    out = Tensor("int8", (1, h, h, c), None, list(x.scale), list(x.zero_point))
    return Case("AVERAGE_POOL_2D", [x], [out],
                {"padding": "SAME", "stride_h": 1, "stride_w": 1, "filter_height": 3, "filter_width": 3,
                 "fused_activation_function": "NONE"},
                id=f"bench-AVERAGE_POOL_2D-1x{h}x{h}x{c}-3x3", variant="bench")


def softmax(rng, scale: int = 1) -> Case:
    """SOFTMAX 1x8x128x128 over the last axis (attention probabilities)."""
    t = _dim(128, scale, 2)
    x = _act(rng, (1, 8, t, t), 0.1, 0)
    out = Tensor("int8", (1, 8, t, t), None, [1.0 / 256.0], [-128])
    return Case("SOFTMAX", [x], [out], {"beta": 1.0}, id=f"bench-SOFTMAX-1x8x{t}x{t}", variant="bench")


def mean(rng, scale: int = 1) -> Case:
    """MEAN 1x56x56x64 over axes [1, 2], keep_dims (a global average pool)."""
    h, c = _dim(56, scale, 2), _dim(64, scale)
    x = _act(rng, (1, h, h, c), 0.05, 3)
    axis = Tensor("int32", (2,), np.array([1, 2], np.int32))
    out = Tensor("int8", (1, 1, 1, c), None, [_f32(0.05 / 4.0)], [-1])
    return Case("MEAN", [x, axis], [out], {"keep_dims": True}, id=f"bench-MEAN-1x{h}x{h}x{c}-axes12",
                variant="bench")


BUILDERS = {
    "CONV_2D": conv_2d, "DEPTHWISE_CONV_2D": depthwise_conv_2d, "FULLY_CONNECTED": fully_connected,
    "BATCH_MATMUL": batch_matmul, "AVERAGE_POOL_2D": average_pool_2d, "SOFTMAX": softmax, "MEAN": mean,
}
OPS = list(BUILDERS)
#: further cases shown after an op's main one (where the op's cost structure differs)
EXTRA = {"FULLY_CONNECTED": [fully_connected_batch]}


def bench_cases(ops: list[str] | None = None, scale: int = 1, seed: int = 0) -> list[Case]:
    """One realistic case per op (``ops``: default every op of :data:`OPS`), plus :data:`EXTRA`."""
    out = []
    for op in ops or OPS:
        if op not in BUILDERS:
            raise QconformError(f"no benchmark case for {op} (known: {', '.join(OPS)})", field="--ops")
        rng = np.random.default_rng([seed, OPS.index(op)])
        out.append(BUILDERS[op](rng, scale))
        out.extend(extra(rng, scale) for extra in EXTRA.get(op, []))
    return out
