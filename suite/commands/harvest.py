"""``qconform harvest MODEL -o DIR [--inputs NPZ] [--model-input-shape NAME=D0,..] [--seed N] [--scheme NAME]``:
one case file per quantized layer of a .tflite or quantized .onnx model (suite/models/, docs/models.md)."""

from __future__ import annotations

from reference.schemes import SCHEMES
from suite.core.errors import QconformError
from suite.models.harvest import COVERAGE, coverage_text, harvest_model, write_cases
from suite.models.onnx import parse_input_shapes


def register(sub):
    p = sub.add_parser("harvest", help="a model's quantized layers as case files",
                       description="Read an int8 .tflite or quantized (QDQ or QOperator) .onnx model and write one case file per layer the "
                                   "spec tables state (its real shapes, weights and quantization; its inputs from "
                                   "one run of the graph golden on the model's inputs) and coverage.md (cases per "
                                   "op, golden-only float layers, ops not covered and why).")
    p.add_argument("model", help="the .tflite or .onnx model")
    p.add_argument("-o", "--output", required=True, help="folder of the case files")
    p.add_argument("--inputs", default=None,
                   help=".npz of the model's inputs, keyed by input name (a leading sample axis: its first "
                        "sample; default: seeded data over each input's real range)")
    p.add_argument("--model-input-shape", action="append", default=[], metavar="NAME=D0,D1,...",
                   help="the shape of an .onnx input with symbolic dimensions, e.g. input=1,3,224,224 "
                        "(repeatable)")
    p.add_argument("--seed", type=int, default=0, help="seed of the generated inputs (default 0)")
    p.add_argument("--scheme", default=None, help="scheme of the golden run giving the layers' inputs "
                                                  "(default tflite-ref-double)")
    p.set_defaults(func=run)


def run(args) -> int:
    if args.scheme is not None and args.scheme not in SCHEMES:
        raise QconformError(f"unknown scheme '{args.scheme}' (known: {', '.join(SCHEMES)})", field="--scheme")
    graph = harvest_model(args.model, args.inputs, args.seed, args.scheme,
                          parse_input_shapes(args.model_input_shape))
    paths = write_cases(graph, args.output)
    print(coverage_text(graph), end="")
    print(f"wrote {len(paths)} case files and {COVERAGE} to {args.output}")
    return 0
