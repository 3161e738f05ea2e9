"""The netrun target: a profile's command template drives a qnn-net-run style tool (here the
stand-in tests/standins/fake_net_run.py, same CLI and files, onnxruntime / LiteRT inside)."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import numpy as np
import pytest

from suite.core.errors import QconformError
from suite.cases.generate import generate
from targets import get_target
from targets.base import Timing
from targets.netrun import NetrunTarget, load_profile
from tests.inprocess import run_inprocess

pytest_plugins = ("tests.standins.conftest_fixtures", "pytester")   # the device fixtures: sshd, fake_adb, dead_host

FAKE = Path(__file__).resolve().parent / "standins" / "fake_net_run.py"
PY = sys.executable
TIMING = Timing(warmup=0, repeats=1)


def profile(tmp_path: Path, name="p.toml", **over) -> Path:
    """A stand-in profile: pushes the fake tool and a dummy libQnnHtp.so to {libdir}."""
    (tmp_path / "libQnnHtp.so").write_bytes(b"")
    native_in = over.pop("native_input", True)
    native_out = over.pop("native_output", True)
    flags = (['"--use_native_input_files"'] if native_in else []) + \
            (['"--use_native_output_files"'] if native_out else [])
    fields = {
        "format": '"qconform-netrun/1"', "name": '"stand-in-htp"', "model_format": '"onnx"',
        "push": f'["{FAKE}", "libQnnHtp.so"]',
        "env": '{ LD_LIBRARY_PATH = "{libdir}", ADSP_LIBRARY_PATH = "{libdir}" }',
        "command": '["{python}", "{libdir}/fake_net_run.py", "--backend", "libQnnHtp.so", "--model", "{model}", '
                   '"--input_list", "{input_list}", "--output_dir", "{output_dir}", ' + ", ".join(flags) + "]",
        "native_input": "true" if native_in else "false", "native_output": "true" if native_out else "false",
        "timeout": "60",
    }
    fields.update(over)
    text = "\n".join(f"{k} = {v}" for k, v in fields.items() if v is not None and not k.startswith("["))
    for k, v in fields.items():
        if k.startswith("["):
            text += f"\n{k}\n{v}"
    p = tmp_path / name
    p.write_text(text + "\n")
    return p


def _same(want, got, tool_rejects=False):
    """Same outcomes; with ``tool_rejects`` a case the runtime rejects may be the tool's error
    (a net-run tool that fails on a model only exits non-zero)."""
    ws, gs = [o.status for o in want], [o.status for o in got]
    if tool_rejects:
        gs = [("unsupported" if g == "error" and w == "unsupported" else g) for w, g in zip(ws, gs)]
    assert gs == ws, [o.reason for o in got]
    assert "ok" in ws                               # else two broken runs would agree vacuously
    for a, b in zip(want, got):
        if a.status == "ok":
            assert len(a.outputs) == len(b.outputs)
            assert all(x.shape == y.shape and np.array_equal(x, y) for x, y in zip(a.outputs, b.outputs))


@pytest.fixture(scope="module")
def cases():
    return generate(["ADD", "CONV_2D"], 6, 0)


def _each_op(cases):
    """Two cases of each op: the stand-in tool starts a Python with ONNX Runtime per case."""
    return [c for op in dict.fromkeys(c.op for c in cases) for c in [c for c in cases if c.op == op][:2]]


def test_stand_in_tool_equals_local_ort(tmp_path, cases):
    t = NetrunTarget(str(profile(tmp_path)), f"local:{tmp_path / 'dev'}?python={PY}")
    cases = _each_op(cases)
    got = t.run(cases, TIMING)
    _same(get_target("ort").run(cases, TIMING), got)
    assert t.transport.round_trips == 5          # libraries once, then push, run, pull, cleanup
    assert got[0].info["profile"] == "stand-in-htp" and got[0].info["device_os"]
    t.close()


def test_float_inputs_and_outputs(tmp_path, cases):
    t = NetrunTarget(str(profile(tmp_path, native_input=False, native_output=False)),
                     f"local:{tmp_path / 'dev'}?python={PY}")
    cases = _each_op(cases)
    _same(get_target("ort").run(cases, TIMING), t.run(cases, TIMING))


def test_tflite_models_with_host_side_prepare(tmp_path, cases):
    """model_format = tflite, and a [prepare] step whose artifact is what gets pushed."""
    p = profile(tmp_path, model_format='"tflite"', **{
        "command": '["{python}", "{libdir}/fake_net_run.py", "--backend", "libQnnHtp.so", "--retrieve_context", '
                   '"{model}", "--input_list", "{input_list}", "--output_dir", "{output_dir}", '
                   '"--use_native_input_files", "--use_native_output_files"]',
        "[prepare]": 'commands = [["cp", "{model}", "{stem}.bin"]]\nartifact = "{stem}.bin"'})
    t = NetrunTarget(str(p), f"local:{tmp_path / 'dev'}?python={PY}")
    _same(get_target("tflite-ref").run(cases, TIMING), t.run(cases, TIMING), tool_rejects=True)


@pytest.mark.parametrize("kind", ["ssh", "adb"])
def test_through_ssh_and_adb(kind, request, tmp_path, cases):
    if kind == "ssh":
        dev = request.getfixturevalue("sshd").device(python=PY, root=str(tmp_path / "root 'x'; y"))
    else:
        dev = f"adb:QCFAKE01?server={request.getfixturevalue('fake_adb').socket_spec}&python={PY}"
    t = NetrunTarget(str(profile(tmp_path)), dev)
    try:
        _same(get_target("ort").run(cases[:4], TIMING), t.run(cases[:4], TIMING))
    finally:
        t.close()


def test_pytest_run_with_profile(tmp_path, run_suite):
    proc, rd = run_suite("--target=netrun", f"--netrun-profile={profile(tmp_path)}", "--ops", "ADD",
                         "--cases-per-op", "4", f"--device=local:{tmp_path / 'dev'}?python={PY}")
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-2000:]
    rows = [json.loads(x) for x in (rd / "results.jsonl").read_text().splitlines()]
    assert rows and all(r["target"] == "netrun" and r["status"] == "pass" and r["profile"] == "stand-in-htp"
                        for r in rows)


def test_tool_failure_and_timeout_are_verdicts(tmp_path, cases):
    bad = profile(tmp_path, "bad.toml", command='["{python}", "{libdir}/fake_net_run.py", "--backend", '
                  '"libMissing.so", "--model", "{model}", "--input_list", "{input_list}"]')
    outs = NetrunTarget(str(bad), f"local:{tmp_path / 'd1'}?python={PY}").run(cases[:2], TIMING)
    assert {o.status for o in outs} == {"error"} and "libMissing.so not found" in outs[0].reason
    slow = profile(tmp_path, "slow.toml", command='["sleep", "30"]', timeout="1")
    outs = NetrunTarget(str(slow), f"local:{tmp_path / 'd2'}").run(cases[:2], TIMING)
    assert {o.status for o in outs} == {"timeout"} and "timeout (1 s per case)" in outs[0].reason
    # a tool that dies of a signal is that case's crash, with the signal named
    segv = profile(tmp_path, "segv.toml", command='["sh", "-c", "kill -SEGV $$"]')
    outs = NetrunTarget(str(segv), f"local:{tmp_path / 'd3'}").run(cases[:2], TIMING)
    assert {o.status for o in outs} == {"crash"} and "SIGSEGV" in outs[0].reason
    # a sub-second per-case timeout is still a limit (`timeout 0` would be none)
    short = NetrunTarget(str(profile(tmp_path, "short.toml", timeout="0.2")), "local")
    assert "timeout -k 5 1 " in short.script([short.prepare(cases[0], "c0000")])


def test_script_quotes_every_token(tmp_path, cases):
    p = profile(tmp_path, command='["echo", "a b; rm -rf /", "$HOME", "{model}", "it\'s"]')
    t = NetrunTarget(str(p), "local")
    prep = [t.prepare(cases[0], "c0000")]
    text = t.script(prep)
    assert "'a b; rm -rf /' '$HOME' models/c0000.onnx 'it'\"'\"'s'" in text


@pytest.mark.parametrize("body, field", [
    ('format = "qconform-netrun/9"', "format"),
    ('format = "qconform-netrun/1"\nmodel_format = "dlc"\ncommand = ["x"]', "model_format"),
    ('format = "qconform-netrun/1"\nmodel_format = "onnx"\ncommand = []', "command"),
    ('format = "qconform-netrun/1"\nmodel_format = "onnx"\ncommand = ["x", "{modle}"]', "command[1]"),
    ('format = "qconform-netrun/1"\nmodel_format = "onnx"\ncommand = ["x"]\npush = ["nope.so"]', "push[0]"),
    ('format = "qconform-netrun/1"\nmodel_format = "onnx"\ncommand = ["x"]\noutput_file = "a.raw"', "output_file"),
    ('format = "qconform-netrun/1"\nmodel_format = "onnx"\ncommand = ["x"]\ncolour = 1', "colour"),
    ('format = "qconform-netrun/1"\nmodel_format = "onnx"\ncommand = ["x"]\ntimeout = 0', "timeout"),
    ('format = "qconform-netrun/1"\nmodel_format = "onnx"\ncommand = ["x"]\ntimeout = inf', "timeout"),
    ('format = "qconform-netrun/1"\nmodel_format = "onnx"\ncommand = ["x"]\nenv = { "A B" = "1" }', "env.A B"),
    ('format = [', None),
])
def test_bad_profiles_are_one_clear_error(tmp_path, body, field):
    p = tmp_path / "bad.toml"
    p.write_text(body + "\n")
    with pytest.raises(QconformError) as e:
        load_profile(p)
    assert str(p) in str(e.value)
    if field:
        assert f"field '{field}'" in str(e.value)


def test_netrun_without_profile_is_a_usage_error(pytester):
    proc, _ = run_inprocess(pytester, "--target=netrun", "--ops", "ADD")
    assert proc.returncode == 4 and "--netrun-profile" in proc.stderr and "Traceback" not in proc.stderr


def test_example_qnn_profile_is_valid():
    """The documented real qnn-net-run profile parses (its SDK files are not on this host)."""
    src = Path(__file__).resolve().parent.parent / "examples" / "profiles" / "qnn-net-run-htp.toml"
    with pytest.raises(QconformError, match=r"field 'push\[0\]'.*no such file"):
        load_profile(src)
    p = load_profile(src, check_files=False)
    assert p["model_format"] == "onnx" and p["prepare"]["artifact"].endswith(".so")
    assert [f.name for f in p["push"]][1:] == ["libQnnHtp.so", "libQnnHtpPrepare.so", "libQnnSystem.so",
                                             "libQnnHtpV75Stub.so", "libQnnHtpV75Skel.so"]
