"""ONNX mappings of the first slice of operators."""

from __future__ import annotations

import numpy as np

from suite.errors import Unsupported

from ..onnx_model import NCHW_TO_NHWC, NHWC_TO_NCHW, Builder, hw_attrs, onnx_op
