"""The emulated ARM64 board (``--device=qemu:``), the cross-device table and emulated latencies.

The tests that run the board need it built (``bash scripts/setup-arm64.sh``; .ci/run builds it
first) and skip, saying so, where it is not. The rest need no board: the device string, the
QEMU version check, the table and the diff on rows written here.
"""

from __future__ import annotations

import json
import os
import stat
from pathlib import Path

import pytest

from reports.build import write_reports
from reports.crossdevice import CrossDevice, delta
from reports.diff import diff_runs
from reports.summary import Summary
from suite.core.errors import QconformError
from suite.harness.judge import _digest
from targets.transport import make_transport, parse_device
from targets.transport.base import ARM64_BOARD
from tests.conftest import rows_written
from tests.inprocess import run_inprocess

pytest_plugins = ["pytester"]

BOARD = Path(ARM64_BOARD)
_FAILED = Path(ARM64_BOARD + ".failed")   # why scripts/setup-arm64.sh could not build it, last time it tried
needs_board = pytest.mark.skipif(
    not (BOARD / "board.json").is_file(),
    reason=f"no ARM64 board at {BOARD}: `bash scripts/setup-arm64.sh` builds it from Debian's and PyPI's "
           f"registries (.ci/run does, where they can be reached)"
           + (f"; its last attempt: {_FAILED.read_text().strip()}" if _FAILED.is_file() else ""))


def _fake_board(tmp_path: Path, qemu_says: str = "qemu-aarch64 version 10.0.13") -> Path:
    """A board's layout without a board in it: the files parse_device and the version check look at."""
    (tmp_path / "rootfs" / "usr" / "bin").mkdir(parents=True)
    (tmp_path / "rootfs" / "usr" / "bin" / "python3").write_text("")
    (tmp_path / "site-packages").mkdir()
    q = tmp_path / "qemu-aarch64-static"
    q.write_text(f"#!/bin/sh\necho '{qemu_says}'\n")
    q.chmod(q.stat().st_mode | stat.S_IXUSR)
    return tmp_path / "rootfs"


# ----------------------------------------------------------------------------- the device string

def test_qemu_device_string(tmp_path):
    rootfs = _fake_board(tmp_path)
    spec = parse_device(f"qemu:{rootfs}?cpu=cortex-a76&timeout=600")
    assert spec.kind == "qemu" and spec.get("cpu") == "cortex-a76" and spec.get("timeout") == 600.0
    assert spec.get("qemu") == str(tmp_path / "qemu-aarch64-static")          # beside ROOTFS by default
    assert spec.get("site_packages") == str(tmp_path / "site-packages")
    assert parse_device(f"qemu:{rootfs}").get("cpu") == "neoverse-n1"
    t = make_transport(spec)
    assert t.kind == "qemu" and t.python == "/usr/bin/python3"
    assert t.guest_program("/usr/bin/python3") == str(rootfs / "usr" / "bin" / "python3")
    assert t.guest_program("true") is None   # not on the board: never this host's
    assert t.run(["true"], timeout=10).rc == 127


@pytest.mark.parametrize("where, says", [
    ("rootfs", "no root file system at"),
    ("python", "has no /usr/bin/python3"),
    ("qemu", "no QEMU binary at"),
    ("site", "no packages folder at"),
])
def test_missing_board_part_is_one_error_naming_it(tmp_path, where, says):
    rootfs = _fake_board(tmp_path)
    gone = {"rootfs": rootfs, "python": rootfs / "usr" / "bin" / "python3", "qemu": tmp_path / "qemu-aarch64-static",
            "site": tmp_path / "site-packages"}[where]
    if gone.is_dir():
        import shutil
        shutil.rmtree(gone)
    else:
        gone.unlink()
    with pytest.raises(QconformError) as e:
        parse_device(f"qemu:{rootfs}")
    assert says in e.value.detail and e.value.field == "--device"
    assert str(gone if where != "python" else rootfs) in e.value.detail


@pytest.mark.parametrize("setting, rule", [
    ("cpu=neoverse n1", "cpu: a QEMU CPU model"), ("cpu=", "cpu: a QEMU CPU model"),
    ("qemu=/no/such/qemu", "qemu: the qemu-aarch64 binary"), ("port=22", "known settings"),
    ("retries=inf", "retries:"),
])
def test_bad_qemu_settings(tmp_path, setting, rule):
    rootfs = _fake_board(tmp_path)
    with pytest.raises(QconformError) as e:
        parse_device(f"qemu:{rootfs}?{setting}")
    assert rule in (e.value.rule or ""), e.value


def test_old_qemu_is_refused_at_start(pytester, tmp_path):
    """Debian 12's QEMU 7.2 crashes onnxruntime and miscomputes XNNPACK: one usage error, nothing run."""
    rootfs = _fake_board(tmp_path, "qemu-aarch64 version 7.2.0 (Debian 1:7.2+dfsg-7+deb12u18)")
    proc, rd = run_inprocess(pytester, "--target=ort", "--ops", "ADD", "--cases-per-op", "2", f"--device=qemu:{rootfs}")
    lines = [ln for ln in proc.stderr.splitlines() if ln.strip()]
    assert proc.returncode == 4 and len(lines) == 1, proc.stdout + proc.stderr
    assert "version 7.2.0" in lines[0] and "older than 8.1" in lines[0], lines[0]
    assert not rd.parent.exists()


# ----------------------------------------------------------------------------- the cross-device table

def _row(case, device, digest, mismatches=0, max_abs=0, status="pass", **kw):
    return {"op": "ADD", "target": "tflite", "case_id": case, "device": device, "status": status,
            "out_digest": digest, "mismatches": mismatches, "max_abs_lsb": max_abs, "scheme": "s",
            "case_digest": f"d-{case}", **kw}


def test_digest_is_bit_wise():
    import numpy as np
    a = np.array([[1, -2], [3, 4]], dtype=np.int8)
    assert _digest([a]) == _digest([a.copy()])
    b = a.copy()
    b[1, 1] += 1
    assert _digest([b]) != _digest([a])
    assert _digest([a.reshape(4)]) != _digest([a])          # the shape counts
    assert _digest([a.astype(np.int16)]) != _digest([a])    # and the dtype


def test_cross_device_counts_and_worst():
    x = CrossDevice()
    for r in [_row("c0", "local", "aa"), _row("c0", "qemu", "aa"),                          # same bits
              _row("c1", "local", "bb"), _row("c1", "qemu", "bX", 1, 1),                    # exact vs 1 off: 1
              _row("c2", "local", "cc", 2, 2), _row("c2", "qemu", "cX", 3, 3),              # both off: 1..5
              _row("c3", "local", "dd"), _row("c3", "qemu", None, status="crash"),          # another status
              _row("c4", "local", "ee")]:                                                   # one device only
        x.add(r)
    (t,) = x.table()
    assert (t["devices"], t["compared"], t["differ"], t["status_differs"]) == ("local, qemu", 3, 2, 1)
    assert (t["worst_case"], t["worst_delta_lsb"], t["worst_max_err_lsb"]) == ("c2", "1..5", "local 2, qemu 3")
    assert delta(_row("c", "a", "x", 0, 0), _row("c", "b", "y", 2, 4)) == (4.0, 4.0)
    assert delta(_row("c", "a", "x", 1, 1), _row("c", "b", "y", 1, 1)) == (1.0, 2.0)
    assert delta(_row("c", "a", "x"), _row("c", "b", "y", 1, 1, scheme="other")) is None


def test_no_case_on_two_devices_gives_no_table():
    x = CrossDevice()
    x.add(_row("c0", "local", "aa"))
    x.add(_row("c1", None, "bb"))
    assert x.table() == []


def test_emulated_latencies_are_kept_apart():
    s = Summary()
    s.add(_row("c0", "local", "aa", p50_us=10.0))
    s.add(_row("c0", "qemu", "aa", p50_us=900.0, device_emulated="yes"))
    by_dev = {r["device"]: r for r in s.table()}
    assert by_dev["local"]["p50_latency_us"] == 10.0 and by_dev["local"]["p50_emulated_us"] is None
    assert by_dev["qemu"]["p50_latency_us"] is None and by_dev["qemu"]["p50_emulated_us"] == 900.0
    (pair,) = s.pair_table()
    assert pair["p50_latency_us"] == 10.0   # both devices together: the real one only


#: a target's versions in run.json: on this host, and on the board (its device facts, as targets/remote.py gives them)
HOST_VERSIONS = {"ai-edge-litert": "2.3.0", "op_resolver": "AUTO"}
BOARD_VERSIONS = {"device": "qemu", "hostname": "vm", "machine": "aarch64", "python": "3.13.5", "cpus": "2",
                  "os": "Linux 6.18 (Debian GNU/Linux 13 (trixie))", "soc": "neoverse-n1 (emulated by QEMU 10.0.13)",
                  "numpy": "2.4.6", "emulated": "yes", "emulator": "qemu-aarch64 version 10.0.13, user mode",
                  "emulated_cpu": "neoverse-n1", "litert": "ai-edge-litert 2.3.0", "op_resolver": "AUTO"}


def _saved_run(folder: Path, rows: list[dict], versions: dict) -> Path:
    folder.mkdir(parents=True)
    (folder / "results.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    info = {"run_id": folder.name, "finished": "2026-11-26T00:00:00", "options": {
        "seed": 0, "cases_per_op": 2, "scheme": "s", "tolerance_digest": "t" * 64},
        "targets": {"tflite": {"versions": versions}}}
    (folder / "run.json").write_text(json.dumps(info))
    write_reports(folder)   # summary.csv: the diff reads the run's group verdicts from it
    return folder


def test_diff_of_two_saved_runs_on_two_devices(tmp_path):
    """This host's run against the board's: matched by (case id, target), with the cross-device table;
    the board's latencies (emulated) never make a latency regression."""
    host = _saved_run(tmp_path / "host", [_row("c0", None, "aa", p50_us=5.0), _row("c1", None, "bb", p50_us=5.0)],
                      HOST_VERSIONS)
    board_rows = [_row("c0", "qemu", "aa", p50_us=500.0, device_emulated="yes"),
                  _row("c1", "qemu", "bX", 1, 1, p50_us=500.0, device_emulated="yes")]
    board = _saved_run(tmp_path / "board", board_rows, BOARD_VERSIONS)
    # the same releases: the device's facts are the "devices" difference, not a version one
    assert diff_runs(host, board).refused == "devices differs"
    older = _saved_run(tmp_path / "older", board_rows, {**BOARD_VERSIONS, "litert": "ai-edge-litert 2.2.0"})
    upgrade = diff_runs(host, older, allow_different=("devices",))   # another release: compared, named
    assert not upgrade.refused and upgrade.compared == 2
    assert any(n.startswith("runtime upgrade: ") and n.endswith("-> 2.2.0") for n in upgrade.notes), upgrade.notes
    d = diff_runs(host, board, allow_different=("devices",))
    assert d.compared == 2 and not d.refused
    (t,) = d.cross
    assert (t["devices"], t["compared"], t["differ"], t["worst_case"], t["worst_delta_lsb"]) == \
        ("qemu (run), this host (baseline)", 2, 1, "c1", "1")
    assert not any("latency" in w for g in d.groups for w in g["what"])
    assert any("latencies not compared for 2 results" in n for n in d.notes)
    assert [c["case"] for c in d.cases] == ["c1"]   # more mismatches on the board: listed


# ----------------------------------------------------------------------------- on the board

@needs_board
def test_board_farm_and_cross_device_table(run_suite):
    """One xdist worker per device (this host, the board), one report: rows of the board say
    aarch64 and emulated, every case ran on both, and the table finds LiteRT's XNNPACK SOFTMAX
    giving other bits on ARM (seed 0, 6 cases per op: SOFTMAX-beta-000 and -odd_shape-000, 1 LSB; seen
    with ai-edge-litert 2.3.0). The board's time is one start of its runtime per (op, target): few ops,
    and two runtimes (tflite-ref is tflite's runtime with other kernels; htp: the next test)."""
    proc, rd = run_suite("--target=tflite,ort", "--device=local", "--device=qemu:",
                         "--ops", "ADD,SOFTMAX", "--cases-per-op", "6", timeout=400)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-2000:]
    rows = rows_written(rd)
    board = [r for r in rows if r["device"] == "qemu"]
    assert board and all(r["device_machine"] == "aarch64" and r["device_emulated"] == "yes"
                         and r["device_emulated_cpu"] == "neoverse-n1" for r in board)
    assert not {r["status"] for r in board} & {"error", "crash", "timeout", "infra"}, {r["status"] for r in board}
    keys = {(r["case_id"], r["target"]) for r in rows}
    assert {(r["case_id"], r["target"]) for r in board} == keys == {(r["case_id"], r["target"]) for r in rows
                                                                      if r["device"] == "local"}
    md = (rd / "summary.md").read_text()
    assert "## Same cases on other devices: outputs that differ bit-wise" in md
    assert 'id="cross-section"' in (rd / "index.html").read_text()
    cross = [ln for ln in md.splitlines() if ln.startswith("| SOFTMAX | tflite | local, qemu |")]
    assert cross and int(cross[0].split("|")[5]) >= 1, md
    # (tflite: ort's merged batches have a batch time only, no per-case latency on either device)
    summary = {(r["op"], r["target"], r["device"]): r for r in _csv(rd / "summary.csv")}
    board_add, host_add = summary[("ADD", "tflite", "qemu")], summary[("ADD", "tflite", "local")]
    assert board_add["p50_latency_us"] == "" and float(board_add["p50_emulated_us"]) > 0, board_add
    assert float(host_add["p50_latency_us"]) > 0 and host_add["p50_emulated_us"] == "", host_add


@needs_board
def test_htp_on_the_board_is_unsupported(run_suite):
    """onnxruntime-qnn's aarch64 wheel sets up, lists no QNN device and has no simulator: every
    case is unsupported with that reason, never a pass."""
    proc, rd = run_suite("--target=htp", "--device=qemu:", "--ops", "ADD", "--cases-per-op", "2", timeout=300)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-2000:]
    rows = rows_written(rd)
    assert rows and all(r["status"] == "unsupported" and "lists no QNN device" in r["reason"] for r in rows), rows[0]


@needs_board
def test_board_without_the_runtime_is_one_error(pytester, tmp_path):
    """The probe runs under QEMU too: a board whose packages lack LiteRT is one usage error naming it."""
    empty = tmp_path / "empty-site"
    empty.mkdir()
    os.symlink(BOARD / "site-packages" / "numpy", empty / "numpy")
    proc, _ = run_inprocess(pytester, "--target=tflite", "--ops", "ADD", "--cases-per-op", "2",
                            f"--device=qemu:?site_packages={empty}")
    lines = [ln for ln in proc.stderr.splitlines() if ln.strip()]
    assert proc.returncode == 4 and len(lines) == 1, proc.stdout + proc.stderr
    assert "tflite needs litert" in lines[0] and "pip install ai-edge-litert" in lines[0], lines[0]


def _csv(path: Path) -> list[dict]:
    import csv
    with open(path, newline="") as f:
        return list(csv.DictReader(f))


def _biased(case, device, below):
    """A row of ``below`` elements each 1 LSB under the golden (none above): a bias- of sign test p 2 * 2^-below."""
    return _row(case, device, f"{case}-{device}-{below}", below, 1 if below else 0, op="ABS",
                out_dtype="int8", elements=100, pos_err=0, neg_err=below, sum_err_lsb=-float(below))


@pytest.mark.parametrize("board_below, fails_on", [(12, None), (40, "qemu")])
def test_farm_judges_each_device_whole(board_below, fails_on):
    """The same cases on two devices: the bias of an (op, target) is judged per device, and a failure
    names its device. Pooled, each case would count once per device: 12 one-sided elements on each
    (under the rule's minimum of 20) would make 24, p 1.2e-7 < 1e-6, a bias neither device has."""
    from suite.core.tolerance import load_policy
    s = Summary(load_policy())
    for case in ("c0", "c1"):
        s.add(_biased(case, "local", 6))
        s.add(_biased(case, "qemu", board_below // 2))
    s.pair_table()
    failures = s.verdicts[("ABS", "tflite")]
    assert [f["text"].split(":")[0] for f in failures] == ([f"on {fails_on}"] if fails_on else []), failures
    assert all(f["kind"] == "bias" and not f["finding"] for f in failures)
