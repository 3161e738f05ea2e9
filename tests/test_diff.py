"""`qconform diff`: regressions between two runs, exit status for a nightly gate; two runs
whose set-ups differ do not compare (exit 2) unless --allow-different names the difference."""

from __future__ import annotations

import json

import pytest

import reports.latency  # noqa: F401  scipy.stats (and numpy.fft, whose C extension loads once per process) before
#                         pytester's in-process runs, which drop the modules imported during them
from reports.diff import diff_runs
from reports.results import ResultWriter, read_rows
from reports.summary import summarize, to_csv
from suite.cli import main
from tests.helper_targets import flipped
from tests.inprocess import run_inprocess

pytest_plugins = "pytester"

FLIP = "--target=tests.helper_targets:FlipOneLsb"
ARGS = ("--ops", "ADD,MUL", "--cases-per-op", "5")


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    """A baseline, an identical re-run, a run one LSB off on some cases, and a slower run."""
    import os
    import subprocess
    import sys

    from tests.conftest import ROOT
    base = tmp_path_factory.mktemp("diff")

    def run(name, **env):
        rd = base / name
        e = dict(os.environ)
        e.update(env)
        cmd = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "--report-dir", str(rd), FLIP, *ARGS]
        p = subprocess.run(cmd, check=False, cwd=ROOT, capture_output=True, text=True, timeout=600, env=e)
        assert p.returncode == 0, p.stdout[-3000:] + p.stderr[-2000:]   # 1 LSB is within the default tolerance
        latest = rd / "latest"   # where each run has a folder of its own in --report-dir
        return latest.resolve() if latest.is_dir() else rd
    return {"base": run("base", QCONFORM_FLIP_EVERY="0"), "same": run("same", QCONFORM_FLIP_EVERY="0"),
            "worse": run("worse", QCONFORM_FLIP_EVERY="3"),
            "slower": run("slower", QCONFORM_FLIP_EVERY="0", QCONFORM_LATENCY_SCALE="2")}


def test_identical_runs_exit_0(runs, qconform_main, tmp_path):
    p = qconform_main("diff", str(runs["base"]), str(runs["same"]), "-o", str(tmp_path))
    assert p.returncode == 0, p.stdout + p.stderr
    assert p.stdout.startswith(f"NO REGRESSION ({len(read_rows(runs['base']))} results compared)\n")
    d = json.loads((tmp_path / "diff.json").read_text())
    assert d["regressed"] is False and d["compared"] == len(read_rows(runs["base"]))


def test_one_lsb_worse_exits_1_and_names_exactly_those_cases(runs, qconform_main, tmp_path):
    md = tmp_path / "diff.md"
    p = qconform_main("diff", str(runs["base"]), str(runs["worse"]), "-o", str(tmp_path), "--markdown", str(md))
    assert p.returncode == 1, p.stdout + p.stderr
    rows = read_rows(runs["worse"])
    expected = {r["case_id"] for r in rows if r["status"] != "unsupported" and flipped(r["case_id"], 3)}
    assert expected, "the flip target must damage some of these cases"
    d = json.loads((tmp_path / "diff.json").read_text())
    assert {c["case"] for c in d["case_regressions"]} == expected
    for c in d["case_regressions"]:
        assert any(w.startswith("more mismatches") for w in c["what"])
        assert any(w.startswith("max err grew (0 -> 1") for w in c["what"])
    assert {g["op"] for g in d["group_regressions"]} == {c["op"] for c in d["case_regressions"]}
    for cid in expected:
        assert cid in p.stdout and cid in md.read_text()
    assert md.read_text().startswith(f"### ❌ REGRESSED: {len(expected)} new failures") is False   # within tolerance
    assert md.read_text().startswith("### ❌ REGRESSED: 0 new failures, ") and (tmp_path / "diff.csv").exists()


def test_latency_regression_listed_and_gated_only_when_asked(runs, qconform_main, tmp_path):
    """Twice as slow on every case: listed by default (exit 0), a regression with --latency-gate."""
    p = qconform_main("diff", str(runs["base"]), str(runs["slower"]), "-o", str(tmp_path))
    assert p.returncode == 0, p.stdout
    d = json.loads((tmp_path / "diff.json").read_text())
    assert d["case_regressions"] == [] and d["group_regressions"] == []
    assert d["latency_changes"] and all(g["latency"] == "slower" and g["latency_p"] < 0.05 for g in d["latency_changes"])
    assert "latency +100.0% (" in p.stdout and "listed, not gating" in p.stdout
    p = qconform_main("diff", str(runs["base"]), str(runs["slower"]), "-o", str(tmp_path), "--latency-gate")
    assert p.returncode == 1, p.stdout
    assert p.stdout.startswith("REGRESSED: 0 new failures, ") and "slower (--latency-gate)" in p.stdout.splitlines()[0]
    # a threshold above the slow-down accepts it
    p = qconform_main("diff", str(runs["base"]), str(runs["slower"]), "-o", str(tmp_path), "--latency-gate",
                     "--latency-threshold", "150")
    assert p.returncode == 0, p.stdout


# ---- run folders written directly: rows and the run.json fields the diff reads ----

def _write(d, rows, **options):
    """A run folder: ``rows`` in results.jsonl and a run.json (seed 0, 4 cases per op, the
    ops and targets of the rows, one tolerance digest, runtime rt 1.0), ``options`` overriding
    (``...``: the option is not written)."""
    d.mkdir(parents=True, exist_ok=True)
    w = ResultWriter(d, truncate=True)
    for r in rows:
        w.append(r)
    w.close()
    (d / "summary.csv").write_text(to_csv(summarize(rows)))
    targets = sorted({r["target"] for r in rows})
    opts = {"seed": 0, "cases_per_op": 4, "ops": sorted({r["op"] for r in rows}), "targets": targets,
            "scheme": "tflite-ref-double", "tolerance_file": None, "tolerance_digest": "ab" * 32, **options}
    doc = {"format": "qconform-run/1", "run_id": d.name, "finished": "2026-01-01T00:00:00", "interrupted": False,
           "options": {k: v for k, v in opts.items() if v is not ...}, "host": {"hostname": "h", "cpu_model": "c"},
           "targets": {t: {"versions": {"rt": "1.0"}} for t in targets}}
    (d / "run.json").write_text(json.dumps(doc))
    return d


def _row(cid, status="pass", mism=0, maxe=0.0, digest="d", target="t", **kw):
    r = {"case_id": cid, "op": cid.split("-")[0], "target": target, "status": status, "case_digest": digest,
         "elements": 10, "mismatches": mism, "max_abs_lsb": maxe, "p50_us": 10.0, "spread_us": 1.0,
         "tolerance_lsb": 0.0}
    r.update(kw)
    return r


@pytest.fixture
def diff(capsys, tmp_path):
    """``qconform diff *args`` in this process (diff.json and diff.csv into a scratch folder):
    (exit status, stdout, stderr)."""
    def _run(*args):
        capsys.readouterr()   # what came before (an in-process run's output)
        code = main(["diff", *args, "-o", str(tmp_path / "out")])
        out = capsys.readouterr()
        return code, out.out, out.err
    return _run


def test_diff_kinds(tmp_path):
    base = _write(tmp_path / "a", [_row("ADD-x-000"), _row("ADD-x-001"), _row("ADD-x-002"), _row("ADD-x-003"),
                                   _row("ADD-x-003", target="u"),
                                   _row("ADD-x-004", "fail", 5, 3.0), _row("ADD-x-005", digest="old")])
    run = _write(tmp_path / "b", [_row("ADD-x-000"), _row("ADD-x-001", "fail", 2, 2.0),
                                  _row("ADD-x-002", "unsupported", None, None, reason="no kernel"),
                                  _row("ADD-x-003", target="u"),
                                  _row("ADD-x-004"), _row("ADD-x-005", digest="new"), _row("ADD-x-006")])
    assert diff_runs(base, run).refused == "cases differs"   # ADD-x-005's content, ADD-x-006
    d = diff_runs(base, run, allow_different=["cases"])
    kinds = {c["case"]: c["what"] for c in d.cases}
    assert set(kinds) == {"ADD-x-001", "ADD-x-002"}
    assert kinds["ADD-x-001"][0].startswith("now failing (pass -> fail)")
    assert kinds["ADD-x-002"][0].startswith("now unsupported")
    # ADD-x-003 is in the run (on u), not on t; ADD-x-006, only in the run, is a set-up difference
    assert d.missing == ["ADD-x-003:t"] and d.changed == ["ADD-x-005:t"] and d.new == 1
    assert [c["case"] for c in d.improved] == ["ADD-x-004"]
    assert d.regressed and d.exit_status == 1
    assert diff_runs(base, run, allow_missing=True, allow_different=["cases"]).regressed   # the failing case still gates


def test_known_findings_stay_known(tmp_path):
    k = {"finding": "bug-1"}
    base = _write(tmp_path / "a", [_row("SUM-x-000"), _row("SUM-x-001", "fail", 3, 9.0, **k),
                                   _row("SUM-x-002", "fail", 3, 9.0, **k), _row("SUM-x-003", "fail", 3, 9.0),
                                   _row("SUM-x-004", "fail", 3, 9.0, **k)])
    run = _write(tmp_path / "b", [_row("SUM-x-000", "fail", 3, 9.0, **k), _row("SUM-x-001", "fail", 3, 9.0, **k),
                                  _row("SUM-x-002", "fail", 3, 9.0), _row("SUM-x-003", "fail", 3, 9.0, **k),
                                  _row("SUM-x-004", "fail", 8, 57.0, **k)])
    d = diff_runs(base, run)
    # fails unexplained now: a new failure; passed and now fails under a known finding (000), or the
    # same finding with a bigger error (004: a runtime whose bug is nondeterministic): explained, not red
    assert {c["case"]: c["what"][0] for c in d.cases} == {
        "SUM-x-002": "no longer explained by known finding bug-1 (fail -> fail)"}
    # a failure explained now and not before (000, 003) is listed as a new known finding
    assert [(c["case"], c["finding"]) for c in d.findings] == [("SUM-x-000", "bug-1"), ("SUM-x-003", "bug-1")]
    assert d.verdict() == "REGRESSED: 1 new failure (5 results compared)"
    same = diff_runs(base, _write(tmp_path / "c", [_row("SUM-x-000"), _row("SUM-x-001", "fail", 9, 99.0, **k),
                                                   _row("SUM-x-002", "fail", 3, 9.0, **k),
                                                   _row("SUM-x-003", "fail", 3, 9.0),
                                                   _row("SUM-x-004", "fail", 1, 2.0, **k)]))
    assert not same.regressed and same.exit_status == 0, same.verdict()


def test_seed_0_and_seed_7_do_not_compare(pytester, diff, tmp_path):
    """The measured false green of issue #14: the same ops, other data, "no regression"."""
    for seed in (0, 7):
        proc, _ = run_inprocess(pytester, "--target=ref", "--ops", "ADD", "--cases-per-op", "2", "--seed", str(seed),
                                report_dir=tmp_path / f"s{seed}")
        assert proc.returncode == 0, proc.stdout + proc.stderr
    md = tmp_path / "diff.md"
    code, out, err = diff(str(tmp_path / "s0" / "latest"), str(tmp_path / "s7" / "latest"), "--markdown", str(md))
    assert code == 2, out + err
    assert out.startswith("NOT COMPARABLE: seed, cases differ\n")
    assert "  seed: baseline 0; run 7 [refused]" in out.splitlines()
    assert "--allow-different seed --allow-different cases" in out
    assert md.read_text().startswith("### ⛔ NOT COMPARABLE: seed, cases differ")
    assert "NO REGRESSION" not in out + md.read_text()
    # allowed: still nothing to compare (every case holds other data), which always refuses
    code, out, _ = diff(str(tmp_path / "s0"), str(next((tmp_path / "s7" / "runs").iterdir())),
                        "--allow-different", "seed", "--allow-different", "cases")
    assert code == 2 and out.startswith("NOT COMPARABLE: no common results")


def test_tolerance_policy_changed(tmp_path, diff):
    # a stricter policy: ADD-x-001 one LSB off was within 1 LSB, is not within 0
    base = _write(tmp_path / "a", [_row("ADD-x-000"), _row("ADD-x-001", mism=1, maxe=1.0, tolerance_lsb=1.0)])
    run = _write(tmp_path / "b", [_row("ADD-x-000"), _row("ADD-x-001", "fail", 1, 1.0)], tolerance_digest="cd" * 32)
    code, out, _ = diff(str(base), str(run))
    assert code == 2 and out.startswith("NOT COMPARABLE: tolerance differs\n")
    assert f"tolerance (tolerance policy: SHA-256 of the file): baseline {'ab' * 8} (built-in default); " \
           f"run {'cd' * 8} (built-in default) [refused]" in out
    assert "ADD-x-001:t 1 LSB; run ADD-x-001:t 0 LSB" in out   # what each result was judged with
    md = tmp_path / "diff.md"
    code, out, _ = diff(str(base), str(run), "--allow-different", "tolerance", "--markdown", str(md))
    assert code == 1
    head = md.read_text().splitlines()[:5]
    assert head[0] == "### ❌ REGRESSED: 1 new failure (2 results compared)"
    assert head[2].startswith("**Set-up differs** (allowed: `--allow-different tolerance`)")
    assert head[3].startswith("- tolerance (tolerance policy: SHA-256 of the file)") and head[3].endswith("(allowed)")
    assert out.splitlines()[1].startswith("set-up differs (compared anyway: --allow-different tolerance)")


def test_tolerance_without_digest(tmp_path, diff):
    """run.json from before options.tolerance_digest: the file names, and each result's tolerance_lsb."""
    rows = [_row("ADD-x-000"), _row("ADD-x-001")]
    base = _write(tmp_path / "a", rows, tolerance_digest=..., tolerance_file="tol.toml")
    code, out, _ = diff(str(base), str(_write(tmp_path / "b", rows, tolerance_file="other.toml")))
    assert code == 2 and "tolerance (tolerance file): baseline tol.toml; run other.toml [refused]" in out
    assert "note: tolerance policy compared by file name: the baseline's run.json has no options.tolerance_digest" in out
    # the same name, another policy inside: the rows say so
    run = _write(tmp_path / "c", [_row("ADD-x-000", tolerance_lsb=2.0), _row("ADD-x-001")],
                 tolerance_digest=..., tolerance_file="tol.toml")
    code, out, _ = diff(str(base), str(run))
    assert code == 2 and out.startswith("NOT COMPARABLE: tolerance differs")
    assert "tolerance (tolerance_lsb of the same results): baseline 1 result, ADD-x-000:t 0 LSB" in out


def test_other_targets(tmp_path, diff):
    base = _write(tmp_path / "a", [_row("ADD-x-000"), _row("ADD-x-000", target="u")])
    run = _write(tmp_path / "b", [_row("ADD-x-000")])
    code, out, _ = diff(str(base), str(run))
    assert code == 2 and "  targets: baseline t, u; run t [refused]" in out.splitlines()
    # compared on t; u, absent from the run, is the set-up difference above, not a missing result
    code, out, _ = diff(str(base), str(run), "--allow-different", "targets")
    assert code == 0 and out.startswith("NO REGRESSION (1 result compared)\nset-up differs")


def test_case_ids_in_one_run_only(tmp_path, diff):
    base = _write(tmp_path / "a", [_row("ADD-x-000"), _row("ADD-x-001"), _row("ADD-x-002")])
    run = _write(tmp_path / "b", [_row("ADD-x-000"), _row("ADD-x-001"), _row("ADD-x-009")])
    code, out, _ = diff(str(base), str(run))
    assert code == 2 and ("  cases (case ids): baseline 3 case ids, 1 only here: ADD-x-002; "
                          "run 3 case ids, 1 only here: ADD-x-009 [refused]") in out
    code, out, _ = diff(str(base), str(run), "--allow-different", "cases")
    assert code == 0 and "ADD-x-002" in out and "ADD-x-009" in out and "2 results compared" in out.splitlines()[0]
    # no case in common: nothing to compare, whatever is allowed
    other = _write(tmp_path / "c", [_row("ADD-x-007"), _row("ADD-x-008")])
    code, out, _ = diff(str(base), str(other), "--allow-different", "cases")
    assert code == 2 and out.startswith("NOT COMPARABLE: no common results: no (case id, target, device) is in both runs")


def test_one_regression_named_first(tmp_path, diff):
    base = _write(tmp_path / "a", [_row("ADD-x-000"), _row("ADD-x-001"), _row("MUL-x-000")])
    run = _write(tmp_path / "b", [_row("ADD-x-000", maxe=0.5), _row("ADD-x-001"), _row("MUL-x-000", "fail", 4, 3.0)])
    md = tmp_path / "diff.md"
    code, out, _ = diff(str(base), str(run), "--markdown", str(md))
    assert code == 1
    assert out.startswith("REGRESSED: 1 new failure, 1 other regressed case, 2 regressed op/target groups (3 results compared)\n")
    first = [ln for ln in out.splitlines() if "-x-0" in ln][0]
    assert first.startswith("  MUL-x-000:t  now failing (pass -> fail)")   # before ADD-x-000's larger error
    rows = [ln for ln in md.read_text().splitlines() if ln.startswith("| `")]
    assert rows[0].startswith("| `MUL-x-000` | t | now failing") and "ADD-x-000" in rows[1]


def test_same_setup_identical_runs(tmp_path, diff):
    rows = [_row("ADD-x-000"), _row("ADD-x-001", "fail", 2, 1.0, finding="bug-1")]
    code, out, _ = diff(str(_write(tmp_path / "a", rows)), str(_write(tmp_path / "b", rows)))
    assert code == 0 and out.startswith("NO REGRESSION (2 results compared)\nbaseline ")


def test_other_scheme_versions_devices(tmp_path, diff):
    base = _write(tmp_path / "a", [_row("ADD-x-000", device="d1")])
    run = _write(tmp_path / "b", [_row("ADD-x-000", device="d2")], scheme="xnnpack-fp32")
    doc = json.loads((run / "run.json").read_text())
    doc["targets"]["t"]["versions"]["rt"] = "2.0"
    (run / "run.json").write_text(json.dumps(doc))
    code, out, _ = diff(str(base), str(run))
    assert code == 2 and out.startswith("NOT COMPARABLE: devices, scheme differ")
    assert "  devices (devices per target): baseline t: d1; run t: d2 [refused]" in out
    assert "  scheme: baseline tflite-ref-double; run xnnpack-fp32 [refused]" in out
    # a runtime upgrade alone is compared, and named as one
    assert "  versions (runtime versions (an upgrade: compared)): baseline t rt 1.0; run t rt 2.0 [allowed]" in out
    upgraded = _write(tmp_path / "c", [_row("ADD-x-000", device="d1")])
    doc = json.loads((upgraded / "run.json").read_text())
    doc["targets"]["t"]["versions"]["rt"] = "2.0"
    (upgraded / "run.json").write_text(json.dumps(doc))
    code, out, _ = diff(str(base), str(upgraded))
    assert code == 0 and out.startswith("NO REGRESSION (1 result compared)\nset-up differs:\n"), out
    assert "note: runtime upgrade: t rt 1.0 -> 2.0" in out


def test_diff_bad_input(tmp_path, diff):
    code, _, err = diff(str(tmp_path / "nope"), str(tmp_path))
    assert code == 2 and "results.jsonl" in err and "Traceback" not in err
    # a run folder without run.json: its set-up cannot be checked
    base, run = _write(tmp_path / "a", [_row("ADD-x-000")]), _write(tmp_path / "b", [_row("ADD-x-000")])
    (base / "run.json").unlink()
    code, _, err = diff(str(base), str(run))
    assert code == 2 and "run.json" in err and "BASELINE_DIR" in err
    # a run without summary.csv: its group verdicts are unknown, so no verdict at all
    base = _write(tmp_path / "c", [_row("ADD-x-000")])
    (run / "summary.csv").unlink()
    code, out, err = diff(str(base), str(run))
    assert code == 2 and "summary.csv" in err and "RUN_DIR" in err and "NO REGRESSION" not in out


def test_latency_test_effect_and_minimum(tmp_path, diff):
    """A 3x slow-down of every timed case is listed (and gates with --latency-gate); +30% of a 10 us
    kernel (3 us), or one case of five slower, is not; the printed spread is the timed rows' own."""
    def rows(scale, spread, first=1.0):
        return [_row(f"ADD-x-{i:03d}", p50_us=10.0 * (scale if i or first == 1.0 else first), spread_us=spread)
                for i in range(5)] + [_row(f"ADD-x-{i:03d}", p50_us=None, spread_us=None) for i in range(5, 20)]
    base = _write(tmp_path / "a", rows(1.0, 3.5))
    code, out, _ = diff(str(base), str(_write(tmp_path / "b", rows(3.0, 8.1))))
    assert code == 0 and "slower: latency +200.0% (10.00 -> 30.00 us, median of 5 cases' p50; spread 3.50 / 8.10 us" in out
    code, out, _ = diff(str(base), str(tmp_path / "b"), "--latency-gate")
    assert code == 1 and out.startswith("REGRESSED: 0 new failures, 1 op/target group slower (--latency-gate)")
    for name, slower in (("c", rows(1.3, 3.5)), ("d", rows(1.0, 3.5, first=9.0))):
        code, out, _ = diff(str(base), str(_write(tmp_path / name, slower)), "--latency-gate")
        assert code == 0 and "latency changes" not in out, out
    # another CPU: latencies are not compared at all
    other = _write(tmp_path / "e", rows(3.0, 3.5))
    doc = json.loads((other / "run.json").read_text())
    doc["host"]["cpu_model"] = "other"
    (other / "run.json").write_text(json.dumps(doc))
    code, out, _ = diff(str(base), str(other), "--latency-gate")
    assert code == 0 and "note: latencies not compared on 1 target whose device facts differ" in out
    # timed another way (a case alone before, its nodes in a batch now): not compared, named
    scoped = _write(tmp_path / "f", [{**r, "latency_scope": "nodes"} for r in rows(3.0, 3.5)])
    code, out, _ = diff(str(base), str(scoped), "--latency-gate")
    assert code == 0 and "latency changes" not in out, out
    assert "note: latencies not compared for 5 results timed another way in each run" in out
    # gated, and a target none of whose cases was timed in both runs (htp on QNN's simulator): named
    untimed = _write(tmp_path / "g", [{**r, "p50_us": None} for r in rows(1.0, 3.5)])
    code, out, _ = diff(str(base), str(untimed), "--latency-gate")
    assert code == 0 and "note: --latency-gate: no latency compared on t: no case of theirs has one in both runs" in out
    # one op of the target timed in both runs: the target is not named
    mul = [_row(f"MUL-x-{i:03d}") for i in range(3)]
    base2 = _write(tmp_path / "h", rows(1.0, 3.5) + mul)
    code, out, _ = diff(str(base2), str(_write(tmp_path / "i", [{**r, "p50_us": None} for r in rows(1.0, 3.5)] + mul)),
                        "--latency-gate")
    assert code == 0 and "no latency compared on" not in out, out


def test_same_configuration_twice_beside_a_cpu_bound_job_exits_0(tmp_path, diff):
    """The false red of issue #22: the same commit and options run twice, the second beside a
    CPU-bound process (slower timings), compare without a regression; latency is listed, never gated.
    (Each run in a process of its own: run in-process here, with pytester, the test process aborted, SIGABRT.)"""
    import subprocess
    import sys

    from tests.conftest import ROOT
    pytest.importorskip("onnxruntime")
    pytest.importorskip("ai_edge_litert")

    def run(name):
        cmd = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", f"--report-dir={tmp_path / name}",
               "--target=ort,tflite", "--ops", "ADD,ARG_MAX"]
        p = subprocess.run(cmd, check=False, cwd=ROOT, capture_output=True, text=True, timeout=600)
        assert p.returncode == 0, p.stdout[-3000:] + p.stderr[-2000:]
        return tmp_path / name / "latest"
    base = run("quiet")
    burner = subprocess.Popen([sys.executable, "-c", "while True: pass"])
    try:
        loaded = run("loaded")
    finally:
        burner.kill()
        burner.wait()
    code, out, err = diff(str(base), str(loaded))
    assert code == 0, out + err
    assert out.startswith("NO REGRESSION (")


def test_new_group_verdict_bias_heads_the_diff(pytester, diff, tmp_path, monkeypatch):
    """A user kernel that turned biased passes case by case; the diff names its bias first, exit 1;
    the other way round it is fixed, and biased twice it is still failing (exit 0)."""
    args = ("--target=tests.bias_targets:TurnsBiased", "--ops", "ADD", "--cases-per-op", "8", "--certify")
    folders = {}
    for name, biased in (("good", "0"), ("bad", "1"), ("bad2", "1")):
        monkeypatch.setenv("QCONFORM_BIASED", biased)
        proc, folders[name] = run_inprocess(pytester, *args, report_dir=tmp_path / name)
        assert proc.returncode == (1 if biased == "1" else 0), proc.stdout[-2000:]
    md = tmp_path / "diff.md"
    code, out, err = diff(str(folders["good"]), str(folders["bad"]), "--markdown", str(md))
    assert code == 1, out + err
    head = out.splitlines()[0]
    assert head.startswith("REGRESSED: new group verdicts: bias on ADD/mykernel (+0.0"), head
    assert "LSB, p " in head and "certification litert-int8 on ADD/mykernel; 0 new failures" in head
    assert "\nnew group verdicts (2):\n  bias on ADD/mykernel (" in out
    assert "int8 outputs biased +" in md.read_text().split("**New group verdicts** (2):")[1]
    d = json.loads((tmp_path / "out" / "diff.json").read_text())
    assert [v["kind"] for v in d["group_verdicts"]["new"]] == ["bias+ int8", "certification litert-int8"]
    code, out, _ = diff(str(folders["bad"]), str(folders["good"]))
    assert code == 0 and "fixed group verdicts (2):\n  bias on ADD/mykernel" in out, out
    code, out, _ = diff(str(folders["bad"]), str(folders["bad2"]))
    assert code == 0 and "still-failing group verdicts (2):" in out and "new group verdict" not in out, out


def _envelope(cert: dict) -> str:
    """certificate.json's form (reports/attest.py: a DSSE envelope; its signature is not read here)."""
    import base64
    from reports import attest
    body = json.dumps(attest.statement(cert, [{"name": "x", "digest": {"sha256": "0" * 64}}])).encode()
    return json.dumps({"payloadType": attest.PAYLOAD_TYPE, "payload": base64.b64encode(body).decode(),
                       "signatures": [{"keyid": "k", "sig": ""}]})


def test_group_verdicts_compare_certificates_only_when_both_runs_certified(tmp_path):
    from reports.groups import compare, read_group_verdicts
    cert = {"ops": [{"op": "ADD", "target": "t", "spec": "litert-int8", "verdict": "non-conformant", "op_failures": []}]}
    a, b = _write(tmp_path / "a", [_row("ADD-x-000")]), _write(tmp_path / "b", [_row("ADD-x-000")])
    (b / "certificate.json").write_text(_envelope(cert))
    got = compare(read_group_verdicts(a), read_group_verdicts(b), {("ADD", "t")})
    assert got == {"new": [], "fixed": [], "still": [], "known": []}   # a certificate in the run only
    (a / "certificate.json").write_text(_envelope({"ops": []}))
    got = compare(read_group_verdicts(a), read_group_verdicts(b), {("ADD", "t")})
    assert [v["label"] for v in got["new"]] == ["certification litert-int8 on ADD/t"]


def test_every_regressed_case_has_a_reproduction_command_in_the_markdown(tmp_path):
    """A case that still passes with more mismatches has no failure file: its command runs the case."""
    from reports.diff import to_markdown
    base = _write(tmp_path / "a", [_row("ADD-x-000"), _row("ADD-x-001", "fail", 2, 2.0, repro="pytest --case-file=f.json")])
    run = _write(tmp_path / "b", [_row("ADD-x-000", mism=3, maxe=1.0),
                                  _row("ADD-x-001", "fail", 4, 3.0, repro="pytest --case-file=f.json")])
    d = diff_runs(base, run)
    md = to_markdown(d)
    lines = [ln for ln in md.splitlines() if ln.startswith("| `ADD-x-")]
    assert len(lines) == 2 and all(ln.rstrip(" |").endswith("`") for ln in lines), md
    assert "`pytest --target=t --ops=ADD --seed=0 --cases-per-op=4 --scheme=tflite-ref-double -k ADD-x-000:t`" in md
    assert "`pytest --case-file=f.json`" in md
