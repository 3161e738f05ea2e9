"""``pytest --model=...`` end to end, in this process (pytester), on the real models of
tests/model_zoo.py: the layers as ordinary cases, the whole model per target, layers.csv and
models.csv, the page's section, a --model run never moving reports/latest, and a harvested
layer rerun alone with --case-file judged as the model run judged it."""

from __future__ import annotations

import csv
import json

import pytest

from suite.models.harvest import harvest_model, write_cases
from suite.models.verdicts import LAYER_COLUMNS, MODEL_COLUMNS
from tests import model_zoo
from tests.conftest import rows_written
from tests.inprocess import run_inprocess

pytest_plugins = "pytester"


@pytest.fixture(scope="module")
def models():
    """The two models, made (or found in the cache) before pytester moves HOME and snapshots
    sys.modules (tests/model_zoo.py imports the runtimes when the tests are collected)."""
    return {"tflite": model_zoo.face_detection_int8_tflite(), "onnx": model_zoo.cls_qdq_onnx()}


def _model(models, kind):
    p = models[kind]
    if p is None:
        packages = model_zoo.TFLITE_PACKAGES if kind == "tflite" else model_zoo.ONNX_PACKAGES
        pytest.skip(f"not installed: {model_zoo.missing(packages)} (bash scripts/setup.sh --dev)")
    return p


def _csv(path):
    with open(path, newline="") as f:
        return list(csv.DictReader(f))


def test_tflite_model_run_writes_layers_and_models(models, pytester):
    model = _model(models, "tflite")
    proc, rd = run_inprocess(pytester, f"--model={model}", "--target=tflite-ref,tflite", "--ops=CONV_2D,ADD")
    assert proc.returncode in (0, 1), proc.stdout + proc.stderr
    rows = rows_written(rd)
    assert {r["op"] for r in rows} == {"CONV_2D", "ADD"} and len(rows) == 2 * (21 + 16)
    layers, models = _csv(rd / "layers.csv"), _csv(rd / "models.csv")
    assert list(layers[0]) == LAYER_COLUMNS and list(models[0]) == MODEL_COLUMNS
    by = {r["target"]: r for r in models}
    # the reference kernels are the golden, layer by layer and along the whole chain
    assert by["tflite-ref"]["whole_model"] == "ran" and by["tflite-ref"]["first_divergent_layer"] == ""
    assert by["tflite-ref"]["layers_exact"] == by["tflite-ref"]["layers"] == "94"
    assert by["tflite-ref"]["output_max_abs_lsb"] == "0.0"
    # XNNPACK rounds differently from the first layer on (judged within tolerance)
    assert by["tflite"]["whole_model"] == "ran" and by["tflite"]["first_divergent_layer"] != ""
    first = next(r for r in layers if r["target"] == "tflite" and r["layer"] == by["tflite"]["first_divergent_layer"])
    assert float(first["max_abs_lsb"]) > 0 and first["source"] == "model"
    xnn = [r for r in layers if r["target"] == "tflite"]   # own errors of 1 LSB add up along the chain
    assert max(float(r["max_abs_lsb"]) for r in xnn) < max(float(r["accumulated_max_abs_lsb"]) for r in xnn)
    # #24: each (model, target) judged whole, one terminal line each; XNNPACK's output is 37 LSB off
    # along the chain with every layer within its tolerance: accumulated, a pass
    assert by["tflite-ref"]["verdict"] == by["tflite"]["verdict"] == "pass"
    assert by["tflite-ref"]["output_status"] == "exact" and by["tflite"]["output_status"] == "accumulated"
    assert (by["tflite"]["layers_checked"], by["tflite"]["layers_total"], by["tflite"]["not_checked"]) == ("94", "94", "")
    assert f"model {model.name} on tflite: PASS on 94 of 94 layers; {by['tflite']['layers_exact']}/94 layers exact, " \
        "first divergent layer" in proc.stdout and "(accumulated)\n" in proc.stdout
    assert json.loads((rd / "run.json").read_text())["options"]["model"] == str(model)
    assert 'id="models-section"' in (rd / "index.html").read_text()
    assert not (pytester.path / "report" / "latest").exists()   # a --model run is another kind of run


def test_onnx_model_on_a_target_without_a_whole_model_takes_its_cases(models, pytester):
    model = _model(models, "onnx")
    proc, rd = run_inprocess(pytester, f"--model={model}", "--target=ort,tflite-ref", "--ops=MUL",
                             "--scheme=ort-fp32-rne")
    assert proc.returncode in (0, 1), proc.stdout + proc.stderr
    models = {r["target"]: r for r in _csv(rd / "models.csv")}
    assert models["ort"]["whole_model"] == "ran" and models["ort"]["scheme"] == "ort-fp32-rne"
    assert models["tflite-ref"]["whole_model"] == "tflite-ref runs no whole onnx model"
    mul = [r for r in _csv(rd / "layers.csv") if r["target"] == "tflite-ref" and r["op"] == "MUL"]
    judged = {r["case_id"]: r["status"] for r in rows_written(rd) if r["target"] == "tflite-ref"}
    assert len(mul) == 27 and all(r["source"] == "case" and r["status"] == judged[r["case_id"]] for r in mul)
    assert "fail" in judged.values()   # LiteRT's MUL is not ORT's float arithmetic: the layer rows say so


def test_harvested_layer_reruns_alone_with_the_same_verdict(models, pytester, tmp_path):
    model = _model(models, "tflite")
    _, rd = run_inprocess(pytester, f"--model={model}", "--target=tflite", "--ops=DEPTHWISE_CONV_2D")
    want = {r["case_id"]: r for r in rows_written(rd)}
    write_cases(harvest_model(model), tmp_path / "cases")
    case_id = max(want, key=lambda k: want[k]["max_abs_lsb"] or 0)   # the worst one: not bit-exact
    assert want[case_id]["max_abs_lsb"] > 0
    _, rd2 = run_inprocess(pytester, f"--case-file={tmp_path / 'cases' / (case_id + '.json')}", "--target=tflite",
                               report_dir=tmp_path / "rerun")
    (got,) = rows_written(rd2)
    keys = ("case_id", "status", "max_abs_lsb", "mismatches", "elements", "bit_exact")
    assert {k: got[k] for k in keys} == {k: want[case_id][k] for k in keys}


def _layer(i, status, own, acc, within, source="model"):
    return {"layer": i, "node": f"op{i}:CONV_2D", "source": source, "status": status, "max_abs_lsb": own,
            "accumulated_max_abs_lsb": acc, "accumulated_within": within}


def test_a_whole_model_error_or_a_failing_layer_fails_and_accumulation_alone_does_not(monkeypatch):
    """#24: a model that did not run (the classifier's QNN_COMMON_ERROR_MEM_ALLOC on htp) or a layer
    beyond its own tolerance fails; an output off along the chain with every layer within its own
    tolerance passes, labelled "accumulated"; a model finding explains an error."""
    from suite.core import findings as fmod
    from suite.models.verdicts import model_lines, model_verdict
    ok = [_layer(0, "within-tolerance", 1.0, 1.0, True), _layer(1, "exact", 0.0, 37.0, False)]
    v = model_verdict("m.tflite", "tflite", ok, ok[1:], "ran", None)
    assert (v["verdict"], v["output_status"]) == ("pass", "accumulated")
    bad = [_layer(0, "fail", 5.0, 5.0, False), _layer(1, "exact", 0.0, 9.0, False)]
    v = model_verdict("m.tflite", "tflite", bad, bad[1:], "ran", bad[0])
    assert (v["verdict"], v["output_status"], v["finding"]) == ("fail", "fail", "")
    cases = [_layer(0, "pass", 0.0, None, False, source="case")]
    err = "error (exit status 1): QNN_COMMON_ERROR_MEM_ALLOC"
    v = model_verdict("cls.onnx", "htp", cases, [], err, None)
    assert v["verdict"] == "error"
    assert model_verdict("cls.onnx", "tflite-ref", cases, [], "tflite-ref runs no whole onnx model", None)["verdict"] \
        == "cases"
    row = {"model": "cls.onnx", "target": "htp", "layers": 1, "layers_exact": 1, "first_divergent_layer": "",
           "first_failing_layer": "", "whole_model": err, "output_max_abs_lsb": "", **v}
    [(line, failing)] = model_lines([row])
    assert failing and line.startswith("model cls.onnx on htp: ERROR (the whole model did not run); 1/1 layers exact")
    assert line.endswith("the run fails")
    known = fmod.Finding(id="htp-cls-mem", op=("*",), target=("htp",), reason="QNN HTP cannot place it: ...",
                         status=("model-error",), model=("cls*.onnx",))
    monkeypatch.setattr(fmod, "findings", lambda: (known,))
    v = model_verdict("cls.onnx", "htp", cases, [], err, None)
    assert (v["verdict"], v["finding"]) == ("known", "htp-cls-mem")
    assert not model_lines([{**row, **v}])[0][1]
