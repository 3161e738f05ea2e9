"""Hostile inputs (issue #21): files people send each other are data. Reading a failure file, a
run folder, a case file, a tolerance file or a model never imports a module, runs a program, opens
a file the command line did not name, hangs on a FIFO, reads without a bound or allocates without
a bound: each is one clear error naming the file and the field. The inputs are in tests/data/hostile/.
"""

from __future__ import annotations

import json
import math
import os
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from suite.core.errors import QconformError
from tests.conftest import ROOT

HOSTILE = ROOT / "tests" / "data" / "hostile"
DIM = (1 << 31) - 1


def _in(tmp_path: Path, *names: str) -> Path:
    """A working folder holding the hostile files ``names`` and the marker-writing module/program."""
    for n in ("qc_helpers.py", "collect.sh", *names):
        shutil.copy2(HOSTILE / n, tmp_path / n)
    return tmp_path


@pytest.fixture
def qconform(monkeypatch, capsys):
    """``qconform *args`` in this process, in folder ``cwd`` (importable, as the current folder is):
    (exit status, stderr); a module it imported is forgotten afterwards."""
    from suite.cli import main

    def _run(cwd: Path, *args: str) -> tuple[int, str]:
        monkeypatch.chdir(cwd)
        monkeypatch.syspath_prepend(str(cwd))
        monkeypatch.setenv("QC_MARKER", str(cwd / "marker"))
        capsys.readouterr()
        try:
            rc = main(list(args))
        finally:
            sys.modules.pop("qc_helpers", None)
        return rc, capsys.readouterr().err
    return _run


# ----------------------------------------------------------------------------- 1. code from a shared file

@pytest.mark.parametrize("name, field, give", [
    ("failure-module-target.json", "judged.target", "--target=qc_helpers:Kernel"),
    ("failure-ssh-program.json", "judged.device", "--device=ssh:board?ssh=./collect.sh"),
    ("failure-adb-program.json", "judged.device", "--device=adb:SER?adb=./collect.sh"),
    ("failure-tolerance-zero.json", "judged.tolerance.file", "--tolerance=FILE"),
])
def test_shrink_runs_no_code_a_failure_file_names(tmp_path, qconform, name, field, give):
    d = _in(tmp_path, name)
    rc, err = qconform(d, "shrink", name, "-q")
    assert rc == 2, err
    assert not (d / "marker").exists(), "the failure file ran code"
    assert f"field '{field}'" in err and give in err and name in err


def test_the_marker_module_does_run_when_the_command_line_names_it(tmp_path, qconform):
    """The control: the marker module is importable from the working folder, so the test above would
    see its marker had the failure file's target been imported."""
    d = _in(tmp_path, "failure-module-target.json")
    doc = json.loads((d / "failure-module-target.json").read_text())
    del doc["judged"]
    (d / "plain.json").write_text(json.dumps(doc))
    qconform(d, "shrink", "plain.json", "-q", "--target=qc_helpers:Kernel")
    assert (d / "marker").read_text() == "imported"


def _run_json(folder: Path, **options) -> Path:
    folder.mkdir()
    opts = {"seed": 0, "cases_per_op": 2, "ops": ["ADD"], "targets": ["ref"], "case_files": [], **options}
    (folder / "run.json").write_text(json.dumps({"format": "qconform-run/1", "run_id": "r1", "options": opts}))
    return folder


@pytest.mark.parametrize("options, field", [
    ({"targets": ["qc_helpers:Kernel"]}, "options.targets"),
    ({"case_files": ["fifo"]}, "options.case_files"),
])
def test_resume_imports_nothing_and_opens_nothing_run_json_names(tmp_path, monkeypatch, options, field):
    from types import SimpleNamespace

    from suite.harness import resume
    d = _in(tmp_path)
    monkeypatch.syspath_prepend(str(d))
    if options.get("case_files"):
        os.mkfifo(d / "fifo")   # opened, it would hang the run
        options = {"case_files": [str(d / "fifo")]}
    res = resume.open_run(str(_run_json(d / "run", **options)))
    o = SimpleNamespace(seed=None, cases_per_op=None, scheme=None, ops=None, target=None, case_file=None)
    with pytest.raises(QconformError) as e:
        resume.fill_options(res, o, [f"--resume={res.dir}"])
    assert e.value.field == field and "pytest --resume=" in str(e.value) and o.case_file is None
    assert not (d / "marker").exists() and "qc_helpers" not in sys.modules
    resume.fill_options(res, o, [f"--resume={res.dir}", "--target=x", "--case-file=y"])   # given: not taken


def test_a_rerun_of_a_failure_file_never_loads_its_target(tmp_path):
    """`pytest --case-file=FAILURE.json` compares the file's judged target with the run's: a name only."""
    from suite.harness.repro import check_reruns
    d = _in(tmp_path, "failure-module-target.json")
    sys.modules.pop("qc_helpers", None)
    found = check_reruns([str(d / "failure-module-target.json")], targets=["ref"], scheme="tflite-ref-double",
                         tolerance_digest="0" * 64, device=None, timeout=60.0)
    assert found and "qc_helpers" not in sys.modules and not (d / "marker").exists()
    assert not isinstance(found, QconformError)


# ----------------------------------------------------------------------------- 2. bounded, typed reads

def _readers(d: Path):
    """Each reader of a file a user hands the suite, as fn(path) -> anything."""
    from reports.certify import read_certificate as read_cert
    from suite.cases.files import load_case_files
    from suite.core.case import load_case
    from suite.core.encodings import read_encodings
    from suite.core.tolerance import load_policy
    from suite.core.waivers import load_waivers
    from suite.harness.repro import digest_of
    from suite.models.tflite import read_model
    return {"case": load_case, "case folder": lambda p: load_case_files([str(p.parent)]),
            "tolerance": load_policy, "waivers": lambda p: load_waivers([str(p)]), "encodings": read_encodings,
            "certificate": lambda p: _as_error(read_cert, p), "tolerance digest": digest_of, "tflite model": read_model}


def _as_error(read, p):
    """(reports.certify reads with suite.core.keyed.read_regular itself: OSError for a refused file)"""
    try:
        return read(p)
    except OSError as e:
        raise QconformError(f"{p}: {e}") from None


@pytest.mark.parametrize("kind", ["fifo", "dev-zero", "folder"])
def test_every_reader_takes_only_a_regular_file(tmp_path, kind):
    for what, read in _readers(tmp_path).items():
        if kind == "folder" and what == "certificate":
            continue   # (a folder is a run folder: its certificate.json is read)
        d = tmp_path / what.replace(" ", "-")
        d.mkdir()
        p = d / "x.json"
        if kind == "fifo":
            os.mkfifo(p)             # an open that waited for a writer would hang here
        elif kind == "dev-zero":
            p.symlink_to("/dev/zero")
        else:
            p.mkdir()
        with pytest.raises(QconformError) as e:
            read(p)
        assert any(w in str(e.value) for w in ("not a regular file", "symbolic link")), (what, str(e.value))


def test_a_file_over_its_bound_is_refused_before_it_is_read(tmp_path, monkeypatch):
    from suite.core import userfile
    from suite.core.case import load_case
    from suite.core.tolerance import load_policy
    monkeypatch.setitem(userfile.LIMITS, "case", 1000)
    monkeypatch.setitem(userfile.LIMITS, "toml", 1000)
    big = tmp_path / "big.json"
    big.write_text(" " * 1001)
    with pytest.raises(QconformError, match="more than 1000"):
        load_case(big)
    with pytest.raises(QconformError, match="more than 1000") as e:
        load_policy(big)
    assert e.value.field == "--tolerance"


def test_a_run_folder_whose_run_json_is_a_fifo_is_refused(tmp_path):
    from suite.harness import resume
    (tmp_path / "run").mkdir()
    os.mkfifo(tmp_path / "run" / "run.json")
    with pytest.raises(QconformError, match="not a regular file") as e:
        resume.open_run(str(tmp_path / "run"))
    assert e.value.field == "--resume"


# ----------------------------------------------------------------------------- 3-4. sizes and options in cases

def _case_doc(op: str, variant: str = "basic") -> dict:
    from suite.cases.generate import make_case
    return json.loads(make_case(op, variant, 0, seed=0).to_json())


def _same(d: dict) -> dict:
    """The case under SAME padding (its output shape as SAME gives it, whatever the window)."""
    d["attrs"]["padding"] = "SAME"
    _, h, w, _ = d["inputs"][0]["shape"]
    d["outputs"][0]["shape"][1:3] = [-(-h // d["attrs"].get("stride_h", 1)), -(-w // d["attrs"].get("stride_w", 1))]
    return d


def _edit(op, **attrs):
    def make():
        d = _same(_case_doc(op)) if op in ("AVERAGE_POOL_2D", "CONV_2D", "DEPTHWISE_CONV_2D") else _case_doc(op)
        d["attrs"].update(attrs)
        return d
    return make


def _output_data():
    d = _case_doc("ADD")
    d["outputs"][0]["data"] = [0] * math.prod(d["outputs"][0]["shape"])
    return d


def _reshape_contradiction():
    d = _case_doc("RESHAPE")
    shape = d["inputs"][1]["data"] if len(d["inputs"]) > 1 else None
    d["attrs"]["new_shape"] = (shape[::-1] + [1]) if shape else [7, 7, 7]
    return d


def _shapes(op, inputs, outputs, data=None):
    """``op``'s case with its inputs of ``inputs`` shapes (int8 zeros, or ``data`` per input where given)."""
    def make():
        d = _case_doc(op)
        for i, shape in enumerate(inputs):
            d["inputs"][i]["shape"] = shape
            d["inputs"][i]["data"] = (data or {}).get(i, [0] * math.prod(shape))
        for i, shape in enumerate(outputs):
            d["outputs"][i]["shape"] = shape
        return d
    return make


HOSTILE_CASES = {   # probe of issue #21 -> (the case, the field its error names)
    "pool filter_height 2^24": (_edit("AVERAGE_POOL_2D", filter_height=1 << 24), "attrs.filter_height"),
    "conv dilation_h_factor 2^24": (_edit("CONV_2D", dilation_h_factor=1 << 24), "attrs.dilation_h_factor"),
    "depthwise dilation_w_factor 2^24": (_edit("DEPTHWISE_CONV_2D", dilation_w_factor=1 << 24),
                                         "attrs.dilation_w_factor"),
    "within each bound, beyond the golden's work": (_edit("DEPTHWISE_CONV_2D", dilation_w_factor=1 << 16,
                                                          dilation_h_factor=1 << 16), "attrs"),
    "keep_dims 'false'": (_edit("MEAN", keep_dims="false"), "attrs.keep_dims"),
    "beta 1e308": (_edit("SOFTMAX", beta=1e308), "attrs.beta"),
    "output with data": (_output_data, "outputs[0].data"),
    "RESHAPE new_shape against its shape input": (_reshape_contradiction, "attrs.new_shape"),
    "index 1e30": (lambda: {**_case_doc("ADD"), "index": 10 ** 30}, "index"),
    # issue #33: what the op computes, not only each tensor, is bounded
    "an empty tensor of 2^31-1 dimensions": (_shapes("ADD", [[0, DIM, DIM, DIM]] * 2, [[0, DIM, DIM, DIM]]),
                                             "inputs[0].shape"),
    "RESIZE_BILINEAR of 90 values to [8192, 2048]": (_shapes("RESIZE_BILINEAR", [[1, 5, 6, 3], [2]], [[1, 8192, 2048, 3]],
                                                             {1: [8192, 2048]}), "outputs"),
    "ADD [1,8192,1,1] + [1,1,8192,1]": (_shapes("ADD", [[1, 8192, 1, 1], [1, 1, 8192, 1]], [[1, 8192, 8192, 1]]),
                                        "outputs"),
    "the same, its output declared small": (_shapes("ADD", [[1, 8192, 1, 1], [1, 1, 8192, 1]], [[1, 1, 1, 1]]),
                                            "inputs[1].shape"),
    "PAD of 113 values by 2^30": (_shapes("PAD", [[113], [1, 2]], [[113]], {1: [0, 1 << 30]}), "inputs[1].data"),
}


@pytest.mark.parametrize("name", list(HOSTILE_CASES))
def test_a_hostile_case_is_one_error_before_anything_is_allocated(tmp_path, name):
    from suite.cases.files import load_case_files
    make, field = HOSTILE_CASES[name]
    p = tmp_path / "case.json"
    p.write_text(json.dumps(make()))
    with pytest.raises(QconformError) as e:
        load_case_files([str(p)])
    assert e.value.field == field and e.value.source == str(p), str(e.value)


@pytest.mark.parametrize("command", ["golden", "witness"])
def test_golden_and_witness_give_one_error_for_an_empty_tensor_of_huge_dimensions(tmp_path, qconform, command):
    """Issue #33: `array is too big` was a traceback of qconform golden and witness."""
    p = tmp_path / "case.json"
    p.write_text(json.dumps(HOSTILE_CASES["an empty tensor of 2^31-1 dimensions"][0]()))
    rc, err = qconform(tmp_path, command, str(p), *(["--target=ref"] if command == "witness" else []))
    assert rc == 2 and "Traceback" not in err and err.count("\n") == 1, err
    assert f"{p}: field 'inputs[0].shape'" in err and "above the supported 2^26" in err, err


def test_an_absent_option_means_one_value_for_the_golden_and_every_target(tmp_path):
    """LiteRT's schema gives an absent stride, beta or alpha 0; the golden 1, 1.0 and 0.2: the case
    that enters carries the golden's, so the model a target builds says the same."""
    from suite.cases.files import load_case_files
    d = _same(_case_doc("CONV_2D"))
    d["attrs"].update(stride_h=1, stride_w=1)
    d = _same(d)
    for k in ("stride_h", "stride_w", "dilation_h_factor", "dilation_w_factor", "fused_activation_function"):
        d["attrs"].pop(k, None)
    s = _case_doc("SOFTMAX")
    s["attrs"].pop("beta", None)
    for doc, want in ((d, {"stride_h": 1, "stride_w": 1, "dilation_h_factor": 1, "fused_activation_function": "NONE"}),
                      (s, {"beta": 1.0})):
        p = tmp_path / f"{doc['op']}.json"
        p.write_text(json.dumps(doc))
        got = load_case_files([str(p)])[0].attrs
        assert {k: got.get(k) for k in want} == want


def test_an_empty_case_folder_is_one_error(tmp_path):
    from suite.cases.files import load_case_files
    (tmp_path / "empty").mkdir()
    with pytest.raises(QconformError, match="holds no case files") as e:
        load_case_files([str(tmp_path / "empty")])
    assert e.value.field == "--case-file"


def _pytest_options(**given):
    from types import SimpleNamespace
    base = dict(target=[], ops=[], case_file=[], waivers=[], device=[], report_dir=None, tolerance=None,
                resume=None, model=None, hunt=None)
    return SimpleNamespace(**{**base, **given})


@pytest.mark.parametrize("given, field", [
    ({"target": [""]}, "--target"), ({"target": [",,,"]}, "--target"), ({"ops": [""]}, "--ops"),
    ({"report_dir": ""}, "--report-dir"), ({"hunt": -1.0}, "--hunt"), ({"hunt": float("nan")}, "--hunt"),
])
def test_an_option_given_empty_is_an_error_not_everything(given, field):
    from suite.harness.options import check_given
    check_given(_pytest_options(target=["ref"], ops=["ADD"], hunt=5.0))   # (the well-formed ones pass)
    with pytest.raises(QconformError) as e:
        check_given(_pytest_options(**given))
    assert e.value.field == field


@pytest.mark.parametrize("kw, field, words", [
    ({"seed": int("9" * 90)}, "--seed", "2^63"), ({"repeats": 10 ** 11}, "--repeats", "10,000"),
    ({"cases_per_op": 99_999_999}, "--cases-per-op", "10,000"),
    ({"target_options": {"htp": {"htp_performance_mode": "turbo9000"}}}, "--htp-performance-mode",
     "sustained_high_performance"),
])
def test_an_option_out_of_its_range_is_refused_with_its_bound(kw, field, words):
    from suite.harness.options import checked
    with pytest.raises(QconformError) as e:
        checked(targets=["ref"], **kw)
    assert e.value.field == field and words in str(e.value)


def test_a_tolerance_rule_for_a_misspelt_target_is_an_error_but_another_machines_target_is_not(tmp_path):
    from suite.core.tolerance import check_target_names, load_policy
    p = tmp_path / "tol.toml"
    p.write_text('format = "qconform-tolerance/1"\n[[rule]]\ntarget = "tfliet"\nmax_abs_lsb = 1\n'
                 '[[rule]]\ntarget = "acme-npu"\nmax_abs_lsb = 1\n[[rule]]\ntarget = "my-*"\nmax_abs_lsb = 1\n')
    policy = load_policy(p)
    with pytest.raises(QconformError, match="did you mean 'tflite'") as e:
        check_target_names(policy, ["ref", "tflite", "tflite-ref"])
    assert e.value.field == "rule[0].target"
    policy.rules[0].target = "tflite"
    check_target_names(policy, ["ref", "tflite", "tflite-ref", "mine"])   # acme-npu: another machine's own


# ----------------------------------------------------------------------------- 5. models

@pytest.mark.parametrize("name, field", [
    ("buffer-index.tflite", "subgraphs[0].tensors[0].buffer"),
    ("tensor-index.tflite", "subgraphs[0].operators[0].inputs[0]"),
    ("opcode-index.tflite", "subgraphs[0].operators[0].opcodeIndex"),
    ("short-buffer.tflite", "buffers[2]"),
    ("negative-dim.tflite", "subgraphs[0].tensors[0].shape"),
    ("huge-input.tflite", "subgraphs[0].tensors[0].shape"),   # [1, 100000, 100000, 10]
    ("empty.onnx", "graph.node"),                              # 0 bytes
    ("cycle.onnx", "graph.node[0].input[1]"),
])
def test_a_damaged_model_is_one_error_before_use(name, field):
    """(The models are made by tests/data/hostile/make_models.py.)"""
    from suite.models.harvest import harvest_model
    if name.endswith(".tflite"):
        pytest.importorskip("ai_edge_litert")
    else:
        pytest.importorskip("onnx")
    with pytest.raises(QconformError) as e:
        harvest_model(HOSTILE / name)
    assert e.value.field == field and e.value.source == str(HOSTILE / name), str(e.value)


def test_qconform_report_judges_with_the_run_folders_copy_never_a_path_in_run_json(tmp_path):
    """`qconform report RUN` (reports.build): run.json's tolerance path is never opened (a FIFO there
    would hang it); the folder's own tolerance.toml is the policy, else one error."""
    from reports.build import _policy
    from suite.core.tolerance import DEFAULT_FILE
    os.mkfifo(tmp_path / "fifo.toml")
    info = {"options": {"tolerance_file": str(tmp_path / "fifo.toml")}}
    with pytest.raises(QconformError) as e:
        _policy(tmp_path, info)
    assert e.value.field == "options.tolerance_file"
    shutil.copy(DEFAULT_FILE, tmp_path / "tolerance.toml")
    assert _policy(tmp_path, info).source == str(tmp_path / "tolerance.toml")
    assert _policy(tmp_path / "nowhere", {"options": {}}).source == str(DEFAULT_FILE)


@pytest.mark.parametrize("where, field", [
    ("initializer", "graph.initializer[0].data_location"),
    ("constant", "graph.node[0].attribute[0]"),
    ("subgraph", "graph.node[0].attribute[0].g.node[0].attribute[0]"),
])
def test_an_onnx_model_with_external_data_is_refused_without_opening_the_file_it_names(tmp_path, where, field):
    """Wherever a tensor keeps its data in another file, the harvest and the model runner refuse
    the model; the file it names is a FIFO beside it (opened, it would hang the test)."""
    pytest.importorskip("onnx")
    from onnx import TensorProto, helper

    from suite.models.harvest import harvest_model
    from suite.models.onnx import read_onnx
    w = helper.make_tensor("w", TensorProto.INT8, [1], [0])
    w.ClearField("int32_data")
    w.data_location = TensorProto.EXTERNAL
    w.external_data.add(key="location", value="secret.bin")
    y = helper.make_tensor_value_info("y", TensorProto.INT8, [1])
    if where == "initializer":
        g = helper.make_graph([helper.make_node("Identity", ["w"], ["y"])], "g", [], [y], [w])
    elif where == "constant":
        g = helper.make_graph([helper.make_node("Constant", [], ["y"], value=w)], "g", [], [y])
    else:   # a Constant inside an If's branch
        branch = helper.make_graph([helper.make_node("Constant", [], ["y"], value=w)], "b", [], [y])
        c = helper.make_tensor("c", TensorProto.BOOL, [], [True])
        g = helper.make_graph([helper.make_node("If", ["c"], ["y"], then_branch=branch, else_branch=branch)],
                              "g", [], [y], [c])
    path = tmp_path / "external.onnx"
    path.write_bytes(helper.make_model(g).SerializeToString())
    os.mkfifo(tmp_path / "secret.bin")
    for read in (harvest_model, read_onnx):   # (read_onnx: what the model runner reads it with)
        with pytest.raises(QconformError) as e:
            read(path)
        assert e.value.field == field and "external data" in str(e.value)


# ----------------------------------------------------------------------------- issue #33: models' types and scales

def _tflite_with(edit) -> bytes:
    from ai_edge_litert import schema_py_generated as S

    from suite.cases.generate import make_case
    from targets import tflite_model
    m = S.ModelT.InitFromPackedBuf(tflite_model.build(make_case("CONV_2D", "basic", 0, seed=0)).content, 0)
    edit(m.subgraphs[0])
    return tflite_model.serialize(m)


@pytest.mark.parametrize("inputs", [[], [-1]])
def test_a_read_variable_without_its_handle_is_one_error(tmp_path, inputs):
    """A READ_VARIABLE (a streaming model's state) whose input 0 is missing or absent: one error
    naming the operator's field, not a traceback (nor another tensor read as the variable)."""
    pytest.importorskip("ai_edge_litert")
    from ai_edge_litert import schema_py_generated as S

    from suite.models.harvest import harvest_model

    def edit(m):
        from targets.tflite_model import operator_codes
        m.operatorCodes += operator_codes(S, [S.BuiltinOperator.READ_VARIABLE])
        op = S.OperatorT()
        op.opcodeIndex, op.inputs, op.outputs = len(m.operatorCodes) - 1, inputs, [0]
        m.subgraphs[0].operators.insert(0, op)
    path = tmp_path / "read-variable.tflite"
    path.write_bytes(_tflite_model_with(edit))
    with pytest.raises(QconformError) as e:
        harvest_model(path)
    assert e.value.field == "subgraphs[0].operators[0].inputs[0]" and e.value.source == str(path), str(e.value)


def _tflite_model_with(edit) -> bytes:
    from ai_edge_litert import schema_py_generated as S

    from suite.cases.generate import make_case
    from targets import tflite_model
    m = S.ModelT.InitFromPackedBuf(tflite_model.build(make_case("CONV_2D", "basic", 0, seed=0)).content, 0)
    edit(m)
    return tflite_model.serialize(m)


def _qdq_onnx(scale: float) -> bytes:
    """x -> Q -> DQ -> Relu -> Q -> DQ -> y, every scale ``scale``."""
    import onnx
    from onnx import TensorProto, helper, numpy_helper
    inits = [numpy_helper.from_array(np.array(scale, np.float32), "s"), numpy_helper.from_array(np.array(0, np.int8), "z")]
    nodes = [helper.make_node("QuantizeLinear", ["x", "s", "z"], ["xq"]),
             helper.make_node("DequantizeLinear", ["xq", "s", "z"], ["xd"]),
             helper.make_node("Relu", ["xd"], ["r"]),
             helper.make_node("QuantizeLinear", ["r", "s", "z"], ["rq"]),
             helper.make_node("DequantizeLinear", ["rq", "s", "z"], ["y"])]
    g = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 8])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 8])], inits)
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)]).SerializeToString()


@pytest.mark.parametrize("name, make, field", [
    ("type99.tflite", lambda: _tflite_with(lambda sg: setattr(sg.tensors[sg.inputs[0]], "type", 99)),
     "subgraphs[0].tensors[0].type"),
    ("zero-scale.tflite", lambda: _tflite_with(lambda sg: setattr(sg.tensors[sg.inputs[0]].quantization, "scale", [0.0])),
     "subgraphs[0].tensors[0].quantization.scale"),
    ("zero-scale.onnx", lambda: _qdq_onnx(0.0), "graph.node[0].input[1]"),
    ("nan-scale.onnx", lambda: _qdq_onnx(float("nan")), "graph.node[0].input[1]"),
])
def test_a_model_of_an_unknown_type_or_a_scale_of_0_is_one_error(tmp_path, qconform, name, make, field):
    """Issue #33: a tensor of type 99 was a KeyError traceback of `qconform harvest`; a QDQ model
    whose scales were 0 was judged against a golden computed from NaN."""
    pytest.importorskip("ai_edge_litert" if name.endswith(".tflite") else "onnx")
    p = tmp_path / name
    p.write_bytes(make())
    rc, err = qconform(tmp_path, "harvest", str(p), "-o", str(tmp_path / "out"))
    assert rc == 2 and "Traceback" not in err and f"{p}: field '{field}'" in err, err
    assert not (tmp_path / "out").exists() or not any((tmp_path / "out").iterdir())
