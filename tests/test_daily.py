"""Issue #34: a hardware team's daily loop (witnesses from outside the run, shrink, repro, the terminal)."""

from __future__ import annotations

import json

import pytest

from tests.conftest import rows_written


def _tflite_ok():
    from targets import get_target
    ok, why = get_target("tflite-ref").availability()
    if not ok:
        pytest.skip(why)


def test_a_one_target_run_asks_the_local_targets_outside_it(run_suite):
    """--target=X alone: each failure's witness line names the runtimes outside the run that give
    the golden's value (here tflite-ref, in its worker), or why they could not run it."""
    _tflite_ok()
    proc, rd = run_suite("--target=tests.helper_targets:WrongTarget", "--ops=ADD", "--cases-per-op=3",
                         "--witness-cases=5", env={"QCONFORM_WITNESS_TARGETS": "tflite-ref,ref"})
    assert proc.returncode == 1, proc.stdout[-3000:]
    bad = [r for r in rows_written(rd) if r["status"] == "fail"]
    assert bad
    for r in bad:
        assert r["witnesses_golden"] == ["tflite-ref"], r
        assert "witnesses: golden's value: tflite-ref; this target's: none" in proc.stdout
    ok = [r for r in rows_written(rd) if r["status"] == "pass"]
    assert ok and all("witnesses_golden" not in r for r in ok)


def test_no_witness_says_why(run_suite):
    proc, rd = run_suite("--target=tests.helper_targets:WrongTarget", "--ops=ADD", "--cases-per-op=3")
    assert proc.returncode == 1
    bad = [r for r in rows_written(rd) if r["status"] == "fail"]
    assert bad and all("--witness-cases 0" in r["witnesses_none"] for r in bad)
    assert "witnesses: none: not asked (--witness-cases 0)" in proc.stdout


def test_repro_fails_while_it_fails_and_passes_once_fixed(run_suite, qconform_cli, tmp_path):
    """`qconform repro FILE`: the failure line's command; exit 1 with got/want while the target
    still fails, 0 once it is fixed; a copied failure file finds its policy by its sha256; a
    more lenient setting is refused."""
    target = "tests.helper_targets:WrongTarget"
    proc, rd = run_suite(f"--target={target}", "--ops=ADD", "--cases-per-op=3")
    r = next(r for r in rows_written(rd) if r["status"] == "fail")
    assert r["repro"] == f"qconform repro {r['failure_file']} --target={target}"
    p = qconform_cli("repro", r["failure_file"], f"--target={target}")
    assert p.returncode == 1 and p.stdout.startswith("STILL FAILS") and "got " in p.stdout and "want " in p.stdout
    copy = tmp_path / "elsewhere.json"   # copied out of its run folder: the built-in policy's sha256
    copy.write_bytes(open(r["failure_file"], "rb").read())
    p = qconform_cli("repro", str(copy), f"--target={target}")
    assert p.returncode == 1, p.stdout + p.stderr
    fixed = dict(json.loads(copy.read_text()))
    fixed["id"] = "ADD-fixed-000"   # (an id the helper target does not damage: as if fixed)
    (tmp_path / "fixed.json").write_text(json.dumps(fixed))
    # a pass under the versions that failed it is no fix: the failure depended on the run's worker
    p = qconform_cli("repro", str(tmp_path / "fixed.json"), f"--target={target}")
    assert p.returncode == 1 and p.stdout.startswith("PASSES ALONE, NOT KNOWN FIXED") \
        and "the same runtime versions failed it" in p.stdout, p.stdout
    # run alone by a release before this one: fixed since, and the repro names what changed
    fixed["judged"] = {**fixed["judged"], "versions": {"helper": "0.9"}, "batch": ["ADD-fixed-000"]}
    (tmp_path / "fixed.json").write_text(json.dumps(fixed))
    p = qconform_cli("repro", str(tmp_path / "fixed.json"), f"--target={target}")
    assert p.returncode == 0 and p.stdout.startswith("FIXED") and "helper 0.9 -> 1.0" in p.stdout, p.stdout
    # judged in a batch whose other cases cannot be made again (not generated): not known fixed
    fixed["judged"]["batch"] = ["ADD-fixed-000", "ADD-other-000"]
    (tmp_path / "batched.json").write_text(json.dumps(fixed))
    p = qconform_cli("repro", str(tmp_path / "batched.json"), f"--target={target}")
    assert p.returncode == 1 and "not the generated case of its id" in p.stdout, p.stdout
    p = qconform_cli("repro", r["failure_file"], str(tmp_path / "fixed.json"), f"--target={target}")
    assert p.returncode == 1 and p.stdout.splitlines()[-1] == "2 failure files: 1 still fail, 1 fixed", p.stdout
    p = qconform_cli("repro", str(copy), f"--target={target}", "--tolerance=examples/kernels/bit-exact.toml")
    assert p.returncode == 2 and "another tolerance policy" in p.stderr


def test_the_verdict_line_agrees_with_pytest_under_runxfail_and_fits_the_terminal(run_suite, tmp_path):
    waivers = tmp_path / "w.toml"
    waivers.write_text('format = "qconform-waivers/1"\ntarget = "*"\n[[waiver]]\ncase = "ADD-zp_min-000"\n'
                       'reason = "known"\nversions = { helper = "1.*" }\nexpires = 2099-12-31\n')
    args = ("--target=tests.helper_targets:WrongTarget", "--ops=ADD", "--cases-per-op=3", f"--waivers={waivers}")
    proc, _ = run_suite(*args, env={"COLUMNS": "80"})
    last = [ln for ln in proc.stdout.splitlines() if ln.startswith("qconform:")][-1]
    assert proc.returncode == 1 and last.startswith("qconform: 1 new failure"), proc.stdout
    proc, _ = run_suite(*args, "--runxfail", env={"COLUMNS": "80"})
    last = [ln for ln in proc.stdout.splitlines() if ln.startswith("qconform:")][-1]
    assert proc.returncode == 1 and "2 failed" in proc.stdout.splitlines()[-1]
    assert last.startswith("qconform: FAIL under --runxfail: 1 known failing case fail"), last
    ours = proc.stdout.split("qconform: (op, target)s with")[1].split("run folder:")[0].splitlines()[1:]
    assert ours and all(len(ln) <= 80 for ln in ours), ours


def test_terminal_lines_fit_the_width_and_cut_at_a_word():
    from reports.build import Report, terminal_lines
    from reports.summary import compact_table, fit, summarize
    assert fit("aaa bbb ccc ddd", 10) == "aaa bbb..." and fit("short", 10) == "short"
    rows = [{"op": "NOT_EQUAL", "target": t, "status": "fail", "case_id": f"NOT_EQUAL-x-00{i}",
             "finding": "comparison-resolution", "reason": "known finding comparison-resolution: x",
             "elements": 4, "mismatches": 1, "max_abs_lsb": 1.0, "sum_err_lsb": 1.0}
            for i, t in enumerate(["tflite", "tflite-ref", "tflm", "openvino", "htp", "ort", "tosa"])]
    summary = summarize(rows)
    table = compact_table(summary, 60).splitlines()
    assert len(table) == 2 + len(summary) and all(len(ln) <= 60 for ln in table)
    lines = [ln for ln, _ in terminal_lines(Report(summary=summary), 80)]
    known = [ln for ln in lines if ln.startswith("known finding comparison-resolution")]
    assert len(known) == 1 and len(known[0]) <= 80 and "and 6 more" in known[0], known


def test_the_cli_imports_only_the_command_given():
    """`qconform --help` and each command's --help import no runtime nor the heavy libraries."""
    import subprocess
    import sys

    from suite import cli
    from tests.conftest import ROOT
    import pkgutil
    from suite import commands
    assert sorted(cli.COMMANDS) == sorted(m.name for m in pkgutil.iter_modules(commands.__path__))
    heavy = ("scipy", "hypothesis", "onnxruntime", "openvino", "ai_edge_litert", "pandas", "pyarrow", "onnx")
    code = ("import sys\nfrom suite.cli import main\nfor argv in [['--help']] + [[c, '--help'] for c in sys.argv[1:]]:\n"
            "    try:\n        main(argv)\n    except SystemExit:\n        pass\n"
            f"print('HEAVY', sorted(m for m in {heavy!r} if m in sys.modules))")
    p = subprocess.run([sys.executable, "-c", code, *sorted(cli.COMMANDS)], cwd=ROOT, capture_output=True, text=True,
                       timeout=120)
    assert p.stdout.strip().splitlines()[-1] == "HEAVY []", p.stdout[-2000:] + p.stderr[-2000:]
    for name, text in cli.COMMANDS.items():   # the top-level help says what each module registers
        parser = cli.build_parser(only=name)
        sub = next(a for a in parser._actions if a.dest == "command")
        assert next(c.help for c in sub._choices_actions if c.dest == name) == text


def test_targets_are_probed_once_per_installed_versions(tmp_path, monkeypatch):
    import targets
    from suite.commands import targets as cmd
    monkeypatch.setenv("QCONFORM_CACHE_DIR", str(tmp_path))
    monkeypatch.setattr(targets, "known_names", lambda: ["ref", "netrun"])
    first, cached = cmd.rows()
    assert not cached and [r["target"] for r in first] == ["ref", "netrun"] and first[0]["available"]
    again, cached = cmd.rows()
    assert cached and again == first
    monkeypatch.setenv("QCONFORM_TOSA_VENV", str(tmp_path / "elsewhere"))   # what it depends on changed: probed
    assert not cmd.rows()[1]
    (next(tmp_path.glob("targets-*.json"))).write_text("[1, 2")   # a torn cache file: probed anew
    assert all(not cmd.rows(refresh=r)[1] for r in (True,))
