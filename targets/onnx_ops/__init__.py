"""ONNX QDQ mappings, one module per operator family (registered with ``@onnx_op``)."""
