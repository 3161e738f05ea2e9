"""Element types the suite knows: their NumPy storage type and integer range."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np


@dataclass(frozen=True)
class DType:
    name: str
    storage: type          # NumPy type the data is held in (int4/uint4 are held unpacked)
    qmin: int | None       # None for float and bool
    qmax: int | None
    bits: int

    @property
    def is_int(self) -> bool:
        return self.qmin is not None


DTYPES: dict[str, DType] = {
    d.name: d
    for d in [
        DType("int4", np.int8, -8, 7, 4),
        DType("uint4", np.uint8, 0, 15, 4),
        DType("int8", np.int8, -128, 127, 8),
        DType("uint8", np.uint8, 0, 255, 8),
        DType("int16", np.int16, -32768, 32767, 16),
        DType("uint16", np.uint16, 0, 65535, 16),
        DType("int32", np.int32, -(2**31), 2**31 - 1, 32),
        DType("int64", np.int64, -(2**63), 2**63 - 1, 64),
        DType("float32", np.float32, None, None, 32),
        DType("bool", np.bool_, None, None, 1),
    ]
}


def dtype(name: str) -> DType:
    try:
        return DTYPES[name]
    except KeyError:
        raise KeyError(f"unknown dtype '{name}' (known: {', '.join(DTYPES)})") from None


def pack_int4(values: np.ndarray) -> np.ndarray:
    """Pack 4-bit values two per byte, element 2i in the low nibble, 2i+1 in the high one.

    An odd tail leaves the last high nibble zero (ONNX and LiteRT agree on this order).
    """
    flat = np.asarray(values).astype(np.int64).ravel() & 0xF
    if flat.size % 2:
        flat = np.concatenate([flat, np.zeros(1, np.int64)])
    return (flat[0::2] | (flat[1::2] << 4)).astype(np.uint8)


def unpack_int4(packed: np.ndarray, count: int, signed: bool) -> np.ndarray:
    """Inverse of :func:`pack_int4`: ``count`` values, sign-extended when ``signed``."""
    p = np.asarray(packed, dtype=np.uint8).ravel().astype(np.int64)
    vals = np.empty(p.size * 2, np.int64)
    vals[0::2] = p & 0xF
    vals[1::2] = p >> 4
    vals = vals[:count]
    if signed:
        vals = np.where(vals >= 8, vals - 16, vals)
        return vals.astype(np.int8)
    return vals.astype(np.uint8)
