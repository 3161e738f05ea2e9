"""Real models as cases: harvest a .tflite or QDQ .onnx model into its layers, run the whole
model on each target that can, and say per layer where a target diverges (docs/models.md)."""
