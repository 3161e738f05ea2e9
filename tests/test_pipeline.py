"""Pipelined execution (suite/pipeline.py): the targets run the planned batches ahead of the
tests, with the same batches, verdicts and rows as running each batch when its first test asks."""

from __future__ import annotations

import json
import threading
import time

import pytest

from suite.cases.generate import generate
from suite.harness.runner import Run, RunConfig
from tests.fault_targets import Faulty
from tests.conftest import rows_written as _rows


def _key(r):
    return (r["case_id"], r["target"])


FIELDS = ("status", "bit_exact", "mismatches", "max_abs_lsb", "case_digest", "batch_size")


def test_pipelined_run_gives_the_rows_and_outcomes_of_an_on_demand_run(run_suite, tmp_path):
    args = ("--target=tflite-ref,ort", "--ops", "ADD,CONV_2D,MAX_POOL_2D", "--cases-per-op", "8")
    on, rd_on = run_suite(*args, report_dir=tmp_path / "on")
    off, rd_off = run_suite(*args, "--pipeline", "off", report_dir=tmp_path / "off")
    assert on.returncode == off.returncode == 0, on.stdout[-2000:] + off.stdout[-2000:]
    a = {_key(r): tuple(r.get(f) for f in FIELDS) for r in _rows(rd_on)}
    b = {_key(r): tuple(r.get(f) for f in FIELDS) for r in _rows(rd_off)}
    assert len(a) == len(_rows(rd_on)) >= 2 * 3 * 8    # each (case, target) once
    assert a == b                                   # same cases, same batches, same verdicts
    tail = lambda out: [ln for ln in out.splitlines() if " in " in ln and "passed" in ln][-1].split(" in ")[0]
    assert tail(on.stdout) == tail(off.stdout)      # pytest's own outcome counts too
    t_on = json.loads((rd_on / "timing.json").read_text())
    t_off = json.loads((rd_off / "timing.json").read_text())
    assert t_on["harness_parts"]["judge_overlaps"] is True
    assert t_off["harness_parts"]["judge_overlaps"] is False
    assert "ran alongside the targets" in on.stdout and "ran alongside" not in off.stdout


def _faulty_run(tmp_path, cases, **cfg):
    t = Faulty()
    cfg.setdefault("latency_cases", 0)
    cfg.setdefault("batch_size", 4)
    run = Run(RunConfig(targets=[t.name], report_dir=str(tmp_path / "rep"), **cfg), targets={t.name: t})
    run.plan([(c, t.name) for c in cases])
    return run, t.name


def test_tests_asking_out_of_plan_order_get_their_own_verdicts(tmp_path, monkeypatch):
    cases = generate(["ADD", "MUL"], 6, 0)
    ids = [c.id for c in cases]
    monkeypatch.setenv("QCONFORM_FAULTS", json.dumps({ids[1]: "off", ids[9]: "off"}))
    run, name = _faulty_run(tmp_path, cases)
    assert run.start_pipeline()
    try:
        got = {c.id: run.verdict(c, name).status for c in reversed(cases)}   # the last case first
    finally:
        run.close()
    assert got == {i: ("fail" if i in (ids[1], ids[9]) else "pass") for i in ids}
    rows = _rows(tmp_path / "rep")
    assert sorted(r["case_id"] for r in rows) == sorted(ids)   # each case once
    assert run.stats["pipelined"] == 1.0 and run.stats["tests_wait_s"] > 0


def test_closing_an_interrupted_run_stops_at_once_and_records_no_false_verdict(tmp_path, monkeypatch):
    monkeypatch.setenv("QCONFORM_FAULT_DELAY", "0.3")   # 0.3 s per case: 24 cases would take 7 s
    monkeypatch.setenv("QCONFORM_FAULTS", "{}")
    cases = generate(["ADD"], 24, 0)
    run, name = _faulty_run(tmp_path, cases)
    assert run.start_pipeline()
    assert run.verdict(cases[0], name).status == "pass"
    pipe = run._pipeline
    t0 = time.perf_counter()
    run.close()   # as pytest's session end after Ctrl-C: a batch is in flight
    assert time.perf_counter() - t0 < 5
    assert not pipe.runner.is_alive() and not pipe.judge.is_alive()
    rows = _rows(tmp_path / "rep")
    assert 1 <= len(rows) < len(cases)
    assert {r["status"] for r in rows} == {"pass"}             # no crash/infra rows from the stop
    assert len({r["case_id"] for r in rows}) == len(rows)
    assert not [t for t in threading.enumerate() if t.name.startswith("qconform-")]


def test_a_harness_error_while_judging_fails_only_that_case(tmp_path, monkeypatch):
    monkeypatch.setenv("QCONFORM_FAULTS", "{}")
    cases = generate(["ADD"], 5, 0)
    run, name = _faulty_run(tmp_path, cases)
    judge = run._judge

    def broken(case, target, o):
        if case.id == cases[2].id:
            raise RuntimeError("harness bug")
        return judge(case, target, o)
    monkeypatch.setattr(run, "_judge", broken)
    assert run.start_pipeline()
    try:
        for i, c in enumerate(cases):
            if i == 2:
                with pytest.raises(RuntimeError, match="harness bug"):
                    run.verdict(c, name)
            else:
                assert run.verdict(c, name).status == "pass"
    finally:
        run.close()


def test_no_pipeline_for_xdist_workers_in_process_runs_or_when_off(tmp_path):
    cases = generate(["ADD"], 2, 0)
    for cfg in ({"worker": "gw0"}, {"isolation": "none"}, {"pipeline": False}):
        run, name = _faulty_run(tmp_path, cases, **cfg)
        try:
            assert run.start_pipeline() is False
        finally:
            run.close()


# ----------------------------------------------------------------------------- the golden cache

def test_golden_cache_gives_the_same_rows_and_computes_nothing_the_second_time(run_suite, tmp_path):
    cache = tmp_path / "golden"
    # OffByOne: mismatching rows too, whose analyses (causes, histograms) come from the cache
    args = ("--target=tflite-ref,tests.spine_targets:OffByOne", "--ops", "ADD,CONV_2D,SOFTMAX", "--cases-per-op", "6",
            f"--golden-cache={cache}")
    first, rd1 = run_suite(*args, report_dir=tmp_path / "a")
    second, rd2 = run_suite(*args, report_dir=tmp_path / "b")
    off, rd3 = run_suite(*args[:-1], "--golden-cache=off", report_dir=tmp_path / "c")
    assert first.returncode == second.returncode == off.returncode == 1, first.stdout[-2000:]
    assert any(r.get("causes") for r in _rows(rd2))
    files = [p for p in cache.glob("*.pkl") if not p.name.startswith(("cases-", "analysis-"))]
    assert len(files) == 1 and files[0].stat().st_size > 0                       # the goldens' file,
    assert len(list(cache.glob("cases-*.pkl"))) == len(list(cache.glob("analysis-*.pkl"))) == 1   # and
    rows = [{_key(r): tuple(r.get(f) for f in FIELDS + ("scheme_exact", "causes", "cause_schemes", "err_hist"))
             for r in _rows(rd)} for rd in (rd1, rd2, rd3)]
    assert rows[0] == rows[1] == rows[2]
    t1, t2 = (json.loads((rd / "timing.json").read_text())["harness_parts"] for rd in (rd1, rd2))
    assert t1["golden_cache_hits"] == 0 and t2["golden_cache_hits"] > 0
    assert t1["analysis_cache_hits"] == 0 and t2["analysis_cache_hits"] == len(_rows(rd2)) - sum(
        r["status"] == "unsupported" for r in _rows(rd2))   # every analysed row of the second run
    assert "analyses read from the golden cache" in second.stdout


def test_golden_cache_is_keyed_by_the_goldens_own_source_and_survives_a_broken_file(tmp_path, monkeypatch):
    import numpy as np
    from suite import golden_cache as gc
    c = gc.GoldenCache(tmp_path)
    c.put("d1", "s", [np.arange(3, dtype=np.int8)])
    assert c.save() == tmp_path / f"{gc.version()}.pkl"
    assert gc.GoldenCache(tmp_path).get("d1", "s")[0].tolist() == [0, 1, 2]
    assert gc.GoldenCache(tmp_path).get("d2", "s") is None
    real = gc.version()
    monkeypatch.setitem(gc._VERSIONS, "golden", "another-golden")   # the golden's code changed: a new file
    assert gc.GoldenCache(tmp_path).get("d1", "s") is None
    monkeypatch.setitem(gc._VERSIONS, "golden", real)
    (tmp_path / f"{gc.version()}.pkl").write_bytes(b"\x80\x05not a pickle")
    broken = gc.GoldenCache(tmp_path)
    assert broken.get("d1", "s") is None                    # ignored, computed again ...
    broken.put("d1", "s", [np.arange(3, dtype=np.int8)])
    broken.save()
    assert gc.GoldenCache(tmp_path).get("d1", "s") is not None   # ... and the file replaced
    assert gc.folder_of("off") is None and gc.folder_of(str(tmp_path)) == tmp_path


# ----------------------------------------------------------------------------- the lean test protocol

def _junit(path):
    import xml.etree.ElementTree as ET
    out = {}
    for tc in ET.parse(path).getroot().iter("testcase"):
        kinds = tuple((c.tag, c.get("type"), (c.get("message") or "")[:60]) for c in tc if c.tag != "properties")
        props = tuple(sorted((p.get("name"), p.get("value")) for p in tc.iter("property")
                             if p.get("name") != "qconform.p50_us"))   # latency: run to run
        out[tc.get("name")] = (kinds, props)
    return out


def test_lean_protocol_reports_what_pytests_own_protocol_reports(run_suite, tmp_path):
    # pass, fail (OffByOne; htp DEPTHWISE), error (Raises; htp BATCH_MATMUL's crash), skip
    # (unsupported), xfail (known findings)
    args = ("--target=tflite-ref,htp,tests.spine_targets:OffByOne,tests.spine_targets:Raises", "--ops",
            "ADD,DEPTHWISE_CONV_2D,BATCH_MATMUL,EQUAL,DEQUANTIZE", "-rA")
    out = {}
    for proto in ("lean", "pytest"):
        p, rd = run_suite(*args, "--test-protocol", proto, f"--junitxml={tmp_path / proto}.xml",
                          report_dir=tmp_path / proto)
        assert p.returncode in (0, 1), p.stdout[-3000:] + p.stderr[-3000:]
        lines = sorted(ln.split(" - ")[0] for ln in p.stdout.splitlines()
                       if ln.startswith(("PASSED", "FAILED", "ERROR", "XFAIL")))
        tail = [ln for ln in p.stdout.splitlines() if " in " in ln and "passed" in ln][-1].split(" in ")[0]
        junit = {k: (kinds, tuple((n, v.replace(str(rd), "RUN_DIR")) for n, v in props))
                 for k, (kinds, props) in _junit(tmp_path / f"{proto}.xml").items()}
        out[proto] = (p.returncode, tail, lines, junit)
    lean, full = out["lean"], out["pytest"]
    assert lean[0] == full[0] and lean[1] == full[1] and lean[2] == full[2]
    assert lean[3] == full[3]                       # JUnit XML: each test's outcome and properties
    for kind in ("skipped", "xfailed", "passed", "failed", "error"):
        assert kind in lean[1], lean[1]


def test_lean_protocol_honours_maxfail(run_suite, tmp_path):
    p, _ = run_suite("--target=tests.spine_targets:OffByOne", "--ops", "ADD,MUL", "--cases-per-op", "6",
                     "--maxfail=1")
    assert p.returncode == 1
    assert "stopping after 1 failures" in p.stdout
    assert "1 failed, 7 passed" in p.stdout      # ADD-qnn_u8-001 is the 8th of 24 tests


def test_a_test_asked_again_gets_a_fresh_verdict(tmp_path, monkeypatch):
    # e.g. pytest-rerunfailures runs a test again: its pair is run again, not waited for forever
    monkeypatch.setenv("QCONFORM_FAULTS", "{}")
    cases = generate(["ADD"], 4, 0)
    run, name = _faulty_run(tmp_path, cases)
    assert run.start_pipeline()
    try:
        first = [run.verdict(c, name) for c in cases]
        again = run.verdict(cases[1], name)
    finally:
        run.close()
    assert again is not first[1] and again.status == first[1].status == "pass"
    assert [r["case_id"] for r in _rows(tmp_path / "rep")].count(cases[1].id) == 2


# ----------------------------------------------------------------------------- review findings

def test_a_runner_error_fails_only_its_hand_over(tmp_path, monkeypatch):
    monkeypatch.setenv("QCONFORM_FAULTS", "{}")
    cases = generate(["ADD", "MUL"], 4, 0)
    run, name = _faulty_run(tmp_path, cases, batch_size=64)
    real = run.execute_parts
    monkeypatch.setattr("suite.pipeline.WINDOW_CASES", 1)   # one op per hand-over

    def flaky(target, parts, on_outcome=None, while_running=None):
        if parts[0][0][0].op == "ADD":
            raise OSError(24, "Too many open files")
        return real(target, parts, on_outcome, while_running)
    monkeypatch.setattr(run, "execute_parts", flaky)
    assert run.start_pipeline()
    try:
        got = {}
        for c in cases:
            try:
                got[c.id] = run.verdict(c, name).status
            except OSError:
                got[c.id] = "raised"
    finally:
        run.close()
    assert {v for k, v in got.items() if k.startswith("ADD")} == {"raised"}
    assert {v for k, v in got.items() if k.startswith("MUL")} == {"pass"}


def test_a_worker_started_early_is_no_timeout_when_its_first_batch_comes_late(tmp_path, monkeypatch):
    from suite.harness.isolation import Isolator
    from targets.base import Timing
    monkeypatch.setenv("QCONFORM_FAULTS", "{}")
    iso = Isolator(Faulty(), timeout=1, start_timeout=1)
    try:
        iso.prestart()
        time.sleep(2.5)   # longer than the start limit: the worker is ready long since
        outs = iso.run(generate(["ADD"], 2, 0), Timing())
    finally:
        iso.close()
    assert {o.status for o in outs} == {"ok"}


def test_cancel_while_the_worker_starts_ends_the_batch_at_once(tmp_path, monkeypatch):
    from suite.harness.isolation import Isolator
    from targets.base import Timing
    monkeypatch.setenv("QCONFORM_FAULTS", "{}")
    target = Faulty()
    monkeypatch.setenv("QCONFORM_FAULT_INIT_DELAY", "10")   # the worker's target takes 10 s to start
    iso = Isolator(target)
    cases = generate(["ADD"], 12, 0)
    threading.Timer(0.3, iso.cancel).start()
    t0 = time.perf_counter()
    try:
        outs = iso.run(cases, Timing())
    finally:
        iso.close()
    assert time.perf_counter() - t0 < 5
    assert {o.status for o in outs} == {"infra"} and len(outs) == len(cases)


def test_collect_only_runs_no_target(run_suite, tmp_path):
    # ref runs in the runner thread, and a stop waits for its batch: a started pipeline runs cases
    p, rd = run_suite("--target=ref", "--ops", "ADD,MUL,SOFTMAX,CONV_2D", "--cases-per-op", "30", "--co", "-q")
    assert p.returncode == 0
    timing = json.loads((rd / "timing.json").read_text())
    assert timing["targets"] == {} and timing["target_s"] == 0
    assert not (rd / "results.jsonl").exists() or not (rd / "results.jsonl").read_text().strip()


def test_last_failed_plans_only_the_tests_that_run(tmp_path):
    import subprocess
    import sys
    from tests.conftest import ROOT
    # not run_suite: it turns the cache provider off, which --lf needs
    base = [sys.executable, "-m", "pytest", "-q", "-o", f"cache_dir={tmp_path / 'cache'}",
            "--target=tests.spine_targets:OffByOne", "--ops", "ADD", "--cases-per-op", "6"]
    first = subprocess.run(base + [f"--report-dir={tmp_path / 'a'}"], cwd=ROOT, capture_output=True, text=True,
                           timeout=600)
    again = subprocess.run(base + ["--lf", f"--report-dir={tmp_path / 'b'}"], cwd=ROOT, capture_output=True,
                           text=True, timeout=600)
    assert first.returncode == again.returncode == 1, again.stdout[-2000:]
    failed = {r["case_id"] for r in _rows(tmp_path / "a") if r["status"] == "fail"}
    assert failed and {r["case_id"] for r in _rows(tmp_path / "b")} == failed


def test_lean_protocol_steps_aside_for_runxfail(run_suite):
    p, _ = run_suite("--target=tflite-ref", "--ops", "EQUAL", "--runxfail")
    assert "xfailed" not in p.stdout.splitlines()[-1] and "failed" in p.stdout.splitlines()[-1]


def test_a_damaged_golden_cache_file_is_ignored(tmp_path):
    import numpy as np
    from suite import golden_cache as gc
    c = gc.GoldenCache(tmp_path)
    c.put("d", "s", [np.arange(4, dtype=np.int8)])
    path = c.save()
    raw = bytearray(path.read_bytes())
    i = raw.find(bytes([0, 1, 2, 3]))   # the array's data: flipped, it would unpickle as another array
    raw[i + 3] ^= 0xFF                  # (the checksum catches it before unpickling)
    path.write_bytes(bytes(raw))
    assert gc.GoldenCache(tmp_path).get("d", "s") is None


# ----------------------------------------------------------------------------- hand-overs and the guessed plan

def test_windows_hand_several_ops_to_a_target_in_one_message_with_the_same_verdicts(tmp_path, monkeypatch):
    from suite.harness.isolation import Worker
    monkeypatch.setenv("QCONFORM_FAULTS", json.dumps({}))
    cases = generate(["ADD", "MUL", "SUB"], 5, 0)
    kinds = []
    send = Worker.send
    monkeypatch.setattr(Worker, "send", lambda self, msg: kinds.append(msg[0]) or send(self, msg))
    from tests.fault_targets import BatchedFaulty
    t = BatchedFaulty()   # a target that batches (per-case targets stream one message per part)
    name = t.name
    run = Run(RunConfig(targets=[name], report_dir=str(tmp_path / "rep"), batch_size=2, latency_cases=1),
              targets={name: t})
    run.plan([(c, name) for c in cases])
    assert run.start_pipeline()
    try:
        got = {c.id: run.verdict(c, name).status for c in cases}
    finally:
        run.close()
    assert set(got.values()) == {"pass"} and len(got) == len(cases) > 15
    # one message for the three ops (per op one case alone, then batches of two)
    assert kinds.count("parts") == 1 and "batch" not in kinds
    assert sorted(r["case_id"] for r in _rows(tmp_path / "rep")) == sorted(got)


def test_a_plan_guessed_right_starts_the_targets_before_collection_ends(run_suite, tmp_path):
    p, rd = run_suite("--target=tflite-ref", "--ops", "ADD,MUL", "--cases-per-op", "6")
    assert p.returncode == 0, p.stdout[-2000:]
    timing = json.loads((rd / "timing.json").read_text())
    assert timing["plan_guessed_right"] is True
    counts = p.stdout.splitlines()[-1].split(" in ")[0]   # e.g. "18 passed, 6 skipped, 1 warning"
    tests = sum(int(n) for n, word in (part.split()[:2] for part in counts.split(", "))
                if word in ("passed", "failed", "skipped", "xfailed", "xpassed", "error", "errors"))
    rows = _rows(rd)
    assert len(rows) == len({_key(r) for r in rows}) == tests > 12


def test_a_wrong_guess_is_corrected_rows_and_failure_files_only_for_the_tests_that_ran(run_suite, tmp_path):
    args = ("--target=tests.spine_targets:OffByOne", "--ops", "ADD,MUL", "--cases-per-op", "8",
            "-p", "tests.deselecting_plugin", "-rA")
    on, rd_on = run_suite(*args, report_dir=tmp_path / "on")
    off, rd_off = run_suite(*args, "--pipeline", "off", report_dir=tmp_path / "off")
    assert on.returncode == off.returncode == 1, on.stdout[-2000:]
    assert json.loads((rd_on / "timing.json").read_text())["plan_guessed_right"] is False
    reported = {ln.split("[", 1)[1].split("]", 1)[0] for ln in on.stdout.splitlines()
                if ln.startswith(("PASSED", "FAILED")) and "[" in ln}
    last = on.stdout.splitlines()[-1]
    deselected = int(last.split(" deselected")[0].split()[-1])
    assert deselected >= len(reported) - 2 and len(reported) >= 10   # about half of the pairs ran
    rows_on, rows_off = _rows(rd_on), _rows(rd_off)
    assert {f"{r['case_id']}:{r['target']}" for r in rows_on} == reported
    assert {_key(r): r["status"] for r in rows_on} == {_key(r): r["status"] for r in rows_off}
    files_on = sorted(p.name for p in (rd_on / "failures").rglob("*.json"))
    files_off = sorted(p.name for p in (rd_off / "failures").rglob("*.json"))
    assert files_on == files_off and files_on                  # no file of a deselected pair


def test_case_sets_are_read_back_as_generated_and_a_damaged_file_is_made_again(tmp_path):
    from suite import golden_cache as gc
    made = []

    def gen():
        made.append(1)
        return generate(["ADD", "CONV_2D"], 5, 3)
    first = gc.cached_cases(tmp_path, ["ADD", "CONV_2D"], 5, 3, gen)
    second = gc.cached_cases(tmp_path, ["ADD", "CONV_2D"], 5, 3, gen)
    assert len(made) == 1
    assert [(c.id, c.digest()) for c in second] == [(c.id, c.digest()) for c in first]
    other = gc.cached_cases(tmp_path, ["ADD", "CONV_2D"], 5, 4, lambda: generate(["ADD", "CONV_2D"], 5, 4))
    assert [c.digest() for c in other] != [c.digest() for c in first]   # another seed: another file
    assert len(list(tmp_path.glob("cases-*.pkl"))) == 2
    for path in tmp_path.glob("cases-*.pkl"):
        raw = bytearray(path.read_bytes())
        i = raw.find(b"ADD-")                # a case id: flipped, it would unpickle as another case
        raw[i] ^= 0x20
        path.write_bytes(bytes(raw))
    third = gc.cached_cases(tmp_path, ["ADD", "CONV_2D"], 5, 3, gen)
    assert len(made) == 2 and [c.digest() for c in third] == [c.digest() for c in first]
    assert gc.cached_cases(None, ["ADD"], 2, 0, lambda: "fresh") == "fresh"   # off


def test_rows_kept_for_the_report_are_the_rows_in_the_file(tmp_path, monkeypatch):
    from reports.results import last_of_each, read_rows
    cases = generate(["ADD", "CONV_2D"], 4, 0)
    monkeypatch.setenv("QCONFORM_FAULTS", json.dumps({cases[1].id: "off", cases[2].id: "shape"}))
    run, name = _faulty_run(tmp_path, cases)
    assert run.start_pipeline()
    try:
        for c in cases:   # "off" and "shape" come back as fail and error verdicts, not raised
            run.verdict(c, name)
        run.verdict(cases[3], name)   # asked again: a second row, the last one counts
    finally:
        run.close()
    on_disk = read_rows(tmp_path / "rep")
    assert {r["status"] for r in on_disk} >= {"pass", "fail", "error"}
    assert last_of_each(run.kept_rows) == on_disk and len(run.kept_rows) == len(cases) + 1


def test_no_rows_when_collection_fails_after_the_guessed_plan_started(run_suite, tmp_path):
    # pytest runs no test after a collection error; the targets, started on the guessed plan while
    # the rest was collected, must leave no rows, failure files or report of tests that never ran
    broken = tmp_path / "broken" / "test_broken.py"
    broken.parent.mkdir()
    broken.write_text("import time\ntime.sleep(1.5)   # the targets have started\n"
                      "import this_module_does_not_exist\n")
    p, rd = run_suite("--target=tests.spine_targets:OffByOne", "--ops", "ADD,MUL", "--cases-per-op", "6",
                      "suite/test_conformance.py", str(broken))
    assert p.returncode == 2 and "error during collection" in p.stdout, p.stdout[-2000:]
    assert not (rd / "results.jsonl").exists() or not _rows(rd)
    assert not list(rd.glob("failures/**/*.json")) and not (rd / "index.html").exists()
    timing = json.loads((rd / "timing.json").read_text())
    assert timing["plan_guessed_right"] is False
    assert timing["target_s"] > 0          # the targets did run on the guess: nothing of it is kept


def test_a_failed_hand_over_of_pairs_a_wrong_guess_dropped_leaves_no_verdict(tmp_path, monkeypatch):
    monkeypatch.setenv("QCONFORM_FAULTS", "{}")
    cases = generate(["ADD", "MUL"], 4, 0)
    run, name = _faulty_run(tmp_path, cases)
    real = run.execute_parts
    entered, release = threading.Event(), threading.Event()
    monkeypatch.setattr("suite.pipeline.WINDOW_CASES", 1)   # one op per hand-over

    def flaky(target, parts, on_outcome=None, while_running=None):
        if parts[0][0][0].op == "ADD":   # still running when the plan is settled, then fails
            entered.set()
            release.wait(10)
            raise OSError(24, "Too many open files")
        return real(target, parts, on_outcome, while_running)
    monkeypatch.setattr(run, "execute_parts", flaky)
    assert run.start_pipeline(guess=True)
    keep = [c for c in cases if c.op == "MUL"]
    try:
        assert entered.wait(10)
        assert run.settle_plan([(c, name) for c in keep]) is False   # the ADD pairs were deselected
        release.set()
        got = {c.id: run.verdict(c, name).status for c in keep}   # judged after the ADD failure
    finally:
        run.close()
    assert set(got.values()) == {"pass"}
    assert run._verdicts == {}   # no verdict left that no test will ever ask for (LOOKAHEAD)


def test_the_reports_imports_end_with_the_pipeline(tmp_path, monkeypatch):
    # no thread of the pipeline outlives it, so the report can be written by forked children
    # (reports/runinfo.py in_child: not while another thread runs)
    monkeypatch.setenv("QCONFORM_FAULTS", "{}")
    monkeypatch.setattr("suite.pipeline._preload", lambda: time.sleep(1.5))
    run, name = _faulty_run(tmp_path, generate(["ADD"], 2, 0))
    assert run.start_pipeline()
    run.close()
    assert not [t for t in threading.enumerate() if t.name.startswith("qconform-")]


def test_a_pair_asked_for_outside_the_settled_plan_still_gets_its_verdict(tmp_path, monkeypatch):
    monkeypatch.setenv("QCONFORM_FAULTS", "{}")
    cases = generate(["ADD", "MUL"], 4, 0)
    run, name = _faulty_run(tmp_path, cases)
    assert run.start_pipeline(guess=True)
    outsider = next(c for c in cases if c.op == "ADD")
    got = []
    try:
        assert run.settle_plan([(c, name) for c in cases if c.op == "MUL"]) is False
        t = threading.Thread(target=lambda: got.append(run.verdict(outsider, name).status), daemon=True)
        t.start()
        t.join(15)   # (its verdict was dropped as unwanted: the test waited forever)
    finally:
        run.close()
    assert got == ["pass"]
    assert [r["case_id"] for r in _rows(tmp_path / "rep")].count(outsider.id) == 1


def test_rows_held_during_the_guess_come_before_the_rows_judged_after_it(tmp_path, monkeypatch):
    monkeypatch.setenv("QCONFORM_FAULTS", "{}")
    cases = generate(["ADD", "MUL"], 4, 0)
    run, name = _faulty_run(tmp_path, cases)
    monkeypatch.setattr("suite.pipeline.WINDOW_CASES", 1)   # one op per hand-over
    real = run.execute_parts
    go_mul, mul_written = threading.Event(), threading.Event()

    def gated(target, parts, on_outcome=None, while_running=None):
        if parts[0][0][0].op == "MUL":   # judged while the held ADD rows are being written
            go_mul.wait(10)
        return real(target, parts, on_outcome, while_running)
    monkeypatch.setattr(run, "execute_parts", gated)
    settler = threading.current_thread()
    append = run._append

    def watched(row):
        if threading.current_thread() is settler and not go_mul.is_set():
            go_mul.set()
            mul_written.wait(1)   # (with the rows written under the lock, no MUL row comes meanwhile)
        elif row["op"] == "MUL":
            mul_written.set()
        append(row)
    monkeypatch.setattr(run, "_append", watched)
    n_add = sum(c.op == "ADD" for c in cases)
    assert run.start_pipeline(guess=True)
    try:
        deadline = time.monotonic() + 10
        while len(run._hold or ()) < n_add and time.monotonic() < deadline:
            time.sleep(0.01)
        assert run.settle_plan(list(run._plan)) is True
        for c in cases:
            run.verdict(c, name)
    finally:
        run.close()
    ops = [r["op"] for r in _rows(tmp_path / "rep")]
    assert ops == ["ADD"] * n_add + ["MUL"] * (len(cases) - n_add)


def test_a_failed_pre_send_costs_only_the_head_start(tmp_path, monkeypatch):
    from tests.fault_targets import BatchedFaulty
    monkeypatch.setenv("QCONFORM_FAULTS", "{}")
    cases = generate(["ADD", "MUL"], 3, 0)
    a, b = Faulty(), BatchedFaulty()
    run = Run(RunConfig(targets=[a.name, b.name], report_dir=str(tmp_path / "rep"), latency_cases=0),
              targets={a.name: a, b.name: b})
    run.plan([(c, t) for c in cases for t in (a.name, b.name)])

    tried = []

    def broken(target, parts):
        tried.append(target)
        raise RuntimeError("cannot pickle the cases")
    monkeypatch.setattr(run, "submit", broken)
    assert run.start_pipeline()
    try:
        got = {(c.id, t): run.verdict(c, t).status for c in cases for t in (a.name, b.name)}
    finally:
        run.close()
    assert tried                     # the runner did try to send cases ahead
    assert set(got.values()) == {"pass"}


def test_lean_tests_after_a_marked_one_leave_nothing_set_up_for_another_modules_tests(run_suite):
    # the marked conformance test takes pytest's protocol, which keeps suite/test_conformance.py
    # set up for the next test; the lean ones after it must tear it down before tests/test_arith.py
    p, _ = run_suite("--target=tflite-ref", "--ops", "ADD", "--cases-per-op", "2", "-p", "tests.marking_plugin",
                     "suite", "tests/test_arith.py")
    assert p.returncode == 0, p.stdout[-2000:]
    assert "error" not in p.stdout.splitlines()[-1] and "not torn down" not in p.stdout


_LEFT_BEHIND = """
import os, sys, threading, pytest

class Raiser:
    def pytest_sessionstart(self, session):
        raise RuntimeError("a plugin's sessionstart fails")

args = ["-q", "-p", "no:cacheprovider", "--target=ref,tflite", "--ops", "ADD", "--cases-per-op", "3",
        "--report-dir=" + sys.argv[1]] + sys.argv[3:]
rc = pytest.main(args, plugins=[Raiser()] if sys.argv[2] == "raise" else [])
threads = [t.name for t in threading.enumerate() if t.name.startswith("qconform") and t.is_alive()]
kids = []
for pid in os.listdir("/proc"):
    try:
        fields = open(f"/proc/{pid}/stat").read().rsplit(")", 1)[1].split()
    except (OSError, IndexError):
        continue
    if int(fields[1]) == os.getpid() and fields[0] != "Z":
        kids.append(pid)
print("LEFT", rc, threads, kids)
"""


@pytest.mark.parametrize("how", [["plain", "--markers"], ["raise"]], ids=["markers", "sessionstart-raises"])
def test_a_run_without_a_session_leaves_no_worker_or_thread(tmp_path, how):
    """pytest --markers configures and ends; a plugin whose sessionstart raises ends the run
    before any session end: neither leaves the targets' workers or the pipeline's threads."""
    import subprocess
    import sys
    from tests.conftest import ROOT
    p = subprocess.run([sys.executable, "-c", _LEFT_BEHIND, str(tmp_path / "rd"), *how], cwd=ROOT,
                       capture_output=True, text=True, timeout=300)
    line = [ln for ln in p.stdout.splitlines() if ln.startswith("LEFT")]
    assert line, p.stdout[-2000:] + p.stderr[-2000:]
    assert line[0].endswith("[] []"), line[0]


def test_a_target_gets_its_cases_before_the_next_targets_get_theirs_ahead(tmp_path, monkeypatch):
    """The runner sends the next targets their cases (gated, Run.submit) only once the target
    whose turn it is has its own message: that worker never waits on the others' pickling."""
    from suite.harness.isolation import Worker
    from tests.fault_targets import BatchedFaulty, OtherBatchedFaulty
    monkeypatch.setenv("QCONFORM_FAULTS", "{}")
    monkeypatch.setattr("suite.pipeline.WINDOW_CASES", 4)   # several windows
    cases = generate(["ADD", "MUL", "SUB"], 4, 0)
    a, b = BatchedFaulty(), OtherBatchedFaulty()   # (whole batches: a streaming target is sent
                                                    # per part, its first after the pre-sends)
    run = Run(RunConfig(targets=[a.name, b.name], report_dir=str(tmp_path / "rep"), latency_cases=0,
                        batch_size=4), targets={a.name: a, b.name: b})
    run.plan([(c, t) for c in cases for t in (a.name, b.name)])
    run.prestart()
    for iso in run._isolators.values():   # both workers ready: a pre-send can be taken at once
        iso._worker()
    events = []
    send, submit = Worker.send, run.submit
    monkeypatch.setattr(Worker, "send", lambda self, msg: events.append(
        ("gated" if len(msg) == 4 else msg[0], id(self))) or send(self, msg))
    monkeypatch.setattr(run, "submit", lambda t, parts: events.append(("submit", t)) or submit(t, parts))
    assert run.start_pipeline()
    try:
        got = {(c.id, t): run.verdict(c, t).status for c in cases for t in (a.name, b.name)}
    finally:
        run.close()
    assert set(got.values()) == {"pass"}
    kinds = [e[0] for e in events]
    assert kinds[0] in ("parts", "go"), kinds[:5]     # the first target's message first
    assert "gated" in kinds and "go" in kinds         # cases were sent ahead, and used
    for i, (kind, _) in enumerate(events):            # every pre-send follows a turn's own message
        if kind == "submit":
            assert any(k in ("parts", "go") for k in kinds[:i]), kinds[:i + 1]
