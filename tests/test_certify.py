"""`pytest --certify`: verdicts per op, tolerance profile, case-set digest, waivers."""

from __future__ import annotations

import datetime as dt
import hashlib
import json

import pytest

from reports.certify import read_certificate, case_list_digest, case_set_digest, verdict_of
from reports.results import read_rows
from suite.core.errors import QconformError
from suite.core.waivers import load_waivers
from tests.helper_targets import flipped
from tests.inprocess import run_inprocess

pytest_plugins = "pytester"

# the first slice of operators (targets/onnx_ops/slice.py)
SLICE_OPS = ["ADD", "SUB", "MUL", "QUANTIZE", "DEQUANTIZE", "CONV_2D", "DEPTHWISE_CONV_2D", "FULLY_CONNECTED",
             "AVERAGE_POOL_2D", "MAX_POOL_2D", "SOFTMAX", "LOGISTIC", "TANH", "RESHAPE", "CONCATENATION"]
WRONG = "tests.helper_targets:WrongTarget"


@pytest.fixture
def run(pytester):
    """``pytest *args`` in this process; returns (run, its run folder)."""
    return lambda *args, **kw: run_inprocess(pytester, *args, **kw)


def _cert(rd):
    return read_certificate(rd)


def _entries(cert, spec="litert-int8"):
    return {o["op"]: o for o in cert["ops"] if o["spec"] == spec}


def test_verdict_rules():
    ok = {"status": "pass", "bit_exact": True}
    near = {"status": "pass", "bit_exact": False}
    assert verdict_of([ok, ok])[0] == "bit-exact"
    assert verdict_of([ok, near])[0] == "conformant within tolerance"
    assert verdict_of([ok, {"status": "fail"}])[0] == "non-conformant"
    assert verdict_of([ok, {"status": "crash"}])[0] == "non-conformant"
    assert verdict_of([{"status": "unsupported"}])[0] == "unsupported"
    v, counts = verdict_of([ok, {"status": "unsupported"}])
    assert v == "bit-exact" and counts["unsupported"] == 1
    assert verdict_of([ok, {"status": "waived"}])[0] == "conformant within tolerance"


def test_tflite_ref_certifies_the_slice_ops_bit_exact(run_suite):
    # (a subprocess: a real runtime)
    from targets import get_target
    ok, why = get_target("tflite-ref").availability()
    if not ok:
        pytest.skip(f"tflite-ref unavailable: {why}")
    proc, rd = run_suite("--target=tflite-ref", "--certify", "--ops", ",".join(SLICE_OPS), "--cases-per-op", "3")
    assert (rd / "certificate.json").exists(), proc.stdout[-3000:] + proc.stderr[-3000:]
    cert = _cert(rd)
    ops = _entries(cert)
    assert set(ops) == set(SLICE_OPS)
    for op, o in ops.items():
        assert o["verdict"] == "bit-exact", (op, o["failing"][:3])
        assert o["tolerance"] and all(t["max_abs_lsb"] == 0 for t in o["tolerance"])
    rows = read_rows(rd)
    assert ops["CONV_2D"]["case_digest"] == case_set_digest(
        [r for r in rows if r["op"] == "CONV_2D" and r["spec"] == "litert-int8"])
    assert cert["case_set"]["rows_digest"] == case_set_digest(rows)
    cs = cert["case_set"]
    assert len(cs["list"]) == cs["cases"] and all(len(d) == 64 for _, d in cs["list"])
    assert cs["sha256"] == case_list_digest(cs["list"]) and not cs["unlisted"] and not cs["digest_mismatch"]
    assert cert["targets"]["tflite-ref"]["versions"]["ai-edge-litert"]
    assert cert["tolerance_policy"]["version"]
    md = (rd / "certificate.md").read_text()
    assert "| tflite-ref | litert-int8 | CONV_2D | **bit-exact** |" in md


def _ids(ops, n):
    from suite.cases.generate import case_id, plan_ids
    return [case_id(op, v, i) for op, v, i in plan_ids(ops, n)]


def test_a_wrong_target_is_non_conformant_with_its_failing_ids(run):
    proc, rd = run(f"--target={WRONG}", "--certify", "--ops", "ADD,SUB", "--cases-per-op", "5")
    assert proc.returncode == 1
    cert = _cert(rd)
    bad = {cid for cid in _ids(["ADD", "SUB"], 5) if flipped(cid, 3)}
    assert bad
    failing = {f["case_id"] for o in cert["ops"] for f in o["failing"]}
    assert failing == bad
    for o in cert["ops"]:
        if any(f["case_id"] in bad for f in o["failing"]):
            assert o["verdict"] == "non-conformant"
            assert all(f["repro"] and f["repro"].startswith("qconform repro ") for f in o["failing"])
        else:
            assert o["verdict"] == "bit-exact"
    assert "non-conformant" in proc.stdout and "## Failing cases" in (rd / "certificate.md").read_text()


def test_waivers_waive_expire_and_flag_passing_cases(run, tmp_path):
    ids = _ids(["ADD"], 5)
    bad = [c for c in ids if flipped(c, 3)]
    good = [c for c in ids if not flipped(c, 3)]
    assert len(bad) >= 2 and good
    f = tmp_path / "waivers.toml"
    f.write_text(f"""
format = "qconform-waivers/1"
target = "wrong"

[[waiver]]
case = "{bad[0]}"
reason = "known: first element off by 3"
versions = {{ helper = "1.*" }}
expires = 2099-12-31

[[waiver]]
case = "{bad[1]}"
reason = "was accepted last year"
versions = {{ helper = "1.*" }}
expires = 2020-01-31

[[waiver]]
case = "{good[0]}"
reason = "failed once, fixed since"
versions = {{ helper = "*" }}
expires = 2099-12-31
""")
    proc, rd = run(f"--target={WRONG}", "--certify", "--waivers", str(f), "--ops", "ADD", "--cases-per-op", "5")
    rows = {r["case_id"]: r for r in read_rows(rd)}
    assert rows[bad[0]]["status"] == "waived" and rows[bad[0]]["waiver"] == "waivers.toml#0"
    assert rows[bad[1]]["status"] == "fail" and rows[bad[1]]["waiver_expired"] == "waivers.toml#1"
    assert rows[good[0]]["status"] == "pass" and rows[good[0]]["waiver_unneeded"] == "waivers.toml#2"
    cert = _cert(rd)
    assert cert["waivers"]["files"] == {str(f): hashlib.sha256(f.read_bytes()).hexdigest()}   # read: --waivers gave it
    probs = "\n".join(cert["waiver_problems"])
    assert f"EXPIRED waiver waivers.toml#1: {bad[1]}" in probs
    assert f"waived case {good[0]} on wrong now PASSES" in probs
    assert "WAIVER: EXPIRED waiver waivers.toml#1" in proc.stdout          # loud in the terminal
    assert "WAIVER PROBLEMS" in (rd / "certificate.md").read_text()
    assert 'id="alert-waivers"' in (rd / "index.html").read_text()
    add = _entries(cert)["ADD"]
    assert add["verdict"] == "non-conformant"                               # the expired one fails again
    assert [w["case_id"] for w in add["waived"]] == [bad[0]]
    assert "xfail" in proc.stdout or "xfailed" in proc.stdout


def test_waiver_file_errors_name_the_field(tmp_path):
    f = tmp_path / "w.toml"
    base = 'format = "qconform-waivers/1"\ntarget = "htp"\n[[waiver]]\ncase = "ADD-*"\nreason = "r"\n'
    cases = [('versions = { x = "1" }\n', "expires"), ('versions = { x = "1" }\nexpires = "soon"\n', "expires"),
             ("expires = 2030-01-01\n", "versions"), ('versions = { x = "1" }\nexpires = 2030-01-01\nwho = 1\n', "who")]
    for extra, field in cases:
        f.write_text(base + extra)
        with pytest.raises(QconformError) as e:
            load_waivers([str(f)])
        assert field in str(e.value) and "waiver[0]" in str(e.value)
    f.write_text('format = "qconform-waivers/0"\n')
    with pytest.raises(QconformError, match="format"):
        load_waivers([str(f)])
    f.write_text(base + 'versions = { x = "1.*" }\nexpires = 2030-01-01\n')
    w = load_waivers([str(f)], today=dt.date(2030, 1, 2))
    assert [x.id for x in w.expired()] == ["w.toml#0"]
    assert w.lookup("ADD-random-000", "htp", {"x": "1.2"})[1].id == "w.toml#0"


def test_bad_waiver_file_is_a_usage_error(run, tmp_path):
    f = tmp_path / "w.toml"
    f.write_text('format = "qconform-waivers/1"\n[[waiver]]\ncase = "X"\nreason = "r"\n')
    proc, _ = run("--target=ref", "--waivers", str(f), "--ops", "ADD", "--cases-per-op", "1")
    assert proc.returncode == 4
    assert "waiver[0].target" in proc.stderr and "Traceback" not in proc.stderr
