"""Several devices: one pytest-xdist worker per device, one merged report with the device in
every row (here two `local` devices, which behave as two boards would)."""

from __future__ import annotations

import collections
import csv
import json

import pytest

from targets import get_target
from tests.conftest import rows_written as _rows
from tests.inprocess import run_inprocess

pytest_plugins = "pytester"

pytest.importorskip("xdist", reason="several devices need pytest-xdist")


def _devices(tmp_path):
    return [f"--device=local:{tmp_path / 'board a'}?name=board-a",
            f"--device=local:{tmp_path / 'board b'}?name=board-b"]


def test_two_devices_two_workers_one_merged_report(run_suite, tmp_path):
    target = "htp" if get_target("htp").availability()[0] else "ort"
    proc, rd = run_suite(f"--target={target}", "--ops", "ADD,MUL", "--cases-per-op", "3", "-vv",
                         *_devices(tmp_path))
    assert proc.returncode in (0, 1), proc.stdout[-3000:] + proc.stderr[-2000:]
    assert "created: 2/2 workers" in proc.stdout or "2 workers" in proc.stdout
    assert "EachScheduling" in proc.stdout                    # --device-dist=each: --dist each
    rows = _rows(rd)
    by_dev = collections.defaultdict(list)
    for r in rows:
        by_dev[r["device"]].append(r)
    assert set(by_dev) == {"board-a", "board-b"}              # the device in every row
    # each worker bound to its own device: gw0 -> board-a, gw1 -> board-b
    assert {r["worker"] for r in by_dev["board-a"]} == {"gw0"}
    assert {r["worker"] for r in by_dev["board-b"]} == {"gw1"}
    # every case on every device, once
    ids_a = collections.Counter(r["case_id"] for r in by_dev["board-a"])
    ids_b = collections.Counter(r["case_id"] for r in by_dev["board-b"])
    assert ids_a == ids_b and max(ids_a.values()) == 1 and len(ids_a) >= 6
    # the same kernel on two identical boards: the same verdicts
    va = {r["case_id"]: (r["status"], r.get("mismatches")) for r in by_dev["board-a"]}
    vb = {r["case_id"]: (r["status"], r.get("mismatches")) for r in by_dev["board-b"]}
    assert va == vb
    # one merged report in one run folder: one results.jsonl and a summary with a device column
    assert rd.parent.name == "runs" and (rd.parent.parent / "latest").resolve() == rd.resolve()
    with open(rd / "summary.csv") as f:
        table = list(csv.DictReader(f))
    assert {(t["op"], t["device"]) for t in table} == {(op, d) for op in ("ADD", "MUL")
                                                       for d in ("board-a", "board-b")}
    run = json.loads((rd / "run.json").read_text())
    assert run.get("devices_seen") == ["board-a", "board-b"]


def test_shard_spreads_op_target_groups_over_devices(run_suite, tmp_path):
    """--device-dist=shard: xdist's loadscope over the (op, target) classes: each group runs
    whole, as batches, on one device; each case once; both devices work."""
    proc, rd = run_suite("--target=ort", "--ops", "ADD,SUB,MUL", "--cases-per-op", "3", "--device-dist=shard",
                         "-vv", *_devices(tmp_path))
    assert proc.returncode in (0, 1), proc.stdout[-3000:] + proc.stderr[-2000:]
    assert "LoadScopeScheduling" in proc.stdout
    rows = _rows(rd)
    ids = collections.Counter(r["case_id"] for r in rows)
    assert max(ids.values()) == 1, [i for i, n in ids.items() if n > 1][:5]   # each case once, on one device
    assert len(ids) >= 9
    groups = collections.defaultdict(set)
    for r in rows:
        groups[(r["op"], r["target"])].add((r["device"], r["worker"]))
    assert set(groups) == {(op, "ort") for op in ("ADD", "SUB", "MUL")}
    assert all(len(g) == 1 for g in groups.values()), groups  # a whole (op, target) group per device
    assert {d for g in groups.values() for d, _ in g} == {"board-a", "board-b"}
    assert all((d, w) in (("board-a", "gw0"), ("board-b", "gw1")) for g in groups.values() for d, w in g)


@pytest.mark.parametrize("extra, words", [
    (["-n", "3"], "-n 3 with 2 devices"),
    (["-p", "no:xdist"], "need pytest-xdist"),
    (["--dist", "loadscope"], "--dist loadscope with several devices"),
])
def test_worker_count_must_match_devices(pytester, tmp_path, extra, words):
    proc, _ = run_inprocess(pytester, "--target=ort", "--ops", "ADD", *extra, *_devices(tmp_path))
    assert proc.returncode == 4 and words in proc.stderr and "Traceback" not in proc.stderr


def test_device_needs_a_device_capable_target(pytester, tmp_path):
    proc, _ = run_inprocess(pytester, "--target=ref", "--ops", "ADD", f"--device=local:{tmp_path}")
    assert proc.returncode == 4 and "cannot run on a device" in proc.stderr
    proc, _ = run_inprocess(pytester, "--ops", "ADD", f"--device=local:{tmp_path}")
    assert proc.returncode == 4 and "--device needs --target" in proc.stderr
    proc, _ = run_inprocess(pytester, "--target=ort", "--ops", "ADD", "--device=fax:1234")
    assert proc.returncode == 4 and "unknown device kind 'fax'" in proc.stderr


def test_a_dead_device_in_a_farm_is_one_error_before_any_worker(pytester, tmp_path):
    """The controller probes every device at once before starting workers: one line naming the
    device that failed (and not the one that answered), no run folder."""
    bad = f"local:{tmp_path / 'board b'}?name=board-b&python=/nonexistent/python3"
    proc, rd = run_inprocess(pytester, "--target=ort", "--ops", "ADD",
                             f"--device=local:{tmp_path / 'board a'}?name=board-a", f"--device={bad}")
    lines = [ln for ln in proc.stderr.splitlines() if ln.strip()]
    assert proc.returncode == 4 and len(lines) == 1, proc.stdout[-2000:] + proc.stderr[-2000:]
    assert lines[0].startswith(f"ERROR: {bad}: field '--device': the device's python (/nonexistent/python3)")
    assert "board-a" not in lines[0] and "Traceback" not in proc.stderr and not rd.parent.exists()
