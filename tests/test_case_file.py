"""The case file contract (qconform-case/1): round trips and one clear error per bad field."""

from __future__ import annotations

import json

import numpy as np
import pytest

from suite.core.case import FORMAT, case_from_dict, load_case, save_case
from suite.core.errors import QconformError
from suite.cases.generate import make_case


def _valid() -> dict:
    return {
        "format": FORMAT, "op": "ADD", "attrs": {"fused_activation_function": "NONE"},
        "inputs": [
            {"dtype": "int8", "shape": [1, 3], "data": [-128, 0, 127], "scale": [0.5], "zero_point": [-1]},
            {"dtype": "int8", "shape": [1, 3], "data": [1, 2, 3], "scale": [0.25], "zero_point": [0]},
        ],
        "outputs": [{"dtype": "int8", "shape": [1, 3], "scale": [1.0], "zero_point": [0]}],
    }


def test_round_trip_keeps_content_and_digest(tmp_path):
    c = make_case("ADD", "broadcast", 1, seed=2)
    p = save_case(c, tmp_path / "c.json")
    d = load_case(p)
    assert d.id == c.id and d.op == c.op and d.attrs == c.attrs and d.digest() == c.digest()
    for a, b in zip(c.inputs, d.inputs):
        assert a.dtype == b.dtype and a.shape == b.shape and np.array_equal(a.data, b.data)
        assert a.scale == b.scale and a.zero_point == b.zero_point


def test_file_without_id_takes_the_stem(tmp_path):
    p = tmp_path / "my_case.json"
    p.write_text(json.dumps(_valid()))
    assert load_case(p).id == "my_case"


def _mutate(path, value):
    d = _valid()
    keys = path.split(".")
    cur = d
    for k in keys[:-1]:
        cur = cur[int(k)] if k.isdigit() else cur[k]
    last = keys[-1]
    if value is KeyError:
        del cur[int(last) if last.isdigit() else last]
    elif last.isdigit():
        cur[int(last)] = value
    else:
        cur[last] = value
    return d


@pytest.mark.parametrize("path,value,field,words", [
    ("format", "qconform-case/0", "format", "must be"),
    ("op", "CONV_3D", "op", "unknown operator"),
    ("op", 7, "op", "operator name"),
    ("inputs", [], "inputs", "non-empty"),
    ("inputs.0.dtype", "int9", "inputs[0].dtype", "unknown dtype"),
    ("inputs.0.shape", [1, -3], "inputs[0].shape", "non-negative"),
    ("inputs.0.data", [1, 2], "inputs[0].data", "has 2 values but shape [1, 3] holds 3"),
    ("inputs.0.data", [1, 2, 300], "inputs[0].data[2]", "outside the int8 range"),
    ("inputs.0.data", [1, 2.5, 3], "inputs[0].data[1]", "must be an integer"),
    ("inputs.0.data", KeyError, "inputs[0].data", "missing"),
    ("inputs.0.scale", [0.0], "inputs[0].scale[0]", "> 0"),
    ("inputs.0.scale", [-0.5], "inputs[0].scale[0]", "> 0"),
    ("inputs.0.scale", ["nan"], "inputs[0].scale[0]", "> 0"),
    ("inputs.0.zero_point", [128], "inputs[0].zero_point[0]", "outside the int8 range"),
    ("inputs.0.zero_point", [0, 0], "inputs[0].zero_point", "as long as scale"),
    ("outputs", KeyError, "outputs", "non-empty"),
    ("attrs", [1], "attrs", "object"),
])
def test_bad_field_gets_one_clear_error(tmp_path, path, value, field, words):
    p = tmp_path / "bad.json"
    p.write_text(json.dumps(_mutate(path, value)))
    with pytest.raises(QconformError) as e:
        load_case(p)
    msg = str(e.value)
    assert str(p) in msg and f"field '{field}'" in msg and words in msg, msg


def test_infinite_scale_is_rejected(tmp_path):
    p = tmp_path / "inf.json"
    p.write_text(json.dumps(_valid()).replace('"scale": [0.5]', '"scale": [1e999]'))
    with pytest.raises(QconformError, match="finite number > 0"):
        load_case(p)


def test_not_json_and_not_an_object(tmp_path):
    p = tmp_path / "x.json"
    p.write_text("{nope")
    with pytest.raises(QconformError, match="not valid JSON"):
        load_case(p)
    p.write_text("[1, 2]")
    with pytest.raises(QconformError, match="JSON object"):
        load_case(p)


def test_case_from_dict_accepts_per_axis_with_matching_dimension():
    d = _valid()
    d["inputs"][0] = {"dtype": "int8", "shape": [2, 3], "data": [0] * 6, "scale": [0.1, 0.2],
                      "zero_point": [0, 0], "quantized_dimension": 0}
    c = case_from_dict(d)
    s, z = c.inputs[0].broadcast_qparams()
    assert s.shape == (2, 1)


def test_per_axis_length_must_match_the_quantized_dimension(tmp_path):
    d = _valid()
    d["inputs"][0].update({"scale": [0.1, 0.2], "zero_point": [0, 0], "quantized_dimension": 1})
    p = tmp_path / "axis.json"
    p.write_text(json.dumps(d))
    with pytest.raises(QconformError) as e:
        load_case(p)
    assert "field 'inputs[0].scale'" in str(e.value) and "per-axis" in str(e.value)
    d["inputs"][0]["quantized_dimension"] = 5
    p.write_text(json.dumps(d))
    with pytest.raises(QconformError, match="quantized_dimension"):
        load_case(p)


# ------------------------------------------------------------------ checked where they enter (issue #14)

@pytest.mark.parametrize("old,new,field", [
    ('"op": "ADD"', '"op": "ADD", "op": "MUL"', "op"),   # json.load keeps the last one silently
    ('"fused_activation_function": "NONE"',
     '"fused_activation_function": "NONE", "fused_activation_function": "RELU"', "fused_activation_function"),
])
def test_a_key_given_twice_is_an_error(tmp_path, old, new, field):
    p = tmp_path / "dup.json"
    p.write_text(json.dumps(_valid()).replace(old, new, 1))
    with pytest.raises(QconformError) as e:
        load_case(p)
    assert (e.value.source, e.value.field, e.value.rule) == (str(p), field, "each key once"), str(e.value)
    assert "given twice" in str(e.value)


@pytest.mark.parametrize("shape,qdim,ok", [([1, 3], 7, False), ([1, 3], -1, False), ([1, 3], 2, False),
                                           ([1, 3], 1, True), ([], 0, True), ([], 1, False)])
def test_quantized_dimension_within_the_rank_even_per_tensor(tmp_path, shape, qdim, ok):
    d = _valid()
    for t in d["inputs"] + d["outputs"]:
        t["shape"], t["quantized_dimension"] = shape, qdim
        if "data" in t:
            t["data"] = t["data"][:1] if not shape else t["data"]
    if ok:
        assert case_from_dict(d).inputs[0].quantized_dimension == qdim
        return
    p = tmp_path / "qdim.json"
    p.write_text(json.dumps(d))
    with pytest.raises(QconformError) as e:
        load_case(p)
    assert e.value.field == "inputs[0].quantized_dimension" and e.value.rule == "0 <= dim < rank", str(e.value)


@pytest.mark.parametrize("case_id,words", [
    ("../../x", '"/"'), ("/abs/x", '"/"'), ("a\x00b", '"\\u0000"'), ("L" * 121, "121 characters"),
    (".hidden", "starts with '.'"), ("..", "starts with '.'"), ("", "is empty"), ("a b", '" "'),
    ("CONV_2D:ref", '":"'), ("x\\y", '"\\\\"'),
])
def test_case_id_limited_to_safe_characters_and_length(tmp_path, case_id, words):
    d = _valid()
    d["id"] = case_id
    p = tmp_path / "c.json"
    p.write_text(json.dumps(d))
    with pytest.raises(QconformError) as e:
        load_case(p)
    text = str(e.value)
    assert e.value.source == str(p) and e.value.field == "id" and words in text, text
    assert e.value.rule == "a case id is 1 to 120 of [A-Za-z0-9._~+-], not starting with '.'"
    assert "\n" not in text and len(text) - len(str(p)) < 250


def test_case_id_from_the_file_name_follows_the_same_rule(tmp_path):
    ok = tmp_path / ("a" * 120 + ".json")
    ok.write_text(json.dumps(_valid()))
    assert load_case(ok).id == "a" * 120
    bad = tmp_path / "my case.json"
    bad.write_text(json.dumps(_valid()))
    with pytest.raises(QconformError, match='give an "id"') as e:
        load_case(bad)
    assert e.value.field == "id"


def test_generated_case_ids_are_valid_ids():
    """Every generator's ids (LiteRT, the QNN dtypes and ONNX extras) pass the id rule."""
    from suite.cases.generate import generate, generator_ops
    from suite.core.case import id_problem
    cases = generate(generator_ops(), 30, 0)
    assert {"ADD-qnn_u8-000", "CONV_2D-sat_hi-000"} <= {c.id for c in cases}
    assert [c.id for c in cases if id_problem(c.id)] == []


def test_two_files_of_one_id_get_valid_distinct_ids(tmp_path):
    from suite.cases.files import load_case_files
    from suite.core.case import id_problem
    d = _valid()
    d["id"] = "x" * 120
    for name in ("a.json", "b b.json", "c.json"):
        (tmp_path / name).write_text(json.dumps(d))
    ids = [c.id for c in load_case_files([str(tmp_path)])]
    assert len(set(ids)) == 3 and ids[0] == "x" * 120 and [i for i in ids if id_problem(i)] == []


@pytest.mark.parametrize("attrs,field", [({"padding": "SAME_X"}, "attrs.padding"),
                                         ({"stride_h": "1"}, "attrs.stride_h")])
def test_options_the_golden_refuses_are_the_files_error(tmp_path, attrs, field):
    """The golden is computed at load: bad options name the file, not a target's error."""
    from suite.cases.files import load_case_files
    c = make_case("CONV_2D", "basic", 0, seed=0)
    c.attrs.update(attrs)
    p = save_case(c, tmp_path / "conv.json")
    with pytest.raises(QconformError) as e:
        load_case_files([str(p)])
    # (checked by the spec table's option types before the golden runs)
    assert (e.value.source, e.value.field, e.value.rule) == (str(p), field, "the case must follow its spec table"), \
        str(e.value)


def test_a_valid_id_is_its_own_failure_file_name():
    """The id rule is the failure file's naming rule: two valid ids never share a failure file."""
    from suite.harness.folder import safe_name
    for case_id in ("x" * 120, "a~b+c-d.e_f", "CONV_2D-sat_hi-000", "9"):
        assert safe_name(case_id) == case_id
