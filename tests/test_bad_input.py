"""Bad input: every file and option a user writes gets one clear error naming the file, the field
and the rule, and the command line exits without a traceback (pytest: status 4; qconform: 2).

One test per rule of the issue, per loader: case files, tolerance files, waiver files, device
values and netrun device profiles, encodings JSON, run folders (--resume, in test_resume.py),
unknown --target / --device / --ops.
"""

from __future__ import annotations

import copy
import json

import pytest

from suite.core.errors import QconformError
from targets.base import Target
from tests.inprocess import run_inprocess

pytest_plugins = "pytester"

# ----------------------------------------------------------------------------- helpers


@pytest.fixture
def run(pytester):
    """``pytest *args`` in this process; returns (run, its run folder)."""
    return lambda *args, **kw: run_inprocess(pytester, *args, **kw)


def _raises(fn, *args, field=None, words=(), source=None):
    """fn(*args) raises QconformError naming ``source``, ``field`` and containing ``words``."""
    with pytest.raises(QconformError) as e:
        fn(*args)
    text = str(e.value)
    if source is not None:
        assert e.value.source == str(source) and text.startswith(str(source)), text
    if field is not None:
        assert e.value.field == field and f"field '{field}'" in text, text
    for w in ((words,) if isinstance(words, str) else words):
        assert w in text, text
    assert "\n" not in text
    return e.value


def _one_line_usage_error(proc, *words):
    """pytest refused the command line: status 4, one ERROR line, no traceback."""
    lines = [ln for ln in proc.stderr.splitlines() if ln.strip()]
    assert proc.returncode == 4, proc.stdout + proc.stderr
    assert len(lines) == 1 and lines[0].startswith("ERROR: "), proc.stderr
    assert "Traceback" not in proc.stdout + proc.stderr
    for w in words:
        assert w in lines[0], lines[0]


# ----------------------------------------------------------------------------- case files

CASE = {
    "format": "qconform-case/1", "op": "FULLY_CONNECTED", "attrs": {"fused_activation_function": "NONE"},
    "inputs": [
        {"dtype": "int8", "shape": [1, 3], "data": [-128, 0, 127], "scale": [0.5], "zero_point": [-1]},
        {"dtype": "int8", "shape": [2, 3], "data": [1, 2, 3, -4, -5, -6], "scale": [0.25, 0.125],
         "zero_point": [0, 0], "quantized_dimension": 0, "const": True},
    ],
    "outputs": [{"dtype": "int8", "shape": [1, 2], "scale": [1.0], "zero_point": [3]}],
}


def _case_file(tmp_path, edit=None, text=None):
    d = copy.deepcopy(CASE)
    if edit:
        edit(d)
    p = tmp_path / "case.json"
    if text is not None:
        p.write_bytes(text if isinstance(text, bytes) else text.encode())
    else:
        p.write_text(json.dumps(d))
    return p


def _set(path, value):
    def edit(d):
        cur = d
        keys = path.split(".")
        for k in keys[:-1]:
            cur = cur[int(k)] if k.isdigit() else cur[k]
        last = keys[-1]
        if value is KeyError:
            del cur[int(last) if last.isdigit() else last]
        else:
            cur[int(last) if last.isdigit() else last] = value
    return edit


def test_the_valid_case_loads(tmp_path):
    from suite.cases.files import load_case_files
    assert load_case_files([str(_case_file(tmp_path))])[0].op == "FULLY_CONNECTED"


@pytest.mark.parametrize("op", ["CONV_9D", "conv_2d", ""])
def test_case_unknown_op(tmp_path, op):
    from suite.core.case import load_case
    p = _case_file(tmp_path, _set("op", op))
    _raises(load_case, p, source=p, field="op", words="(rule: op")


@pytest.mark.parametrize("dtype", ["int9", "INT8", "float64", 8, None])
def test_case_wrong_dtype(tmp_path, dtype):
    from suite.core.case import load_case
    p = _case_file(tmp_path, _set("inputs.0.dtype", dtype))
    _raises(load_case, p, source=p, field="inputs[0].dtype", words=("unknown dtype", "(rule: dtype name)"))


@pytest.mark.parametrize("data,words", [([1, 2], "has 2 values but shape [1, 3] holds 3"),
                                        ([1, 2, 3, 4], "has 4 values but shape [1, 3] holds 3"),
                                        ([], "has 0 values")])
def test_case_data_length_must_match_the_shape(tmp_path, data, words):
    from suite.core.case import load_case
    p = _case_file(tmp_path, _set("inputs.0.data", data))
    _raises(load_case, p, source=p, field="inputs[0].data", words=(words, "(rule: len(data) == product(shape))"))


@pytest.mark.parametrize("text", ["0", "-0.5", "NaN", "Infinity", "-Infinity", "1e39", "1" + "0" * 400, '"0.5"',
                                  "1e-50"])
def test_case_scale_must_be_a_finite_float32_above_zero(tmp_path, text):
    from suite.core.case import load_case
    raw = json.dumps(CASE).replace('"scale": [0.5]', f'"scale": [{text}]', 1)
    p = _case_file(tmp_path, text=raw)
    e = _raises(load_case, p, source=p, field="inputs[0].scale[0]")
    assert e.rule in ("scale > 0", "scale is a finite float32")


@pytest.mark.parametrize("where,zp,dtype", [("inputs.0", 128, "int8"), ("inputs.0", -129, "int8"),
                                            ("outputs.0", 256, "uint8"), ("outputs.0", -1, "uint8")])
def test_case_zero_point_within_the_dtype_range(tmp_path, where, zp, dtype):
    from suite.core.case import load_case

    def edit(d):
        t = d[where.split(".")[0]][0]
        t["dtype"], t["zero_point"] = dtype, [zp]
        if "data" in t:
            t["data"] = [0, 0, 0]
    p = _case_file(tmp_path, edit)
    f = where.replace(".0", "[0]") + ".zero_point[0]"
    _raises(load_case, p, source=p, field=f, words=(f"outside the {dtype} range",
                                                    "(rule: zero point within the dtype's range)"))


def test_case_per_axis_lengths_must_match_the_dimension(tmp_path):
    from suite.core.case import load_case
    p = _case_file(tmp_path, _set("inputs.1.scale", [0.25, 0.125, 0.5]))
    _raises(load_case, p, source=p, field="inputs[1].zero_point", words="as long as scale (3)")
    p = _case_file(tmp_path, lambda d: d["inputs"][1].update(scale=[0.1, 0.2, 0.3], zero_point=[0, 0, 0]))
    _raises(load_case, p, source=p, field="inputs[1].scale",
            words=("3 per-axis values but dimension 0 of [2, 3] is 2",
                   "(rule: per-axis length == shape[quantized_dimension])"))
    p = _case_file(tmp_path, _set("inputs.1.quantized_dimension", 2))
    _raises(load_case, p, source=p, field="inputs[1].quantized_dimension", words="(rule: 0 <= dim < rank)")


@pytest.mark.parametrize("text,words", [
    ("{", "not valid JSON"), ('{"format": 1' + "9" * 5000 + "}", "not valid JSON"),
    ("[" * 100000, "not valid JSON"), (b"\xff\xfe{}", "not UTF-8"), ("[]", "JSON object"),
])
def test_case_file_that_is_not_a_json_object(tmp_path, text, words):
    from suite.core.case import load_case
    p = _case_file(tmp_path, text=text)
    _raises(load_case, p, source=p, words=words)


def test_case_that_breaks_its_spec_table_names_the_clause(tmp_path):
    from suite.cases.files import load_case_files
    p = _case_file(tmp_path, _set("inputs.1.zero_point", [1, 0]))   # FC weights are symmetric
    e = _raises(load_case_files, [str(p)], source=p, words="(rule: the case must follow its spec table)")
    assert e.field and e.field.startswith("inputs[1]")


def test_case_with_an_output_the_op_does_not_have(tmp_path):
    """An extra output would never be compared (the golden has one): the spec check refuses it."""
    from suite.cases.files import load_case_files
    p = _case_file(tmp_path, lambda d: d["outputs"].append(dict(d["outputs"][0])))
    e = _raises(load_case_files, [str(p)], source=p, field="outputs",
                words=("FULLY_CONNECTED has 1 output(s), got 2", "(rule: the case must follow its spec table)"))
    assert "[litert-int8/FULLY_CONNECTED/outputs]" in str(e)


def test_case_files_on_the_command_lines(run, qconform_main, tmp_path):
    p = _case_file(tmp_path, _set("inputs.0.dtype", "int9"))
    proc, _ = run("--target=ref", f"--case-file={p}")
    _one_line_usage_error(proc, str(p), "field 'inputs[0].dtype'", "(rule: dtype name)")
    proc, _ = run("--target=ref", f"--case-file={tmp_path / 'missing.json'}")
    _one_line_usage_error(proc, "missing.json", "no such file")
    cli = qconform_main("golden", str(p))
    assert cli.returncode == 2 and "Traceback" not in cli.stderr
    assert cli.stderr.strip().splitlines() == [f"qconform: error: {p}: field 'inputs[0].dtype': unknown dtype "
                                               f"\"int9\" (known: {cli.stderr.split('(known: ')[1].split(')')[0]}) "
                                               f"(rule: dtype name)"]


# ----------------------------------------------------------------------------- tolerance files

TOL_OK = 'format = "qconform-tolerance/1"\n[[rule]]\nop = "ADD"\nmax_abs_lsb = 1\n'


@pytest.mark.parametrize("body,field,words", [
    ('format = "qconform-tolerance/2"\n[[rule]]\nmax_abs_lsb = 1\n', "format", "format tag"),
    ('format = "qconform-tolerance/1"\n', "rule", "rule list"),
    ('format = "qconform-tolerance/1"\nrule = 3\n', "rule", "rule list"),
    ('format = "qconform-tolerance/1"\n[[rule]]\nop = "ADD"\n', "rule[0].max_abs_lsb", "is required"),
    ('format = "qconform-tolerance/1"\n[[rule]]\nmax_abs_lsb = -1\n', "rule[0].max_abs_lsb", "non-negative"),
    ('format = "qconform-tolerance/1"\n[[rule]]\nmax_abs_lsb = nan\n', "rule[0].max_abs_lsb", "non-negative"),
    ('format = "qconform-tolerance/1"\n[[rule]]\nmax_abs_lsb = inf\n', "rule[0].max_abs_lsb", "non-negative"),
    ('format = "qconform-tolerance/1"\n[[rule]]\nmax_abs_lsb = "1"\n', "rule[0].max_abs_lsb", "non-negative"),
    ('format = "qconform-tolerance/1"\n[[rule]]\nmax_abs_lsb = 1' + "0" * 400 + "\n", "rule[0].max_abs_lsb",
     "non-negative"),
    ('format = "qconform-tolerance/1"\n[[rule]]\nmax_abs_lsb = 1\nmax_mismatch_pct = 101\n',
     "rule[0].max_mismatch_pct", "<= 100"),
    ('format = "qconform-tolerance/1"\n[[rule]]\nmax_abs_lsb = 1\nopp = "ADD"\n', "rule[0]", "known keys"),
    ('format = "qconform-tolerance/1"\n[[rule]]\nmax_abs_lsb = 1\nop = 3\n', "rule[0].op", "pattern"),
    ('format = "qconform-tolerance/1"\n[[rule]]\nmax_abs_lsb = 1\nversions = 3\n', "rule[0].versions", "table"),
    # an op or dtype pattern that matches nothing: the rule would never apply
    ('format = "qconform-tolerance/1"\n[[rule]]\nmax_abs_lsb = 1\nop = "CONV2D"\n', "rule[0].op",
     ("'CONV2D' matches no operator of the spec tables (did you mean 'CONV_2D'?)", "match something")),
    ('format = "qconform-tolerance/1"\n[[rule]]\nmax_abs_lsb = 0\n[[rule]]\nmax_abs_lsb = 1\nop = ["ADD", "conv_*"]\n',
     "rule[1].op[1]", "'conv_*' matches no operator"),
    ('format = "qconform-tolerance/1"\n[[rule]]\nmax_abs_lsb = 1\ndtype = "int9"\n', "rule[0].dtype",
     ("'int9' matches no dtype the suite knows", "match something")),
    ('format = "qconform-tolerance/1"\n[[rule]]\nmax_abs_lsb = 1\ndtype = ["int8", "uint*7"]\n', "rule[0].dtype[1]",
     "'uint*7' matches no dtype"),
    # fnmatch is quadratic in '[': a 100,000-character pattern took minutes per match
    ('format = "qconform-tolerance/1"\n[[rule]]\nmax_abs_lsb = 1\ntarget = "*' + "[" * 100000 + '"\n',
     "rule[0].target", "longer than 200 characters"),
    ('format = "qconform-tolerance/1"\n[[rule]]\nmax_abs_lsb = 1\nversions = { rt = "' + "[" * 201 + '" }\n',
     "rule[0].versions", "at most 200 characters"),
    ('format = "qconform-tolerance/1"\n[[rule]\n', None, "not valid TOML"),
    ('format = "qconform-tolerance/1"\nx = ' + "[" * 100000 + "\n", None, "not valid TOML"),
    ('format = "qconform-tolerance/1"\nx = 1' + "0" * 5000 + "\n", None, "not valid TOML"),
])
def test_tolerance_file_rules(tmp_path, body, field, words):
    from suite.core.tolerance import load_policy
    p = tmp_path / "tol.toml"
    p.write_text(body)
    _raises(load_policy, p, source=p, field=field, words=words)


def test_tolerance_patterns_that_match_an_op_or_dtype_load(tmp_path):
    from suite.core.tolerance import load_policy
    p = tmp_path / "tol.toml"
    p.write_text('format = "qconform-tolerance/1"\n[[rule]]\nmax_abs_lsb = 1\nop = ["CONV_*", "Quantize*"]\n'
                 'dtype = ["u*", "int8"]\n')
    pol = load_policy(p)
    assert pol.lookup("CONV_2D", "htp", "uint8").max_abs_lsb == 1
    assert pol.lookup("QuantizeLinear", "htp", "int8").max_abs_lsb == 1 and pol.lookup("ADD", "htp", "int8").rule is None


def test_findings_name_operators_that_exist(tmp_path, monkeypatch):
    """The shipped findings load; a finding for an op no table has would explain nothing."""
    from suite.core import findings as fmod
    assert fmod.findings()
    bad = tmp_path / "findings.toml"
    bad.write_text('format = "qconform-findings/1"\n[[finding]]\nid = "x"\nop = ["ADD", "CONV2D"]\n'
                   'target = "htp"\nreason = "r"\n')
    monkeypatch.setattr(fmod, "FILE", bad)
    fmod.findings.cache_clear()
    try:
        _raises(fmod.findings, source=bad, field="finding[0].op[1]", words="'CONV2D' matches no operator")
    finally:
        fmod.findings.cache_clear()


def test_tolerance_file_not_utf8_or_missing(tmp_path):
    from suite.core.tolerance import load_policy
    p = tmp_path / "tol.toml"
    p.write_bytes(b"\xff" + TOL_OK.encode())
    _raises(load_policy, p, source=p, words="not UTF-8")
    _raises(load_policy, tmp_path / "none.toml", source=tmp_path / "none.toml", field="--tolerance",
            words="cannot read")


# ----------------------------------------------------------------------------- waiver files

W_HEAD = 'format = "qconform-waivers/1"\ntarget = "htp"\n'
W_ONE = '[[waiver]]\ncase = "ADD-*"\nreason = "r"\nversions = { onnxruntime-qnn = "2.7.*" }\nexpires = 2027-03-31\n'


@pytest.mark.parametrize("body,field,words", [
    ('format = "qconform-waivers/2"\n' + W_ONE, "format", "format tag"),
    (W_HEAD + "owner = 'me'\n" + W_ONE, None, "known keys"),
    (W_HEAD + "waiver = 3\n", "waiver", "[[waiver]] tables"),
    (W_HEAD + W_ONE.replace('case = "ADD-*"\n', ""), "waiver[0].case", "names its case"),
    (W_HEAD + W_ONE.replace('reason = "r"', 'reason = " "'), "waiver[0].reason", "names its case and its reason"),
    (W_HEAD + W_ONE.replace('versions = { onnxruntime-qnn = "2.7.*" }\n', ""), "waiver[0].versions",
     "tied to a runtime version"),
    (W_HEAD + W_ONE.replace("expires = 2027-03-31\n", ""), "waiver[0].expires", "waivers expire"),
    (W_HEAD + W_ONE.replace("expires = 2027-03-31", 'expires = "soon"'), "waiver[0].expires", "expiry date"),
    (W_HEAD + W_ONE + "ticket = 1\n", "waiver[0]", "known keys"),
    ('format = "qconform-waivers/1"\n' + W_ONE, "waiver[0].target", "one target"),
    (W_HEAD + W_ONE.replace('"ADD-*"', '"*' + "[" * 100000 + '"'), "waiver[0].case", "longer than 200"),
    (W_HEAD + W_ONE.replace('"2.7.*"', '"' + "[" * 201 + '"'), "waiver[0].versions.onnxruntime-qnn", "longer than 200"),
    (W_HEAD + "[[waiver]\n", None, "not valid TOML"),
    (W_HEAD + "x = " + "[" * 100000, None, "not valid TOML"),
])
def test_waiver_file_rules(tmp_path, body, field, words):
    from suite.core.waivers import load_waiver_file
    p = tmp_path / "w.toml"
    p.write_text(body)
    _raises(load_waiver_file, p, source=p, field=field, words=words)


# ----------------------------------------------------------------------------- device values and profiles

@pytest.mark.parametrize("value,words", [
    ("usb:1234", "unknown device kind 'usb'"), ("ssh:", "names no host"), ("adb", "names no serial"),
    ("ssh:pi@board?colour=red", "unknown setting 'colour'"), ("ssh:pi@board?timeout=&&", "bad settings"),
    ("ssh:pi@board?timeout=soon", "is not a number"), ("ssh:pi@board?retries=nan", "must be >= 0"),
    ("ssh:-oProxyCommand=x", "must not start with '-'"),
    ("adb:A,adb:A", "given twice"), ("", "no device given"), (" , ", "unknown device kind"),
])
def test_device_value_rules(value, words):
    from targets.transport import parse_device_list
    _raises(parse_device_list, [value], field="--device", words=words)


PROFILE = ('format = "qconform-netrun/1"\nmodel_format = "onnx"\n'
           'command = ["{libdir}/qnn-net-run", "--model", "{model}", "--input_list", "{input_list}", '
           '"--output_dir", "{output_dir}"]\n')


@pytest.mark.parametrize("body,field,words", [
    (PROFILE.replace("/1", "/2"), "format", "format tag"),
    (PROFILE.replace('"onnx"', '"dlc"'), "model_format", "model formats"),
    (PROFILE.replace("command = [", "command = 3 #"), "command", "command template"),
    (PROFILE.replace("{model}", "{modle}"), "command[2]", "unknown placeholder {modle}"),
    (PROFILE.replace("{model}", "{model"), "command[2]", "bad template"),
    (PROFILE + 'push = ["no/such/lib.so"]\n', "push[0]", "no such file"),
    (PROFILE + "timeout = 0\n", "timeout", "> 0"),
    (PROFILE + "timeout = nan\n", "timeout", "> 0"),
    (PROFILE + 'env = { "1X" = "a" }\n', "env.1X", "environment variable name"),
    (PROFILE + "native_input = 1\n", "native_input", "true or false"),
    (PROFILE + 'output_file = "out.raw"\n', "output_file", "{tensor}"),
    (PROFILE + "colour = 1\n", "colour", "profile keys"),
    (PROFILE + "[prepare]\ncommands = []\n", "prepare.commands", "argv lists"),
    (PROFILE + "[x\n", None, "not valid TOML"),
])
def test_netrun_profile_rules(tmp_path, body, field, words):
    from targets.netrun import load_profile
    p = tmp_path / "profile.toml"
    p.write_text(body)
    _raises(load_profile, p, source=p, field=field, words=words)


def test_netrun_profile_not_utf8_and_absurd_paths(tmp_path):
    from targets.netrun import load_profile
    p = tmp_path / "profile.toml"
    p.write_bytes(b"\xff\xfe" + PROFILE.encode())
    _raises(load_profile, p, source=p, words="not UTF-8")
    p.write_text(PROFILE + f'push = ["{"a" * 5000}"]\n')
    _raises(load_profile, p, source=p, field="push[0]", words="no such file")
    p.write_text(PROFILE + 'push = ["a\\u0000b"]\n')
    _raises(load_profile, p, source=p, field="push[0]", words="no such file")


# ----------------------------------------------------------------------------- encodings JSON

ENC = {"activation_encodings": {"x": [{"bitwidth": 8, "min": -1.0, "max": 1.0}]},
       "param_encodings": {"w": [{"bitwidth": 8, "is_symmetric": "True", "min": -0.5, "max": 0.5,
                                  "offset": -128, "scale": 0.0039}]}}


@pytest.mark.parametrize("edit,field,words", [
    (lambda d: d.pop("param_encodings"), "param_encodings", "both present"),
    (lambda d: d["activation_encodings"].update(x=[]), "activation_encodings.x", "encoding list"),
    (lambda d: d["activation_encodings"]["x"][0].update(bitwidth=7), "activation_encodings.x[0].bitwidth",
     "bitwidth is"),
    (lambda d: d["activation_encodings"]["x"][0].update(min=float("nan")), "activation_encodings.x[0].min",
     "finite number"),
    (lambda d: d["activation_encodings"]["x"][0].update(min=10**400), "activation_encodings.x[0].min",
     "finite number"),
    (lambda d: d.update(version=2), "version", "not a known encodings version"),
    # scale and offset without min/max: the rules of a versioned file's scale and offset
    (lambda d: d["activation_encodings"].update(x=[{"bitwidth": 8, "scale": 0.1, "offset": 5}]),
     "activation_encodings.x[0].offset", "zero outside the 8-bit codes"),
    (lambda d: d["activation_encodings"].update(x=[{"bitwidth": 8, "scale": 0.1, "offset": -256}]),
     "activation_encodings.x[0].offset", "zero outside the 8-bit codes"),
    (lambda d: d["activation_encodings"].update(x=[{"bitwidth": 8, "scale": 1e39, "offset": -3}]),
     "activation_encodings.x[0].scale", "within float32"),
    (lambda d: d["activation_encodings"]["x"][0].update(min=-1e308, max=1e308), "activation_encodings.x[0].max",
     "within float32"),
])
def test_encodings_rules(tmp_path, edit, field, words):
    from suite.core.encodings import read_encodings
    d = copy.deepcopy(ENC)
    edit(d)
    p = tmp_path / "enc.json"
    p.write_text(json.dumps(d))
    _raises(read_encodings, p, source=p, field=field, words=words)


@pytest.mark.parametrize("text,words", [("{", "not valid JSON"), ('{"a": 1' + "0" * 5000 + "}", "not valid JSON"),
                                        ("[" * 100000, "not valid JSON"), (b"\xff", "not UTF-8"),
                                        ("[]", "JSON object")])
def test_encodings_file_that_is_not_a_json_object(tmp_path, text, words):
    from suite.core.encodings import read_encodings
    p = tmp_path / "enc.json"
    p.write_bytes(text if isinstance(text, bytes) else text.encode())
    _raises(read_encodings, p, source=p, words=words)


# ----------------------------------------------------------------------------- on the command lines

def test_bad_files_and_options_are_one_line_usage_errors(run, qconform_main, tmp_path):
    tol = tmp_path / "tol.toml"
    tol.write_text('format = "qconform-tolerance/1"\n[[rule]]\nmax_abs_lsb = -1\n')
    proc, _ = run("--target=ref", "--ops", "ADD", f"--tolerance={tol}")
    _one_line_usage_error(proc, str(tol), "field 'rule[0].max_abs_lsb'", "(rule: non-negative tolerance)")

    w = tmp_path / "w.toml"
    w.write_text(W_HEAD + W_ONE.replace("expires = 2027-03-31\n", ""))
    proc, _ = run("--target=ref", "--ops", "ADD", f"--waivers={w}")
    _one_line_usage_error(proc, str(w), "field 'waiver[0].expires'", "(rule: waivers expire)")

    prof = tmp_path / "p.toml"
    prof.write_bytes(b"\xff")
    proc, _ = run("--target=netrun", "--ops", "ADD", f"--netrun-profile={prof}")
    _one_line_usage_error(proc, str(prof), "not UTF-8")

    proc, _ = run("--target=nope", "--ops", "ADD")
    _one_line_usage_error(proc, "field '--target'", "unknown target 'nope'", "(rule: target name)")
    proc, _ = run("--target=tests.no_such_module:X", "--ops", "ADD")
    _one_line_usage_error(proc, "field '--target'", "cannot import module")
    proc, _ = run("--target=ref", "--device=usb:1", "--ops", "ADD")
    _one_line_usage_error(proc, "field '--device'", "unknown device kind 'usb'")
    proc, _ = run("--target=htp", "--device=ssh:pi@board?timeout=soon", "--ops", "ADD")
    _one_line_usage_error(proc, "field '--device'", "'timeout=soon' is not a number")
    proc, _ = run("--target=htp", "--device=", "--ops", "ADD")
    _one_line_usage_error(proc, "field '--device'", "no device given")
    proc, _ = run("--target=ref", "--ops", "ADD,CONV_9D")
    _one_line_usage_error(proc, "field '--ops'", "CONV_9D", "(rule: operators of the spec tables)")

    enc = tmp_path / "enc.json"
    enc.write_text('{"activation_encodings": {}}')
    cli = qconform_main("encodings", str(enc))
    assert cli.returncode == 2 and "Traceback" not in cli.stderr
    assert cli.stderr.strip().splitlines() == [
        f"qconform: error: {enc}: field 'param_encodings': is missing (rule: activation_encodings and "
        f"param_encodings are both present (may be empty))"]


# ----------------------------------------------------------------------------- checked where they enter (#14)

def test_case_file_options_the_golden_refuses_stop_the_run_before_any_target(run, qconform_main, tmp_path):
    """Before: padding "SAME_X" was 1 skipped and exit 0 (stride_h "1" a TypeError charged to the
    target); now one usage error naming the file, the field and the rule, and no run folder."""
    from suite.cases.generate import make_case
    from suite.core.case import save_case
    for attrs, field, words in (({"padding": "SAME_X"}, "attrs.padding", "must be one of SAME, VALID"),
                                ({"stride_h": "1"}, "attrs.stride_h", "must be an integer in [1, 65536]")):
        c = make_case("CONV_2D", "basic", 0, seed=0)
        c.attrs.update(attrs)
        p = save_case(c, tmp_path / f"{field}.json")
        proc, rd = run("--target=ref,tests.spine_targets:OffByOne", f"--case-file={p}")
        _one_line_usage_error(proc, str(p), f"field '{field}'", words, "(rule: the case must follow its spec table)")
        assert not (tmp_path / "report").exists() and not rd.exists()
    cli = qconform_main("golden", str(p))
    assert cli.returncode == 2 and cli.stderr.startswith(f"qconform: error: {p}: field 'attrs.stride_h'"), cli.stderr


def test_case_file_with_an_unsafe_id_is_refused_on_the_command_line(run, tmp_path):
    p = _case_file(tmp_path, _set("id", "../../x"))
    proc, _ = run("--target=tests.helper_targets:WrongTarget", f"--case-file={p}")
    _one_line_usage_error(proc, str(p), "field 'id'", '"../../x" has the character(s) "/"', "(rule: a case id is")


def test_cases_per_op_bound_and_did_you_mean(run):
    proc, _ = run("--target=ref", "--ops", "ADD", "--cases-per-op=100000000")
    _one_line_usage_error(proc, "field '--cases-per-op'", "must be <= 10,000 (got 100,000,000)")
    proc, _ = run("--target=ref", "--ops", "ADD", "--cases-per-op=10000", "--collect-only", "-q")
    assert proc.returncode == 0, proc.stderr   # the bound itself is allowed
    proc, _ = run("--target=ref", "--ops", "ADD,CONV2D")
    _one_line_usage_error(proc, "field '--ops'", "unknown operator(s) CONV2D (did you mean 'CONV_2D'?)")
    proc, _ = run("--target=tflit", "--ops", "ADD")
    _one_line_usage_error(proc, "field '--target'", "unknown target 'tflit' (did you mean 'tflite'?")
    proc, _ = run("--target=ref", "--ops", "ADD", "--scheme=tflite-ref-dbl")
    _one_line_usage_error(proc, "field '--scheme'", "did you mean 'tflite-ref-double'?")


# ----------------------------------------------------------------------------- target names

class Unnamed(Target):   # (these classes are --target=tests.test_bad_input:X)
    def run_one(self, case, timing):
        raise AssertionError("never run")


class NamedRef(Unnamed):
    name = "ref"


class NamedHtp(Unnamed):
    name = "htp"


class BadName(Unnamed):
    name = "my kernel/2"


class OffByOneToo(Unnamed):
    name = "off-by-one"


def test_a_module_class_target_is_named_by_its_class(run, tmp_path, qconform_cli):
    """Rows, test ids, the summary and the failure folder say the class's name; run.json's
    options and the repro command select it by module:Class, and the repro fails as the run did."""
    sel = "tests.spine_targets:OffByOne"
    proc, rd = run(f"--target={sel}", "--ops", "ADD", "--cases-per-op", "2")
    assert proc.returncode == 1, proc.stdout + proc.stderr
    from tests.conftest import rows_written
    rows = rows_written(rd)
    assert {r["target"] for r in rows} == {"off-by-one"}
    [r] = [r for r in rows if r["status"] == "fail"][:1]
    assert f"::ADD:off-by-one::test_case[{r['case_id']}:off-by-one]" in proc.stdout
    assert "off-by-one" in (rd / "summary.csv").read_text() and sel not in (rd / "summary.csv").read_text()
    assert json.loads((rd / "run.json").read_text())["options"]["targets"] == [sel]
    assert f"/failures/off-by-one/{r['case_id']}.json" in r["failure_file"]
    assert json.loads(open(r["failure_file"]).read())["judged"]["target"] == sel
    import shlex
    repro = shlex.split(r["repro"])
    assert repro[:3] == ["qconform", "repro", r["failure_file"]] and f"--target={sel}" in repro
    again = qconform_cli(*repro[1:])
    assert again.returncode == 1 and again.stdout.startswith("STILL FAILS"), again.stdout + again.stderr
    from suite.harness.repro import pytest_command   # its pytest form judges it as the run did too
    judged = json.loads(open(r["failure_file"]).read())["judged"]
    form = [a for a in shlex.split(pytest_command(judged, r["failure_file"]))[1:] if not a.startswith("--report-dir")]
    again, _ = run(*form, report_dir=tmp_path / "again")
    assert again.returncode == 1 and "1 failed" in again.stdout, again.stdout + again.stderr
    # and a rerun of the failure file under a laxer setting is refused for this target too
    lax, _ = run(f"--target={sel}", f"--case-file={r['failure_file']}", "--scheme=tflite-ref-single",
                 report_dir=tmp_path / "lax")
    _one_line_usage_error(lax, "field 'judged'", "a rerun must be as strict as the run that failed it")


def test_target_names_unnamed_clashing_and_unsafe(run):
    from targets import target_name
    assert target_name("tests.test_bad_input:Unnamed") == "tests.test_bad_input:Unnamed"   # no name of its own
    assert target_name("targets.ref:RefTarget") == "ref"                                   # the built-in itself
    _raises(target_name, "tests.test_bad_input:NamedHtp", field="--target",
            words=("the name of the target targets.htp:HtpTarget", "(rule: one name, one target)"))
    _raises(target_name, "tests.test_bad_input:BadName", field="--target", words="(rule: a target name is")
    proc, _ = run("--target=tests.spine_targets:OffByOne,tests.test_bad_input:OffByOneToo", "--ops", "ADD")
    _one_line_usage_error(proc, "field '--target'", "are both named 'off-by-one'", "(rule: one name, one target)")
    proc, _ = run("--target=ref,tests.test_bad_input:NamedRef", "--ops", "ADD")
    _one_line_usage_error(proc, "field '--target'", "the name of the target targets.ref:RefTarget")
    proc, _ = run("--target=ref,targets.ref:RefTarget", "--ops", "ADD")
    _one_line_usage_error(proc, "field '--target'", "'ref' and 'targets.ref:RefTarget' are both named 'ref'")


def test_shrink_judges_a_target_by_the_name_a_run_gives_it(tmp_path):
    """A tolerance rule for "off-by-one" passes its 2 LSB cases in a run: shrink (given the
    module:Class selector) must judge them by the same rule, not by the selector string."""
    from suite.cases.generate import make_case
    from suite.harness.shrink import make_judge
    tol = tmp_path / "tol.toml"
    tol.write_text('format = "qconform-tolerance/1"\n[[rule]]\nmax_abs_lsb = 0\n'
                   '[[rule]]\ntarget = "off-by-one"\nmax_abs_lsb = 2\n')
    judge = make_judge("tests.spine_targets:OffByOne", str(tol), isolation="none")
    try:
        j = judge(make_case("ADD", "sat_hi", 1, seed=0))   # odd index: 2 LSB off
    finally:
        judge.close()
    assert j.status == "pass" and not j.fails and "max |err| 2 LSB" in j.reason, j
