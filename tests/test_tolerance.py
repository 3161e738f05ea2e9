"""The tolerance policy file."""

from __future__ import annotations

import pytest

from suite.core.errors import QconformError
from suite.core.tolerance import load_policy


def test_default_policy_is_exact_for_reference_and_data_movement():
    p = load_policy()
    assert p.lookup("CONV_2D", "tflite-ref", "int8").max_abs_lsb == 0
    assert p.lookup("CONV_2D", "htp", "int8").max_abs_lsb == 1
    assert p.lookup("RESHAPE", "htp", "int8").max_abs_lsb == 0


def test_last_matching_rule_wins_and_versions_match(tmp_path):
    f = tmp_path / "t.toml"
    f.write_text('format = "qconform-tolerance/1"\n'
                 '[[rule]]\nmax_abs_lsb = 1\n'
                 '[[rule]]\nop = "SOFTMAX"\ntarget = "htp"\nmax_abs_lsb = 3\n'
                 'versions = { "onnxruntime-qnn" = "2.7.*" }\n')
    p = load_policy(f)
    assert p.lookup("SOFTMAX", "htp", "int8", {"onnxruntime-qnn": "2.7.0"}).max_abs_lsb == 3
    assert p.lookup("SOFTMAX", "htp", "int8", {"onnxruntime-qnn": "2.8.0"}).max_abs_lsb == 1
    assert p.lookup("ADD", "htp", "int8").max_abs_lsb == 1


@pytest.mark.parametrize("body,field", [
    ('format = "x"\n[[rule]]\nmax_abs_lsb = 1\n', "format"),
    ('format = "qconform-tolerance/1"\n', "rule"),
    ('format = "qconform-tolerance/1"\n[[rule]]\nop = "ADD"\n', "rule[0].max_abs_lsb"),
    ('format = "qconform-tolerance/1"\n[[rule]]\nmax_abs_lsb = -1\n', "rule[0].max_abs_lsb"),
    ('format = "qconform-tolerance/1"\n[[rule]]\nmax_abs_lsb = 1\nopp = "ADD"\n', "rule[0]"),
    ('format = "qconform-tolerance/1"\n[[rule]\n', None),
])
def test_bad_tolerance_file(tmp_path, body, field):
    f = tmp_path / "t.toml"
    f.write_text(body)
    with pytest.raises(QconformError) as e:
        load_policy(f)
    if field:
        assert f"field '{field}'" in str(e.value)
    assert str(f) in str(e.value)
