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
    ('format = "qconform-tolerance/1"\n[[rule]]\nmax_abs_lsb = 1\nbias_alpha = 0\n', "rule[0].bias_alpha"),
    ('format = "qconform-tolerance/1"\n[[rule]]\nmax_abs_lsb = 1\nbias_alpha = "1e-6"\n', "rule[0].bias_alpha"),
    ('format = "qconform-tolerance/1"\n[[rule]]\nmax_abs_lsb = 1\nmax_mean_err_lsb = -0.1\n', "rule[0].max_mean_err_lsb"),
    ('format = "qconform-tolerance/1"\n[[rule]]\nmax_abs_lsb = 1\nbias_alpha = 1e-6\nbias_min_mismatches = 2.5\n',
     "rule[0].bias_min_mismatches"),
    ('format = "qconform-tolerance/1"\n[[rule]]\nmax_abs_lsb = 1\nbias_min_mismatches = 20\n', "rule[0].bias_min_mismatches"),
])
def test_bad_tolerance_file(tmp_path, body, field):
    f = tmp_path / "t.toml"
    f.write_text(body)
    with pytest.raises(QconformError) as e:
        load_policy(f)
    if field:
        assert f"field '{field}'" in str(e.value)
    assert str(f) in str(e.value)


def test_bias_bounds(tmp_path):
    f = tmp_path / "t.toml"
    f.write_text('format = "qconform-tolerance/1"\n'
                 '[[rule]]\nmax_abs_lsb = 1\nbias_alpha = 1e-6\nbias_min_mismatches = 30\n'
                 '[[rule]]\nop = "MUL"\nmax_abs_lsb = 1\nmax_mean_err_lsb = 0.01\n'
                 '[[rule]]\nop = "SUB"\nmax_abs_lsb = 1\nmax_mean_err_lsb = 0.01\nbias_alpha = 1e-6\n'
                 '[[rule]]\nop = "RELU"\nmax_abs_lsb = 1\n')
    p = load_policy(f)
    add, mul, sub, relu = (p.lookup(op, "k", "int8") for op in ("ADD", "MUL", "SUB", "RELU"))
    # bias_alpha alone: a mean off 0 with a significant sign, over at least 30 mismatching elements
    assert "sign test p 1.86e-09" in add.bias_failure(30, 1000, 30, 0)
    assert add.bias_failure(29, 1000, 29, 0) is None                      # 29 < 30 mismatches
    assert add.bias_failure(-10, 1000, 30, 40) is None                    # p 0.28
    # max_mean_err_lsb alone: |mean| > 0.01 whatever the sign test
    assert "|mean| > 0.01 LSB" in mul.bias_failure(-11, 1000, 0, 11) and mul.bias_failure(10, 1000, 10, 0) is None
    assert mul.bias_failure(-11, 1000, 40, 51) is not None               # p 0.35, but |mean| 0.011
    # both: the mean beyond the bound and its sign significant
    assert sub.bias_failure(11, 1000, 11, 0) is None                     # p 0.001
    assert sub.bias_failure(30, 1000, 30, 0) is not None and sub.bias_failure(10, 1000, 30, 20) is None
    assert relu.bias_failure(500, 1000, 500, 0) is None                   # a rule without bias keys judges none
    d = load_policy().lookup("CONV_2D", "htp", "int8")
    assert (d.rule.bias_alpha, d.rule.bias_min_mismatches, d.rule.max_mean_err_lsb) == (1e-6, 20, 0.003)
    assert load_policy().lookup("ADD", "htp", "int16").rule.max_mean_err_lsb == 0.003


def test_the_shrink_toward_the_zero_point_takes_the_same_bound():
    """The certificate's toward-the-zero-point rule: the sign test, the mismatches and the size of the bias rule."""
    tol = load_policy().lookup("ADD", "x", "int8")
    assert "net 0.03 LSB > 0.003" in tol.shrink_failure(30, 0, 1000)
    assert tol.shrink_failure(30, 0, 20000) is None                        # p 1.9e-9, but 0.0015 LSB: too small
    assert tol.shrink_failure(16, 14, 1000) is None and tol.shrink_failure(19, 0, 1000) is None
    assert load_policy().lookup("RESHAPE", "x", "int8").shrink_failure(300, 0, 1000) is None   # no bias keys
