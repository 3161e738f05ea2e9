"""Property-based: random mutations of valid user files never make a loader raise anything but
QconformError (hypothesis; >= 500 mutations in total, derandomized so CI sees the same ones).

Mutations: keys deleted or added, values replaced by other types, random numbers (NaN, inf,
huge, negative, 0), lists emptied or lengthened, and the serialized text truncated, spliced
with syntax characters, invalid UTF-8, 5000-digit numbers or deep nesting.
"""

from __future__ import annotations

import copy
import datetime as _dt
import json
import math
import re
from pathlib import Path
from types import SimpleNamespace

from hypothesis import HealthCheck, given, note, settings
from hypothesis import strategies as st

from suite.core.errors import QconformError

try:
    import tomllib
except ModuleNotFoundError:  # Python 3.10
    import tomli as tomllib  # type: ignore

ROOT = Path(__file__).resolve().parent.parent

#: examples per loader (sum >= 500)
EXAMPLES = {"case": 600, "tolerance": 200, "waivers": 200, "encodings": 200, "device": 100, "profile": 200,
            "run_json": 100}
EDGE_NUMBERS = [0, -1, -0.0, 1e-45, 5e-324, 2**31, 2**63, -(2**63), 10**400, -(10**400), 1e308,
                float("nan"), float("inf"), float("-inf"), True]


def _settings(n):
    return settings(max_examples=n, deadline=None, derandomize=True, database=None,
                    suppress_health_check=list(HealthCheck))


# ----------------------------------------------------------------------------- mutation machinery

ATOMS = st.one_of(
    st.none(), st.booleans(), st.integers(), st.floats(allow_nan=True, allow_infinity=True),
    st.sampled_from([0, -1, 1, 127, 128, -129, 255, 65536, 2**31, -(2**63), 2**64, 10**40, 10**400,
                     0.0, -0.0, 1e-45, 5e-324, 1e308, float("nan"), float("inf"), float("-inf")]),
    st.text(max_size=12), st.sampled_from(["", "int8", "uint8", "int4", "ADD", "*", "2027-01-01", "NaN"]),
    st.dates(),
)
VALUES = st.recursive(ATOMS, lambda c: st.lists(c, max_size=4) | st.dictionaries(st.text(max_size=6), c, max_size=3),
                      max_leaves=6)


def _paths(obj, prefix=()):
    """Every (parent, key) in a nested dict/list structure (lists of data sampled, not all)."""
    out = []
    if isinstance(obj, dict):
        for k, v in obj.items():
            out.append((obj, k))
            out.extend(_paths(v))
    elif isinstance(obj, list):
        idx = range(len(obj)) if len(obj) <= 8 else [0, 1, len(obj) // 2, len(obj) - 1]
        for i in idx:
            out.append((obj, i))
            out.extend(_paths(obj[i]))
    return out


def _near(v, data):
    """A value of the same kind, but off: the mutations that test rules rather than types."""
    if isinstance(v, bool):
        return not v
    if isinstance(v, (int, float)):
        return data.draw(st.sampled_from([-v, 0, v + 1, v * 1000, -1, float("nan"), float("inf"), 2**63, 10**400]))
    if isinstance(v, str):
        return data.draw(st.sampled_from(["", v + "x", v.upper(), v[:1], "int9", "qconform-case/0", v * 3]))
    if isinstance(v, list):
        return data.draw(st.sampled_from([[], v[:-1], v + v[-1:], [v], list(reversed(v))]))
    if isinstance(v, dict):
        return {}
    return None


def mutate(doc, data, dates=True):
    """1-3 structural mutations of a copy of ``doc``."""
    doc = copy.deepcopy(doc)
    rnd = data.draw(st.randoms(use_true_random=False))   # uniform picks (hypothesis favours index 0)
    for _ in range(data.draw(st.integers(1, 3))):
        paths = _paths(doc)
        if not paths:
            break
        parent, key = rnd.choice(paths)
        op = rnd.choice(["delete", "replace", "near", "near", "add_key", "wrap", "number", "number"])
        if op == "number":   # an edge value in place of a number (scales, zero points, dims, data, ...)
            nums = [(pa, k) for pa, k in paths
                    if isinstance(pa[k], (int, float)) and not isinstance(pa[k], bool)]
            if nums:
                parent, key = rnd.choice(nums)
                parent[key] = rnd.choice(EDGE_NUMBERS)
            continue
        if op == "delete":
            del parent[key]
        elif op == "replace":
            parent[key] = data.draw(VALUES if dates else VALUES.filter(lambda x: not isinstance(x, _dt.date)))
        elif op == "near":
            parent[key] = _near(parent[key], data)
        elif op == "add_key" and isinstance(parent, dict):
            parent[data.draw(st.text(min_size=1, max_size=8))] = data.draw(ATOMS)
        elif op == "wrap":
            parent[key] = [parent[key]]
    return doc


def garble(text: str, data) -> bytes:
    """Maybe one textual mutation of serialized ``text``."""
    b = text.encode()
    op = data.draw(st.sampled_from(["none"] * 14 + ["truncate", "delete", "insert", "utf8", "digits", "deep"]))
    p = data.draw(st.integers(0, len(b)))
    if op == "truncate":
        return b[:p]
    if op == "delete":
        return b[:p] + b[p + data.draw(st.integers(1, 40)):]
    if op == "insert":
        s = data.draw(st.text(alphabet='{}[],:="\'\\\n#.-+0123456789eEnaNIfty tru', min_size=1, max_size=6))
        return b[:p] + s.encode() + b[p:]
    if op == "utf8":
        return b[:p] + b"\xff\xfe\xc3" + b[p:]
    if op == "digits":
        return b[:p] + b"9" * 5000 + b[p:]
    if op == "deep":
        return b[:p] + b"[" * 100000 + b[p:]
    return b


def _only_qconform_errors(fn, *args):
    try:
        fn(*args)
    except QconformError as e:
        assert str(e).strip(), repr(e)
    # anything else propagates and fails the property (hypothesis shrinks it)


# ----------------------------------------------------------------------------- a small TOML writer

def _tkey(k) -> str:
    k = str(k)
    return k if re.fullmatch(r"[A-Za-z0-9_-]+", k) else json.dumps(k, ensure_ascii=False)


def _tval(v) -> str:
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, int):
        return str(v) if abs(v) < 10**300 else "1" + "0" * 300
    if isinstance(v, float):
        return "nan" if math.isnan(v) else ("inf" if v > 0 else "-inf") if math.isinf(v) else repr(v)
    if isinstance(v, (_dt.date, _dt.datetime)):
        return v.isoformat()
    if isinstance(v, list):
        return "[" + ", ".join(_tval(x) for x in v if x is not None) + "]"
    if isinstance(v, dict):
        return "{" + ", ".join(f"{_tkey(k)} = {_tval(x)}" for k, x in v.items() if x is not None) + "}"
    return json.dumps(str(v), ensure_ascii=False)


def to_toml(doc) -> str:
    if not isinstance(doc, dict):
        return _tval(doc)
    lines, tables = [], []
    for k, v in doc.items():
        if v is None:
            continue
        if isinstance(v, list) and v and all(isinstance(x, dict) for x in v):
            tables.append((k, v))
        else:
            lines.append(f"{_tkey(k)} = {_tval(v)}")
    for k, items in tables:
        for item in items:
            lines.append(f"[[{_tkey(k)}]]")
            lines.extend(f"{_tkey(kk)} = {_tval(vv)}" for kk, vv in item.items() if vv is not None)
    return "\n".join(lines) + "\n"


def _to_json(doc) -> str:
    try:
        return json.dumps(doc, default=str)
    except ValueError:   # an int beyond str()'s digit limit
        return json.dumps(str(doc))


# ----------------------------------------------------------------------------- valid documents

def _small_cases():
    from suite.cases.generate import generate
    ops = ["ADD", "MUL", "CONV_2D", "DEPTHWISE_CONV_2D", "FULLY_CONNECTED", "SOFTMAX", "RESHAPE",
           "CONCATENATION", "AVERAGE_POOL_2D", "QUANTIZE", "DEQUANTIZE"]
    from suite.cases.generate import generator_ops
    ops = [o for o in ops if o in generator_ops()]
    out = []
    for c in generate(ops, 6, 0):
        if sum(t.size for t in c.inputs) <= 300:
            out.append(c.to_dict())
    return out


WAIVERS = {"format": "qconform-waivers/1", "target": "htp", "waiver": [
    {"case": "ADD-*", "reason": "HTP rounds half up", "versions": {"onnxruntime-qnn": "2.7.*"},
     "expires": _dt.date(2027, 3, 31)},
    {"case": "CONV_2D-sat_hi-000", "target": "tflite", "reason": "r", "versions": {"ai-edge-litert": "2.*"},
     "expires": "2026-12-31"}]}

ENCODINGS = [
    {"activation_encodings": {
        "input:0": [{"bitwidth": 8, "max": 0.9960872825108046, "min": -1.0039304197656937, "offset": 127,
                     "scale": 0.007843206675594112}],
        "conv2_1": [{"bitwidth": 32, "dtype": "float"}]},
     "param_encodings": {
        "w": [{"bitwidth": 8, "is_symmetric": "True", "max": 0.70, "min": -0.7066, "offset": -128.0,
               "scale": 0.0055}, {"bitwidth": 8, "is_symmetric": "True", "max": 0.52, "min": -0.5269,
                                  "offset": -128.0, "scale": 0.0041}]}},
    {"version": "1.0.0",
     "activation_encodings": [{"name": "x", "bw": 16, "dtype": "INT", "enc_type": "PER_TENSOR",
                               "is_sym": False, "scale": [6.05e-05], "offset": [-35799]}],
     "param_encodings": [{"name": "w", "bw": 4, "dtype": "INT", "enc_type": "PER_CHANNEL", "is_sym": True,
                          "scale": [0.04, 0.05], "offset": [-8, -8]},
                         {"name": "b", "bw": 32, "dtype": "FLOAT"}]},
]

DEVICES = ["ssh:user@board?python=/usr/bin/python3&root=/tmp/q", "adb:R58M123ABC?timeout=30&retries=1",
           "local", "local:/tmp/dev?name=a", "ssh:pi@10.0.0.2,adb:emulator-5554"]

PROFILE = {"format": "qconform-netrun/1", "name": "qnn-htp", "model_format": "onnx",
           "command": ["{libdir}/qnn-net-run", "--backend", "libQnnHtp.so", "--retrieve_context", "{model}",
                       "--input_list", "{input_list}", "--output_dir", "{output_dir}",
                       "--use_native_input_files", "--use_native_output_files"],
           "device": "adb:SERIAL", "push": ["lib.so"], "env": {"LD_LIBRARY_PATH": "{libdir}"},
           "native_input": True, "native_output": True, "int8_as_uint8": False, "input_list_names": True,
           "list_outputs": False, "output_file": "Result_0/{tensor}.raw", "timeout": 120,
           "prepare": {"commands": [["qnn-onnx-converter", "--input_network", "{model}", "-o", "{stem}.cpp"]],
                       "artifact": "{stem}.bin"}}

RUN_JSON = {"format": "qconform-run/1", "run_id": "20260101T000000", "started": "2026-01-01T00:00:00",
            "command": ["pytest", "--target=htp"],
            "options": {"seed": 0, "cases_per_op": 30, "ops": ["ADD"], "targets": ["ref"],
                        "scheme": "tflite-ref-double", "case_files": []}}


# ----------------------------------------------------------------------------- the properties

def _fuzz(n, body):
    count = [0]

    @_settings(n)
    @given(st.data())
    def prop(data):
        count[0] += 1
        body(data)
    prop()
    return count[0]


def test_case_files(tmp_path):
    """(load_case_files computes each case's golden: a mutation the spec checks let through reaches it.)"""
    from suite.cases.files import load_case_files
    from suite.core.case import id_problem
    docs = _small_cases()
    assert len(docs) >= 10
    path = tmp_path / "case.json"

    def load():
        for c in load_case_files([str(path)]):   # what loads has an id that names a file safely
            assert id_problem(c.id) is None, c.id

    def body(data):
        doc = mutate(data.draw(st.sampled_from(docs)), data)
        note(f"mutated: {_to_json(doc)[:3000]}")
        path.write_bytes(garble(_to_json(doc), data))
        _only_qconform_errors(load)
    assert _fuzz(EXAMPLES["case"], body) >= EXAMPLES["case"]


def test_tolerance_files(tmp_path):
    from suite.core.tolerance import DEFAULT_FILE, load_policy
    base = tomllib.loads(Path(DEFAULT_FILE).read_text())
    path = tmp_path / "tol.toml"

    def body(data):
        doc = mutate(base, data)
        note(f"mutated: {to_toml(doc)[:3000]}")
        path.write_bytes(garble(to_toml(doc), data))
        _only_qconform_errors(load_policy, str(path))
    assert _fuzz(EXAMPLES["tolerance"], body) >= EXAMPLES["tolerance"]


def test_waiver_files(tmp_path):
    from suite.core.waivers import load_waiver_file
    path = tmp_path / "w.toml"

    def body(data):
        doc = mutate(WAIVERS, data)
        note(f"mutated: {to_toml(doc)[:3000]}")
        path.write_bytes(garble(to_toml(doc), data))
        _only_qconform_errors(load_waiver_file, str(path))
    assert _fuzz(EXAMPLES["waivers"], body) >= EXAMPLES["waivers"]


def test_encodings_files(tmp_path):
    from suite.core.encodings import read_encodings
    path = tmp_path / "enc.json"

    def body(data):
        doc = mutate(data.draw(st.sampled_from(ENCODINGS)), data, dates=False)
        note(f"mutated: {_to_json(doc)[:3000]}")
        path.write_bytes(garble(_to_json(doc), data))
        _only_qconform_errors(read_encodings, str(path))
    assert _fuzz(EXAMPLES["encodings"], body) >= EXAMPLES["encodings"]


def test_device_values():
    from targets.transport import parse_device_list

    def body(data):
        raw = garble(data.draw(st.sampled_from(DEVICES)), data).decode("utf-8", "replace")
        if data.draw(st.booleans()):
            raw = raw + data.draw(st.text(max_size=10))
        _only_qconform_errors(parse_device_list, [raw])
    assert _fuzz(EXAMPLES["device"], body) >= EXAMPLES["device"]


def test_netrun_device_profiles(tmp_path):
    from targets.netrun import load_profile
    path = tmp_path / "profile.toml"
    (tmp_path / "lib.so").write_bytes(b"")

    def body(data):
        doc = mutate(PROFILE, data)
        note(f"mutated: {to_toml(doc)[:3000]}")
        path.write_bytes(garble(to_toml(doc), data))
        _only_qconform_errors(load_profile, str(path))
    assert _fuzz(EXAMPLES["profile"], body) >= EXAMPLES["profile"]


def test_run_json_of_resume(tmp_path):
    from suite.harness.options import checked
    from suite.harness.resume import check_config, fill_options, open_run
    run_dir = tmp_path / "run"
    run_dir.mkdir()

    def resume():
        res = open_run(str(run_dir))
        o = SimpleNamespace(seed=0, cases_per_op=None, scheme=None, ops=[], target=[], case_file=[])
        fill_options(res, o, [])
        check_config(res, checked(targets=["ref"], seed=0, cases_per_op=30, ops=["ADD"]))

    def body(data):
        doc = mutate(RUN_JSON, data, dates=False)
        note(f"mutated: {_to_json(doc)[:3000]}")
        (run_dir / "run.json").write_bytes(garble(_to_json(doc), data))
        _only_qconform_errors(resume)
    assert _fuzz(EXAMPLES["run_json"], body) >= EXAMPLES["run_json"]


def test_enough_mutations_in_total():
    assert sum(EXAMPLES.values()) >= 500
