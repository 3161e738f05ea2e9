"""The golden: a vectorized NumPy reference for every operator of the spec tables.

``golden(case, scheme)`` returns the exact integer outputs of a case under a named
requantization scheme. The default scheme, ``tflite-ref-double``, is bit-exact with
LiteRT's reference kernels in their default (double-rounding) build.
"""

from __future__ import annotations

from reference.registry import golden, has_golden, golden_ops, register  # noqa: F401
from reference.schemes import SCHEMES, Scheme, get_scheme, DEFAULT_SCHEME  # noqa: F401
