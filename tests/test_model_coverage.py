"""#29: a model is checked layer by layer whatever surrounds a layer, and coverage is part of the
verdict. A small model the test writes (uint8 I/O through QUANTIZE, an op the litert-int8 table
lacks in the middle) and pymicro-wakeword's streaming okay_nabu.tflite as the package ships it
(state variables, SPLIT_V)."""

from __future__ import annotations

import csv
import dataclasses
import json

import numpy as np
import pytest

from reference.registry import golden
from suite.core.case import Case, Tensor
from suite.core.errors import QconformError
from suite.core.spec import check_case
from reference.graph import run_graph
from suite.models.harvest import case_source, coverage_text, harvest_model, model_feeds, parse_inputs, write_cases
from suite.models.verdicts import model_verdict
from targets import get_target
from targets.base import Timing
from tests import model_zoo
from tests.inprocess import run_inprocess

pytest_plugins = "pytester"


def _csv(path):
    with open(path, newline="") as f:
        return list(csv.DictReader(f))


def test_quantize_between_uint8_and_int8_is_a_spec_case_bit_exact_with_litert_reference():
    """TFLiteConverter's boundary QUANTIZE ops (tf.uint8 I/O): the equal-scale 128 shift of
    efficientnet_lite0 and requantizations with other scales, both directions."""
    rng = np.random.default_rng(3)
    params = [("uint8", "int8", 0.012566017, 131, 0.012566017, 3), ("int8", "uint8", 0.00390625, -128, 0.00390625, 0),
              ("uint8", "int8", 0.05, 100, 0.03, -7), ("int8", "uint8", 0.02, 5, 0.07, 200),
              ("uint8", "uint8", 0.02, 5, 0.07, 200)]
    cases = []
    for i, (di, do, si, zi, so, zo) in enumerate(params):
        lo, hi, st = (0, 255, np.uint8) if di == "uint8" else (-128, 127, np.int8)
        x = Tensor(di, (2, 3, 3, 4), rng.integers(lo, hi + 1, (2, 3, 3, 4)).astype(st), [si], [zi], 0)
        c = Case(op="QUANTIZE", inputs=[x], outputs=[Tensor(do, x.shape, None, [so], [zo], 0)], id=f"Q-u8-{i}")
        assert check_case(c) == []
        cases.append(c)
    outs = get_target("tflite-ref").run(cases, Timing(0, 1))
    for c, o in zip(cases, outs):
        assert o.status == "ok", o.reason
        np.testing.assert_array_equal(np.asarray(o.outputs[0]).astype(int), golden(c, None)[0].astype(int))
    # a uint8 code beyond an int8 table's range is still refused where the table says int8
    bad = dataclasses.replace(cases[0], op="CONV_2D")
    assert check_case(bad)


def test_an_op_not_covered_costs_one_layer_and_the_verdict_names_it(tmp_path, pytester):
    model = model_zoo.uint8_io_cut_tflite(tmp_path / "cut.tflite")
    g = harvest_model(model)
    assert [ly.op for ly in g.layers] == ["QUANTIZE", "CONV_2D", "CONV_2D", "QUANTIZE"]
    assert g.layers[0].case.inputs[0].dtype == "uint8" and g.layers[-1].case.outputs[0].dtype == "uint8"
    assert g.not_covered == {"ABS": ["op2:ABS: not in the litert-int8 spec table"]}
    assert list(g.cuts) == ["abs"]   # the CONV_2D after ABS: a case on the activations tflite-ref had at ABS
    assert ("- abs: the output of op2:ABS, not covered (not in the litert-int8 spec table); data captured on "
            "tflite-ref") in coverage_text(g)
    x = g.layers[2].case.inputs[0]
    assert (x.scale, x.zero_point) == ([float(np.float32(0.2))], [-128])
    # ABS of the golden's op1 output, by hand in reals: the captured activations, not seeded codes
    c1 = run_graph(g, model_feeds(g, None, 0))["c1"].astype(np.int64)
    want = np.clip(np.round(np.abs(0.25 * (c1 + 3)) / 0.2) - 128, -128, 127)
    assert np.abs(x.data.astype(np.int64) - want).max() <= 1 and x.data.max() < 60
    src = case_source(g, g.layers[2])["inputs"]
    assert src == [{"input": 0, "tensor": "abs", "data": "captured on tflite-ref: the whole model on the harvest's "
                    "inputs (seed 0)"}]
    (path,) = [p for p in write_cases(g, tmp_path / "cases") if "op3" in json.loads(p.read_text())["source"]["node"]]
    assert json.loads(path.read_text())["source"]["inputs"] == src   # the case file says where its inputs came from
    assert harvest_model(model).layers[2].case.digest() == g.layers[2].case.digest()   # (deterministic)
    proc, rd = run_inprocess(pytester, f"--model={model}", "--target=tflite-ref", "--model-inputs=3")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    (m,) = _csv(rd / "models.csv")
    assert (m["layers_checked"], m["layers_total"], m["inputs"], m["whole_model"], m["verdict"]) == \
        ("4", "5", "3", "ran", "pass")
    assert m["not_checked"] == "op2:ABS: not in the litert-int8 spec table"
    assert ("model cut.tflite on tflite-ref: PASS on 4 of 5 layers (1 not covered: 1 ABS (op2: not in the "
            "litert-int8 spec table))") in proc.stdout
    # the layer after the cut: judged on the target's own activations there, in the whole model
    after = next(r for r in _csv(rd / "layers.csv") if r["node"] == "op3:CONV_2D")
    assert (after["source"], after["status"]) == ("model", "exact")
    (out,) = _csv(rd / "outputs.csv")
    assert (out["output"], out["inputs"], out["elements"], out["max_abs_lsb"], out["histogram"]) == \
        ("out_u8", "3", "300", "0", "0:300")
    md = (rd / "summary.md").read_text()
    assert "## Models: verdict and coverage" in md and "- op2:ABS: not in the litert-int8 spec table" in md
    assert "op2:ABS: not in the litert-int8 spec table" in (rd / "index.html").read_text()


def test_streaming_model_state_is_fed_and_every_quantized_layer_checked(pytester):
    model = model_zoo.okay_nabu_tflite()
    if model is None:
        pytest.skip(f"not installed: {model_zoo.missing(model_zoo.WAKEWORD_PACKAGES)} (bash scripts/setup.sh --dev)")
    g = harvest_model(model)
    state = {"CALL_ONCE": 1, "VAR_HANDLE": 6, "READ_VARIABLE": 6, "ASSIGN_VARIABLE": 6}
    assert {op: len(v) for op, v in g.not_covered.items()} == state   # nothing else: 42 of 42 quantized ops
    assert len({ly.index for ly in g.layers}) == 61 - sum(state.values()) and g.stateful and g.invocations == 4
    assert len(g.cuts) == 6 and all(why.startswith("state ") for why in g.cuts.values())
    # the state the layers read: tflite-ref's after 4 invocations (real activations), not seeded codes
    assert all(d.startswith("captured on tflite-ref") and "invocation 4 of 4" in d for d in g.cut_inputs.values())
    split = [ly for ly in g.layers if ly.model_op == "SPLIT_V"]
    assert len(split) == 6 and {ly.op for ly in split} == {"SLICE"}
    proc, rd = run_inprocess(pytester, f"--model={model}", "--target=tflite-ref")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    (m,) = _csv(rd / "models.csv")
    # the whole model over 4 invocations, its state carried: LiteRT's reference kernels are the golden
    assert (m["whole_model"], m["inputs"], m["layers_checked"], m["layers_total"]) == ("ran", "4", "42", "61")
    assert m["layers_exact"] == m["layers"] == "45" and m["output_max_abs_lsb"] == "0.0"
    assert "PASS on 42 of 61 layers (19 not covered: 1 CALL_ONCE (op0: state:" in proc.stdout


def test_a_model_that_ran_is_never_an_error_for_want_of_layers():
    """The `whole model: : ERROR (the whole model did not run)` line: a run with no layer rows."""
    v = model_verdict("m.tflite", "tflite", [], [], "ran", None)
    assert v["verdict"] == "pass"


@pytest.mark.parametrize("value, want", [("5", (None, 5)), ("x.npz", ("x.npz", None)), (None, (None, None))])
def test_model_inputs_takes_an_npz_or_a_count(value, want):
    assert parse_inputs(value) == want


@pytest.mark.parametrize("value", ["0", "-2", "10001"])
def test_model_inputs_count_out_of_range_is_a_usage_error(value):
    with pytest.raises(QconformError, match="--model-inputs"):
        parse_inputs(value)


def test_scheme_stack_is_kept_in_the_narrowest_type_with_the_same_counts():
    """The judge keeps each case's [schemes, elements] stack for its other targets: int16 for 8-bit
    outputs (a real model's 400k-element layer: 8 MB, not 32), the same counts as int64."""
    from reports import causes
    rng = np.random.default_rng(1)
    x = Tensor("int8", (1, 6, 6, 3), rng.integers(-128, 128, (1, 6, 6, 3)).astype(np.int8), [0.05], [3], 0)
    w = Tensor("int8", (4, 3, 3, 3), rng.integers(-127, 128, (4, 3, 3, 3)).astype(np.int8), [0.01] * 4, [0] * 4, 0)
    b = Tensor("int32", (4,), rng.integers(-99, 99, 4).astype(np.int32), [float(np.float32(0.05) * np.float32(0.01))] * 4,
               [0] * 4, 0)
    case = Case(op="CONV_2D", inputs=[x, w, b], outputs=[Tensor("int8", (1, 6, 6, 4), None, [0.07], [-5], 0)],
                attrs={"padding": "SAME", "stride_w": 1, "stride_h": 1, "fused_activation_function": "NONE"})
    names = causes.kernel_schemes()
    kept, mat = causes.scheme_stack(case, lambda s: golden(case, s), names)
    assert mat.dtype == np.int16 and len(kept) > 3
    wide = np.stack([np.concatenate([np.asarray(o).astype(np.int64).ravel() for o in golden(case, s)]) for s in kept])
    np.testing.assert_array_equal(mat.astype(np.int64), wide)
    assert causes._stack_dtype([Tensor("float32", (2,))]) == np.int32
    assert causes._stack_dtype([Tensor("int32", (2,), None, [1.0], [0], 0)]) == np.int32


def test_a_model_run_runs_its_targets_one_after_another(tmp_path, pytester):
    """The memory of a --model run: each target's cases together (its worker then ends: Run.sequential),
    not the targets interleaved op by op with every runtime's worker busy at once."""
    model = model_zoo.uint8_io_cut_tflite(tmp_path / "cut.tflite")
    proc, rd = run_inprocess(pytester, f"--model={model}", "--target=tflite-ref,ref")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    order = [json.loads(line)["target"] for line in (rd / "results.jsonl").read_text().splitlines() if line.strip()]
    assert order and [t for i, t in enumerate(order) if i == 0 or t != order[i - 1]] == ["tflite-ref", "ref"]


def test_a_model_none_of_whose_layers_was_checked_fails_the_run():
    """Every layer unsupported on the target (or none harvested), the whole model run: not a PASS on 0 of N."""
    from types import SimpleNamespace
    from suite.models.verdicts import model_lines, model_row
    graph = SimpleNamespace(name="m.tflite", layers=[], outputs=[], invocations=1, operators=3,
                            not_covered={"SQRT": ["op0: not in the spec table", "op1: not in the spec table"]})
    unsupported = [{"layer": 2, "node": "op2", "source": "case", "status": "unsupported", "reason": "int16 only"}]
    row = model_row(graph, "tflite", unsupported, "ran", "tflite-ref-double")
    assert (row["verdict"], row["layers_checked"], row["layers_total"]) == ("unchecked", 0, 3)
    ((line, bad),) = model_lines([{**row, "_outputs": []}])
    assert bad and "UNCHECKED" in line and "the run fails" in line
