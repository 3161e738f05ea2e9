"""SNPE/QNN encodings: the seed's worked examples, the algorithm's rules, 4-bit packing, the JSON reader."""

from __future__ import annotations

import json

import numpy as np
import pytest

from suite.cli import main as cli_main
from suite.core.encodings import (Encoding, bias_encodings, compute_encoding, pack_4bit, parse_encodings,
                             per_channel_encodings, quantize_per_channel, read_encodings, unpack_4bit)
from suite.core.errors import QconformError

# The seed's AIMET-style example (shared/seeds/000_*), abridged to its tensors.
SEED_FILE = {
    "activation_encodings": {
        "Conv1:0": [{"bitwidth": 8, "max": 12.82344407824954, "min": 0.0, "offset": 0,
                     "scale": 0.050288015993135454}],
        "input:0": [{"bitwidth": 8, "max": 0.9960872825108046, "min": -1.0039304197656937, "offset": 127,
                     "scale": 0.007843206675594112}],
    },
    "param_encodings": {
        "Conv2d/weights": [{"bitwidth": 8, "max": 1.700559472933134, "min": -2.1006477158567995, "offset": 140,
                            "scale": 0.01490669485799974}],
    },
}
SEED_PER_TENSOR_WEIGHT = {"features.9.conv.3.weight": [
    {"bitwidth": 8, "is_symmetric": "False", "max": 3.0387749017453665, "min": -2.059169834735364,
     "offset": -103, "scale": 0.019991940143061618}]}
SEED_PER_CHANNEL = {"features.8.conv.3.weight": [
    {"bitwidth": 8, "is_symmetric": "True", "max": 0.7011175155639648, "min": -0.7066381259227362,
     "offset": -128.0, "scale": 0.005520610358771377},
    {"bitwidth": 8, "is_symmetric": "True", "max": 0.5228064656257629, "min": -0.5269230519692729,
     "offset": -128.0, "scale": 0.004116586343509945},
    {"bitwidth": 8, "is_symmetric": "True", "max": 0.7368279099464417, "min": -0.7426297045129491,
     "offset": -128.0, "scale": 0.005801794566507415}]}


# ------------------------------------------------------------------ the algorithm

def test_seed_worked_example():
    x = [-1.8, -1.0, 0.0, 0.5]
    e = compute_encoding(x)
    assert e.min == pytest.approx(-1.803922, abs=5e-7)
    assert e.max == pytest.approx(0.496078, abs=5e-7)
    assert e.scale == pytest.approx(0.009020, abs=5e-7)
    q = e.quantize(x)
    assert q.tolist() == [0, 89, 200, 255]
    # the seed prints -1.0011 for code 89: -111 * 0.0090196 = -1.001176 (within 1e-4)
    assert np.allclose(e.dequantize(q), [-1.8039, -1.0011, 0.0, 0.4961], atol=1e-4)
    assert e.dequantize([200])[0] == 0.0          # zero exactly representable
    assert (e.zero_point, e.offset) == (200, -200)  # QNN offset = -zero_point


def test_three_sign_cases():
    pos = compute_encoding([5.0, 7.5, 10.0])
    assert (pos.min, pos.max, pos.zero_point) == (0.0, 10.0, 0)
    neg = compute_encoding([-20.0, -13.0, -6.0])
    assert (neg.min, neg.max, neg.zero_point) == (-20.0, 0.0, 255)
    both = compute_encoding([-5.1, 5.1])
    # step 10.2 / 255 = 0.04; zero falls between codes 127 and 128; the range shifts by -0.02
    assert both.scale == pytest.approx(0.04)
    assert both.min == pytest.approx(-5.12) and both.max == pytest.approx(5.08)
    assert both.zero_point == 128 and both.dequantize([128])[0] == 0.0


def test_minimum_range():
    e = compute_encoding([0.0, 0.0, 0.0])
    assert (e.min, e.max) == (0.0, pytest.approx(0.01))
    e = compute_encoding([-0.001, 0.002])
    assert e.max - e.min == pytest.approx(0.01)
    assert e.dequantize([e.zero_point])[0] == 0.0
    # wide ranges are untouched
    assert compute_encoding([-1.0, 1.0]).max - compute_encoding([-1.0, 1.0]).min == pytest.approx(2.0)


@pytest.mark.parametrize("bw,codes", [(8, 255), (16, 65535), (4, 15)])
def test_bitwidths(bw, codes):
    e = compute_encoding([-3.0, 1.0], bitwidth=bw)
    assert e.steps == codes
    assert e.scale == pytest.approx(4.0 / codes)
    q = e.quantize([-3.0, 0.0, 1.0])
    assert q[0] == 0 and q[2] == codes and e.dequantize([q[1]])[0] == 0.0
    dtype, scale, zp = e.qparams(signed=False)
    assert dtype == f"uint{bw}" and zp == -e.offset and scale == float(np.float32(e.scale))


def test_symmetric_per_channel_weights():
    w = np.array([[0.70111752, -0.3, 0.1], [0.5228064, -0.2, 0.0], [-0.1, 0.2, 0.73682791]])
    encs = per_channel_encodings(w, axis=0)
    assert [e.offset for e in encs] == [-128, -128, -128]          # offset = -2^(bw-1)
    assert encs[0].scale == pytest.approx(0.70111752 / 127)
    # the seed's channel 0: max 0.7011 = 127 * scale, min -0.7066 = -128 * scale
    assert encs[0].max == pytest.approx(0.7011175155639648, rel=1e-7)
    assert encs[0].min == pytest.approx(-0.7066381259227362, rel=1e-7)
    assert all(e.qparams(signed=True)[0] == "int8" and e.qparams(signed=True)[2] == 0 for e in encs)
    q = quantize_per_channel(w, encs, axis=0)
    assert q.min() >= -127 and q.max() <= 127
    assert q[0, 0] == 127 and q[2, 2] == 127


def test_bias_is_32_bit_with_the_product_scale():
    (b,) = bias_encodings(0.5, [0.25])
    assert b.bitwidth == 32 and b.scale == 0.125 and b.offset == -(2**31)
    assert b.qparams(signed=True) == ("int32", 0.125, 0)


def test_packed_4bit():
    # the seed: unpacked (0000 1010, 0000 0100) -> packed (0100 1010)
    assert pack_4bit(np.array([10, 4])).tolist() == [0b01001010]
    # per-channel: 27 values per channel pack into ceil(27/2) = 14 bytes
    codes = np.random.default_rng(0).integers(-8, 8, size=(3, 3, 3, 32))
    packed = pack_4bit(codes, axis=3)
    assert packed.shape == (32, 14)
    back = unpack_4bit(packed, 27, signed=True)
    assert np.array_equal(back, np.moveaxis(codes, 3, 0).reshape(32, 27))
    assert unpack_4bit(pack_4bit([1, 2, 3]), 3, signed=False).tolist() == [1, 2, 3]


# ------------------------------------------------------------------ the reader

def _write(tmp_path, obj, name="enc.json"):
    p = tmp_path / name
    p.write_text(json.dumps(obj) if not isinstance(obj, str) else obj)
    return p


def test_reader_seed_file(tmp_path):
    ts = {t.name: t for t in read_encodings(_write(tmp_path, SEED_FILE))}
    a = ts["Conv1:0"]
    assert (a.kind, a.dtype, a.zero_point, a.qnn_offset) == ("activation", "uint8", [0], [0])
    assert a.scale[0] == pytest.approx(0.050288015993135454, rel=1e-6)
    # the example's offset 127 disagrees with its own min/max: min/max win (zero point 128), with a note
    i = ts["input:0"]
    assert i.zero_point == [128] and i.qnn_offset == [-128]
    assert any("offset 127" in n for n in i.notes)
    w = ts["Conv2d/weights"]
    assert w.kind == "param" and w.dtype == "uint8" and w.granularity == "per-tensor"


def test_reader_per_tensor_and_per_channel_examples(tmp_path):
    obj = {"activation_encodings": {}, "param_encodings": {**SEED_PER_TENSOR_WEIGHT, **SEED_PER_CHANNEL}}
    ts = {t.name: t for t in read_encodings(_write(tmp_path, obj))}
    pt = ts["features.9.conv.3.weight"]
    assert (pt.dtype, pt.zero_point, pt.notes) == ("uint8", [103], [])
    pc = ts["features.8.conv.3.weight"]
    assert (pc.dtype, pc.granularity, pc.axis, pc.zero_point) == ("int8", "per-channel", 0, [0, 0, 0])
    assert pc.scale == pytest.approx([0.005520610358771377, 0.004116586343509945, 0.005801794566507415], rel=1e-6)
    t = pc.tensor((3, 1, 1, 2), np.zeros((3, 1, 1, 2), np.int8), const=True)
    assert t.quantized_dimension == 0 and t.zero_point == [0, 0, 0] and t.dtype == "int8"


def test_reader_versioned_format(tmp_path):
    obj = {"version": "1.0.0",
           "activation_encodings": [{"name": "x", "bw": 16, "dtype": "INT", "enc_type": "PER_TENSOR",
                                     "is_sym": False, "scale": [6.05e-05], "offset": [-35799]}],
           "param_encodings": [{"name": "w", "bw": 4, "dtype": "INT", "enc_type": "PER_CHANNEL", "is_sym": True,
                                "scale": [0.04, 0.05], "offset": [-8, -8]},
                               {"name": "b", "bw": 32, "dtype": "FLOAT"}]}
    ts = {t.name: t for t in read_encodings(_write(tmp_path, obj))}
    assert (ts["x"].dtype, ts["x"].zero_point) == ("uint16", [35799])
    assert (ts["w"].dtype, ts["w"].zero_point, ts["w"].granularity) == ("int4", [0, 0], "per-channel")
    assert ts["b"].dtype == "float32" and not ts["b"].quantized


# AIMET's encoding spec, section 2.2 (0.4.0) and 4 (0.6.1: quantizer_args added), abridged
AIMET_MAPS = {
    "activation_encodings": {"20": [{"bitwidth": 8, "is_symmetric": "False", "max": 2.6086959838867188,
                                     "min": -2.109158515930176, "offset": -114.0, "scale": 0.018501389771699905}]},
    "param_encodings": {"conv2.weight": [{"bitwidth": 8, "is_symmetric": "False", "max": 0.06318144500255585,
                                          "min": -0.06268782913684845, "offset": -127.0,
                                          "scale": 0.0004936049808748066}]},
}


@pytest.mark.parametrize("version,extra", [
    ("0.4.0", {}), ("0.5.0", {}),
    ("0.6.1", {"excluded_layers": [], "quantizer_args": {
        "activation_bitwidth": 8, "dtype": "int", "is_symmetric": True, "param_bitwidth": 8,
        "per_channel_quantization": False, "quant_scheme": "post_training_tf_enhanced"}}),
])
def test_reader_takes_aimet_version_strings_of_the_map_format(tmp_path, version, extra):
    """AIMET writes "version" into its 0.x files (map sections): read as the unversioned files are."""
    plain = [t.as_dict() for t in read_encodings(_write(tmp_path, AIMET_MAPS))]
    versioned = read_encodings(_write(tmp_path, {**AIMET_MAPS, "version": version, **extra}))
    assert [t.as_dict() for t in versioned] == plain
    assert {t.name: t.zero_point for t in versioned} == {"20": [114], "conv2.weight": [127]}


def test_reader_takes_a_two_part_version(tmp_path):
    obj = {"version": "1.0", "activation_encodings": [{"name": "x", "bw": 8, "scale": [0.5], "offset": [-3]}],
           "param_encodings": []}
    assert [t.zero_point for t in read_encodings(_write(tmp_path, obj))] == [[3]]


def test_reader_mixed_precision_float_entries(tmp_path):
    obj = {"activation_encodings": {"conv2_1": [{"bitwidth": 32, "dtype": "float"}],
                                    "data_0": [{"bitwidth": 8, "dtype": "int", "min": -1.0, "max": 1.0}]},
           "param_encodings": {}}
    ts = {t.name: t for t in read_encodings(_write(tmp_path, obj))}
    assert ts["conv2_1"].dtype == "float32" and ts["data_0"].dtype == "uint8"


@pytest.mark.parametrize("obj,field,rule", [
    ("{not json", None, "JSON"),
    ([1, 2], None, "top-level object"),
    ({"activation_encodings": {}}, "param_encodings", "both present"),
    ({"activation_encodings": {"a": []}, "param_encodings": {}}, "activation_encodings.a", "encoding list"),
    ({"activation_encodings": {"a": [{"min": 0, "max": 1}]}, "param_encodings": {}}, "bitwidth", "bitwidth"),
    ({"activation_encodings": {"a": [{"bitwidth": 7, "min": 0, "max": 1}]}, "param_encodings": {}},
     "bitwidth", "bitwidth is 4, 8, 16"),
    ({"activation_encodings": {"a": [{"bitwidth": 8, "max": 1}]}, "param_encodings": {}}, "min", "min and max"),
    ({"activation_encodings": {"a": [{"bitwidth": 8, "min": 2, "max": 1}]}, "param_encodings": {}},
     "min", "min <= max"),
    ({"activation_encodings": {"a": [{"bitwidth": 8, "min": 0, "max": "1"}]}, "param_encodings": {}},
     "max", "numeric"),
    ({"activation_encodings": {}, "param_encodings": {"w": [
        {"bitwidth": 8, "is_symmetric": "False", "min": -1, "max": 2},
        {"bitwidth": 8, "is_symmetric": "False", "min": -1, "max": 2}]}},
     "param_encodings.w[0]", "offset -2^(bitwidth-1)"),
    ({"activation_encodings": {"a": [{"bitwidth": 8, "min": 0, "max": 1}] * 2}, "param_encodings": {}},
     "activation_encodings.a", "one entry"),
    ({"activation_encodings": {}, "param_encodings": {"w": [{"bitwidth": 8, "min": 0, "max": 1,
                                                             "is_symmetric": "maybe"}]}},
     "is_symmetric", "boolean"),
    ({"version": "2.0", "activation_encodings": [], "param_encodings": []}, "version", "1.x.y"),
    ({"version": "2.0.0", "activation_encodings": [], "param_encodings": []}, "version", "not read here"),
    ({"version": "v1", "activation_encodings": [], "param_encodings": []}, "version", "not a known"),
    ({"version": "1.0.0-rc", "activation_encodings": [], "param_encodings": []}, "version", "not a known"),
    ({"version": 1.0, "activation_encodings": [], "param_encodings": []}, "version", "not a known"),
    ({"version": "", "activation_encodings": {}, "param_encodings": {}}, "version", "not a known"),
    ({"version": "0.6.1", "activation_encodings": [], "param_encodings": []}, "activation_encodings",
     "one format per file"),
    ({"version": "1.0.0", "activation_encodings": {}, "param_encodings": {}}, "activation_encodings",
     "versioned section"),
    ({"version": "1.0.0", "activation_encodings": [{"name": "x", "bw": 8, "enc_type": "PER_BLOCK",
                                                    "scale": [1.0], "offset": [0]}], "param_encodings": []},
     "enc_type", "PER_TENSOR or PER_CHANNEL"),
    ({"version": "1.0.0", "activation_encodings": [{"name": "x", "bw": 8, "scale": [1.0, 2.0], "offset": [0]}],
      "param_encodings": []}, "offset", "len(offset)"),
    ({"version": "1.0.0", "activation_encodings": [{"name": "x", "bw": 8, "scale": [0.0], "offset": [0]}],
      "param_encodings": []}, "scale[0]", "scale > 0"),
    ({"version": "1.0.0", "activation_encodings": [{"name": "x", "bw": 8, "scale": [1.0], "offset": [0]},
                                                   {"name": "x", "bw": 8, "scale": [1.0], "offset": [0]}],
      "param_encodings": []}, "activation_encodings", "one entry per tensor"),
])
def test_reader_rejects_malformed_files(tmp_path, obj, field, rule):
    p = _write(tmp_path, obj)
    with pytest.raises(QconformError) as ei:
        read_encodings(p)
    e = ei.value
    assert e.source == str(p)
    if field:
        assert e.field and field in e.field, (e.field, str(e))
    assert rule.lower() in str(e).lower(), str(e)


def test_reader_missing_file(tmp_path):
    with pytest.raises(QconformError, match="cannot read"):
        read_encodings(tmp_path / "nope.json")


def test_parse_is_the_same_as_read(tmp_path):
    a = [t.as_dict() for t in parse_encodings(SEED_FILE)]
    b = [t.as_dict() for t in read_encodings(_write(tmp_path, SEED_FILE))]
    assert a == b


# ------------------------------------------------------------------ the command

def test_encodings_command(tmp_path, capsys):
    p = _write(tmp_path, {"activation_encodings": SEED_FILE["activation_encodings"],
                          "param_encodings": SEED_PER_CHANNEL})
    assert cli_main(["encodings", str(p)]) == 0
    out = capsys.readouterr().out
    assert "input:0" in out and "uint8" in out and "per-channel (axis 0)" in out and "note: input:0" in out
    assert cli_main(["encodings", str(p), "--json"]) == 0
    rows = json.loads(capsys.readouterr().out)
    assert {r["name"]: r["zero_point"] for r in rows}["input:0"] == [128]


def test_encodings_command_bad_file_is_one_line(tmp_path, capsys):
    p = _write(tmp_path, {"activation_encodings": {}})
    assert cli_main(["encodings", str(p)]) == 2
    err = capsys.readouterr().err
    assert err.startswith("qconform: error:") and "param_encodings" in err and err.count("\n") == 1


def test_encoding_dataclass_is_consistent():
    e = Encoding(8, -1.0, 1.0, 2.0 / 255, -128)
    assert e.signed_zero_point() == 0 and e.zero_point == 128
