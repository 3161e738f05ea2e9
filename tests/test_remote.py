"""Remote targets end to end: the htp cases through local, ssh and adb transports give the
local htp target's results, case for case, in one push / run / pull / cleanup per batch."""

from __future__ import annotations


import numpy as np
import pytest

from suite.core.errors import QconformError
from suite.cases.generate import generate
from targets import get_target
from targets.base import Timing
from targets.remote import RemoteTarget, remote_target
from tests.conftest import rows_written as _rows

pytest_plugins = "tests.standins.conftest_fixtures"   # the device fixtures: sshd, fake_adb, dead_host

PY = __import__("sys").executable
TIMING = Timing(warmup=0, repeats=2)


def _htp_available():
    ok, why = get_target("htp").availability()
    if not ok:
        pytest.skip(f"htp is not available here: {why}")


def _cases(n_per_op=4, ops=("ADD", "SUB", "MUL")):
    return generate(list(ops), n_per_op, 0)


def _same(local, remote):
    """Outcomes equal: same status, and bit-identical outputs where ok."""
    assert [o.status for o in remote] == [o.status for o in local]
    assert any(o.status == "ok" for o in local)     # else two broken runs would agree vacuously
    for a, b in zip(local, remote):
        if a.status == "ok":
            assert len(a.outputs) == len(b.outputs)
            for x, y in zip(a.outputs, b.outputs):
                assert x.dtype == y.dtype and x.shape == y.shape and np.array_equal(x, y)


def test_only_device_capable_targets_take_a_device():
    with pytest.raises(QconformError, match="cannot run on a device"):
        remote_target("ref", "local")


def test_local_device_equals_local_htp(tmp_path):
    _htp_available()
    cases = _cases()
    local = get_target("htp").run(cases, TIMING)
    r = RemoteTarget("htp", f"local:{tmp_path / 'dev'}?python={PY}")
    remote = r.run(cases, TIMING)
    _same(local, remote)
    assert r.transport.round_trips == 4                  # push, run, pull, cleanup: one batch
    assert all(o.info["batch_round_trips"] == 4 and o.info["retries"] == 0 for o in remote)
    assert remote[0].info["device_qnn_sdk"] and remote[0].info["device_htp_performance_mode"] == "burst"
    assert list((tmp_path / "dev").iterdir()) == []       # the workspace was cleaned up


def test_ssh_end_to_end_equals_local_htp(sshd, run_suite, tmp_path):
    """`pytest --target=htp --device=ssh:...` gives the local htp results for every case."""
    _htp_available()
    dev = sshd.device(python=PY, root=str(tmp_path / "ssh root"))
    args = ["--target=htp", "--ops", "ADD,MUL", "--cases-per-op", "5", "--repeats", "2"]
    p_local, rd_local = run_suite(*args, report_dir=tmp_path / "local")
    p_ssh, rd_ssh = run_suite(*args, f"--device={dev}", report_dir=tmp_path / "ssh")
    # pass or fail is the kernel's business here: the two runs must agree, case for case
    assert p_local.returncode in (0, 1), p_local.stdout[-3000:] + p_local.stderr[-2000:]
    assert p_ssh.returncode == p_local.returncode, p_ssh.stdout[-3000:] + p_ssh.stderr[-2000:]
    local = {r["case_id"]: r for r in _rows(rd_local)}
    remote = {r["case_id"]: r for r in _rows(rd_ssh)}
    assert len(local) >= 10 and set(remote) == set(local) and len(_rows(rd_ssh)) == len(local)
    keys = ["status", "case_digest", "bit_exact", "elements", "mismatches", "max_abs_lsb", "sum_err_lsb",
            "first_index", "got", "want"]
    for cid, row in local.items():
        assert {k: remote[cid].get(k) for k in keys} == {k: row.get(k) for k in keys}, cid
        assert row["device"] is None and remote[cid]["device"] == "ssh:qc-test-device"
        assert remote[cid]["device_onnxruntime-qnn"] and remote[cid]["device_os"]
        assert remote[cid]["batch_round_trips"] == 4 and remote[cid]["retries"] == 0
    assert "device" in (rd_ssh / "summary.csv").read_text().splitlines()[0]
    # each run in its own folder under its --report-dir: <dir>/runs/<run id>, <dir>/latest -> it
    for d, rd in ((tmp_path / "local", rd_local), (tmp_path / "ssh", rd_ssh)):
        assert rd.parent == d / "runs" and (d / "latest").resolve() == rd.resolve()


def test_ssh_outputs_bit_identical_to_local_htp(sshd, tmp_path):
    _htp_available()
    cases = _cases(3)
    r = RemoteTarget("htp", sshd.device(python=PY, root=str(tmp_path / "r")))
    try:
        _same(get_target("htp").run(cases, TIMING), r.run(cases, TIMING))
        v = r.versions()
        assert v["device"] == "ssh:qc-test-device" and v["qnn_sdk"] and v["htp_performance_mode"] == "burst"
    finally:
        r.close()


def test_adb_stand_in_end_to_end_equals_local_htp(fake_adb):
    _htp_available()
    cases = _cases(3)
    r = RemoteTarget("htp", f"adb:QCFAKE01?server={fake_adb.socket_spec}&python={PY}")
    remote = r.run(cases, TIMING)
    _same(get_target("htp").run(cases, TIMING), remote)
    assert remote[0].info["device"] == "adb:QCFAKE01" and remote[0].info["batch_round_trips"] == 4
    assert not any(fake_adb.folder.iterdir())           # workspace removed from /data/local/tmp


@pytest.mark.parametrize("kind", ["ssh", "adb", "local"])
def test_ids_and_paths_that_need_quoting(kind, request, tmp_path):
    """Case ids and a workspace root with spaces, quotes and ';' change nothing."""
    nasty = "dir 'x'; \"y\" $z `w`"
    if kind == "ssh":
        dev = request.getfixturevalue("sshd").device(python=PY, root=str(tmp_path / nasty))
    elif kind == "adb":
        dev = f"adb:QCFAKE01?server={request.getfixturevalue('fake_adb').socket_spec}&python={PY}" \
              f"&root=/data/local/tmp/{nasty}".replace(" ", "%20").replace(";", "%3B").replace("`", "%60")
    else:
        dev = f"local:{tmp_path / nasty}?python={PY}"
    cases = _cases(2, ("ADD",))
    for k, c in enumerate(cases):
        c.id = f"ADD it's; \"case\" {k} $(reboot)"
    local = get_target("ort").run(cases, TIMING)
    r = RemoteTarget("ort", dev)
    try:
        _same(local, r.run(cases, TIMING))
    finally:
        r.close()


def test_local_device_equals_local_openvino(tmp_path):
    """The device runner's openvino runtime (what --device=qemu-x86 runs) gives the local openvino
    target's results, merged batch and single cases alike."""
    ok, why = get_target("openvino").availability()
    if not ok:
        pytest.skip(f"openvino is not available here: {why}")
    cases = _cases(3, ("FULLY_CONNECTED", "ADD"))
    local = get_target("openvino").run(cases, TIMING)
    r = RemoteTarget("openvino", f"local:{tmp_path / 'dev'}?python={PY}")
    try:
        merged = r.run(cases, TIMING)
    finally:
        r.close()
    _same(local, merged)
    assert merged[0].info["batch_size"] == len(cases)   # one merged model, as the local target's
    alone = RemoteTarget("openvino", f"local:{tmp_path / 'dev'}?python={PY}&merge=0")
    try:
        _same([get_target("openvino").run([c], TIMING)[0] for c in cases], alone.run(cases, TIMING))
    finally:
        alone.close()
