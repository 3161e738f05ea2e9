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
