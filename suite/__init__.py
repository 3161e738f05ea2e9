"""qconform: a conformance suite for quantized neural-network operators.

The suite package holds the spec tables, the case model and generators, the
pytest plugin and the parametrized conformance tests.
"""

__version__ = "0.1.0"
