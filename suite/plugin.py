"""The qconform pytest plugin: options, report header, collection, verdicts, summary.

Loaded by the repository's ``conftest.py``. Every option lives in one group
(``pytest --help``, section "qconform"). A run:

1. ``pytest_configure`` resolves ``--target`` (unknown or unavailable -> one usage
   error), prepares ``--report-dir`` and creates the session's :class:`suite.runner.Run`;
2. ``pytest_generate_tests`` parametrizes ``test_case`` with (case, target) pairs,
   ids ``<op>-<variant>-<index>:<target>`` (select with ``-k``);
3. each test asks for its verdict (the first request of an (op, target) pair runs
   the pair's pending cases as one batch) and passes, fails with the case id, the
   first mismatching index, got vs want and a reproduction command, skips as
   ``unsupported``, or errors (``error``/``crash``/``timeout``/``infra``);
4. ``pytest_terminal_summary`` prints the per-op x target table and writes
   ``summary.csv`` / ``summary.md`` next to ``results.jsonl``.
"""

from __future__ import annotations

import datetime as _dt
import gc
import sys
import time
from pathlib import Path

import pytest

from suite.core.errors import QconformError

SUITE_DIR = Path(__file__).resolve().parent
_KEY = "_qconform"


class QcTargetError(Exception):
    """A target's error/crash/timeout/infra verdict: reported by pytest as ERROR."""


def pytest_addoption(parser):
    g = parser.getgroup("qconform", "qconform conformance suite")
    g.addoption("--target", action="append", default=[], metavar="NAME[,NAME]",
                help="target(s) to test: ref, tflite, tflite-ref, ort, htp, or module:Class "
                     "(repeatable or comma list; default: every available built-in target)")
    g.addoption("--cases-per-op", type=int, default=None, metavar="N",
                help="generated cases per operator (default 30)")
    g.addoption("--seed", type=int, default=0, metavar="N", help="seed of case generation (default 0)")
    g.addoption("--ops", action="append", default=[], metavar="OP[,OP]",
                help="only these operators (faster than -k: others are not generated)")
    g.addoption("--case-file", action="append", default=[], metavar="PATH",
                help="run saved case files (files or folders) instead of generated cases")
    g.addoption("--report-dir", default=None, metavar="DIR",
                help="where results.jsonl and the summaries go (default reports/latest)")
    g.addoption("--tolerance", default=None, metavar="FILE",
                help="tolerance policy file (default suite/core/tolerances.toml)")
    g.addoption("--scheme", default=None, metavar="NAME",
                help="requantization scheme of the golden (default tflite-ref-double)")
    g.addoption("--warmup", type=int, default=1, metavar="N", help="untimed invocations per case (default 1)")
    g.addoption("--repeats", type=int, default=5, metavar="N", help="timed invocations per case (default 5)")
    g.addoption("--batch-size", type=int, default=64, metavar="N",
                help="cases handed to a target at once (default 64)")
    g.addoption("--latency-cases", type=int, default=3, metavar="N",
                help="per (op, target), the first N cases run alone so their latency is their own "
                     "(the rest are batched; a merged batch has only a batch time) (default 3)")
    g.addoption("--htp-performance-mode", default="burst", metavar="MODE",
                help="QNN HTP performance mode (default burst)")
    g.addoption("--cache-dir", default=None, metavar="DIR",
                help="QNN context cache of the htp target (default $QCONFORM_CACHE_DIR or "
                     "~/.cache/qconform/qnn; 'off' disables it; see docs/performance.md)")
    g.addoption("--device", action="append", default=[], metavar="KIND:ADDR[,...]",
                help="run the targets on device(s): ssh:user@host, adb:SERIAL, local[:DIR], with "
                     "?python=...&root=... settings (repeatable or comma list; several devices: one "
                     "pytest-xdist worker each; see docs/devices.md)")
    g.addoption("--device-dist", default="each", choices=["each", "shard"],
                help="several devices: 'each' runs every case on every device (default), 'shard' "
                     "spreads (op, target) groups over them")
    g.addoption("--netrun-profile", default=None, metavar="FILE",
                help="device profile (TOML) of the netrun target (qnn-net-run style tools)")
    g.addoption("--certify", action="store_true", default=False,
                help="write certificate.md/.json: a verdict per op and target (see docs/reports.md)")
    g.addoption("--waivers", action="append", default=[], metavar="FILE",
                help="waiver file (qconform-waivers/1) turning known failures into 'waived' (repeatable)")
    g.addoption("--isolation", default="process", choices=["process", "none"],
                help="'process' (default): native targets run in worker processes, so a crash or hang "
                     "is that case's crash/timeout verdict; 'none': everything in this process")
    g.addoption("--golden-cache", default=None, metavar="DIR",
                help="goldens kept between runs, keyed by case digest and the golden's own source "
                     "(default $QCONFORM_GOLDEN_CACHE or ~/.cache/qconform/golden; 'off': none)")
    g.addoption("--test-protocol", default="lean", choices=["lean", "pytest"],
                help="'lean' (default): the plugin makes each conformance test's reports itself, as "
                     "pytest would (no per-test fixtures, capture or set-up/call hooks); 'pytest': "
                     "pytest's full protocol (used anyway with --pdb/--trace; see docs/performance.md)")
    g.addoption("--pipeline", default="on", choices=["on", "off"],
                help="'on' (default): the targets run the planned batches while pytest reports earlier "
                     "ones (not with --isolation none or in xdist workers); 'off': each batch when its "
                     "first test asks "
                     "(see docs/performance.md)")
    g.addoption("--timeout", type=float, default=60.0, metavar="SECONDS",
                help="per-case time limit of an isolated target (default 60; scaled for batches)")
    g.addoption("--resume", default=None, metavar="RUN_DIR",
                help="continue an interrupted run: skip the (case, target) pairs RUN_DIR/results.jsonl "
                     "records, append the rest, rebuild the summaries (see docs/reliability.md)")


# ----------------------------------------------------------------------------- configure

_OWN_OPTIONS = ("--target", "--case-file", "--ops", "--cases-per-op", "--seed", "--report-dir",
                "--tolerance", "--scheme", "--certify", "--device", "--resume", "--waivers")


@pytest.hookimpl(tryfirst=True)
def pytest_load_initial_conftests(early_config, parser, args):
    """``pytest --target=X`` with no test path runs the conformance tests from any folder.

    (An installed plugin sees the command line before collection; without this, pytest
    would collect the current folder, and an existing folder given as an option value
    outside the project could even become pytest's rootdir.)
    """
    ns = early_config.known_args_namespace
    if getattr(ns, "file_or_dir", None):
        return
    if any(a == o or a.startswith(o + "=") for a in args for o in _OWN_OPTIONS):
        args.append(str(SUITE_DIR / "test_conformance.py"))

def _is_conformance_run(config) -> bool:
    """Whether this pytest invocation collects the conformance tests (suite/)."""
    opts = config.option
    if opts.target or opts.case_file or opts.ops or opts.cases_per_op is not None or opts.device:
        return True
    if getattr(opts, "resume", None):
        return True
    for a in config.args:
        p = Path(str(a).split("::")[0]).resolve()
        if p == SUITE_DIR or SUITE_DIR in p.parents or p in SUITE_DIR.parents:
            return True
    return False


def _resolve_targets(config) -> tuple[list[str], list[tuple[str, str]]]:
    from targets import DEFAULT_TARGETS, get_target, parse_target_list
    requested = parse_target_list(config.option.target)
    if config.option.device:   # device targets are checked where they are bound (targets/remote.py)
        if not requested:
            raise QconformError("--device needs --target (e.g. --target=htp)", field="--device")
        return requested, []
    explicit = bool(requested)
    names = requested or list(DEFAULT_TARGETS)
    chosen, skipped = [], []
    for n in names:
        # QconformError on unknown names (and on a bad --netrun-profile)
        t = get_target(n, **({"profile": config.option.netrun_profile} if n == "netrun" else {}))
        ok, why = t.availability()
        if ok:
            chosen.append(n)
        elif explicit:
            raise QconformError(f"target '{n}' is not available on this machine: {why}",
                                field="--target", rule="requested targets must be available "
                                "(see `qconform targets`)")
        else:
            skipped.append((n, why))
    return chosen, skipped


def pytest_configure(config):
    if _FROZEN:   # an earlier run in this process froze its objects: they may be collected now
        _FROZEN.clear()
        gc.unfreeze()
    config.addinivalue_line("markers", "qconform: a conformance case of the qconform suite")
    if not _is_conformance_run(config):
        return
    try:
        _configure(config)
    except QconformError as e:
        raise pytest.UsageError(str(e)) from None


def _configure(config):
    from suite.harness.runner import DEFAULT_REPORT_DIR, Run, RunConfig
    from suite.cases.generate import DEFAULT_CASES_PER_OP
    o = config.option
    resume = None
    if o.resume:   # options not on the command line come from RUN_DIR/run.json (suite/resume.py)
        from suite.harness.resume import fill_options, open_run
        resume = open_run(o.resume, o.report_dir)
        fill_options(resume, o, [str(a) for a in config.invocation_params.args])
        o.report_dir = o.resume
    if not (o.timeout > 0):
        raise QconformError(f"must be > 0 seconds (got {o.timeout})", field="--timeout")
    for name in ("cases_per_op", "repeats", "batch_size"):
        v = getattr(o, name)
        if v is not None and v < 1:
            raise QconformError(f"must be >= 1 (got {v})", field="--" + name.replace("_", "-"))
    if o.warmup < 0:
        raise QconformError(f"must be >= 0 (got {o.warmup})", field="--warmup")
    if o.latency_cases < 0:
        raise QconformError(f"must be >= 0 (got {o.latency_cases})", field="--latency-cases")
    if o.scheme is not None:
        from reference import SCHEMES
        from reference.schemes import kernel_schemes
        if o.scheme not in SCHEMES:
            raise QconformError(f"unknown scheme '{o.scheme}' (known: {', '.join(SCHEMES)})",
                                field="--scheme")
        if o.scheme not in kernel_schemes():   # "exact" gives unrounded reals: no code could match them
            raise QconformError(f"'{o.scheme}' is not a kernel scheme (a run compares codes; known: "
                                f"{', '.join(kernel_schemes())})", field="--scheme",
                                rule="the golden of a run is rounded to codes")
    ops = [x.strip() for v in o.ops for x in v.split(",") if x.strip()]
    if ops:
        from suite.core.spec import known_ops
        bad = [x for x in ops if x not in known_ops()]
        if bad:
            raise QconformError(f"unknown operator(s) {', '.join(bad)}", field="--ops",
                                rule="operators of the spec tables")
    workerinput = getattr(config, "workerinput", None)
    chosen, skipped = _resolve_targets(config)
    run_id = ((workerinput or {}).get("qconform_run_id") or (resume.run_id if resume else None)
              or _dt.datetime.now().strftime("%Y%m%dT%H%M%S%f"))
    rc = RunConfig(
        targets=chosen, seed=o.seed, cases_per_op=o.cases_per_op or DEFAULT_CASES_PER_OP,
        report_dir=o.report_dir or DEFAULT_REPORT_DIR, tolerance_file=o.tolerance, scheme=o.scheme,
        warmup=o.warmup, repeats=o.repeats, batch_size=o.batch_size, latency_cases=o.latency_cases,
        case_files=list(o.case_file),
        ops=ops or None, target_options={"htp": {"htp_performance_mode": o.htp_performance_mode,
                                                 "cache_dir": o.cache_dir},
                                         "netrun": {"profile": o.netrun_profile}},
        run_id=run_id, worker=(workerinput or {}).get("workerid"),
        waivers=list(o.waivers), certify=o.certify, isolation=o.isolation, timeout=o.timeout,
        pipeline=o.pipeline == "on", golden_cache=_golden_cache_dir(o.golden_cache))
    if resume is not None:
        from suite.harness.resume import check_config
        check_config(resume, rc)
    dev_targets = None
    if o.device:   # bind the targets to this process's device (worker gw<k>: device k)
        from targets.remote import device_for_process, device_targets
        from targets.transport import parse_device_list
        devices = parse_device_list(o.device)
        dev_targets = device_targets(chosen, device_for_process(devices, workerinput), devices,
                                     rc.target_options)
    run = Run(rc, targets=dev_targets)
    if resume is not None or _distributed(o):   # the report reads results.jsonl
        run.kept_rows = None                                     # (rows of earlier sessions, of workers)
    preloaded = None
    if rc.case_files:   # read (and check) case files now: a bad one is one usage error, no traceback
        from suite.harness.runner import load_case_files
        preloaded = load_case_files(rc.case_files)
        if rc.ops:
            preloaded = [c for c in preloaded if c.op in rc.ops]
    lean = (o.test_protocol == "lean" and not any(getattr(o, k, False) for k in ("usepdb", "trace", "runxfail")))
    state = {"run": run, "skipped": skipped, "controller": workerinput is None, "cases": preloaded,
             "t0": time.perf_counter(), "worker_stats": [], "lean": lean}
    setattr(config, _KEY, state)
    if resume is not None:   # recorded pairs: from the bytes present when the controller started
        from suite.harness.resume import recorded, repair_tail
        resume.offset = (repair_tail(Path(rc.report_dir)) if workerinput is None
                         else int(workerinput.get("qconform_resume_offset", 0)))
        resume.done = recorded(Path(rc.report_dir), run_id, resume.offset)
        state["resume"] = resume
        state["resume_need"] = (len(devices) if o.device and o.device_dist == "each" else 1)
    # the targets' workers start now, while the cases are generated and collected; not when no
    # test will run, nor in an xdist controller (its workers run the tests, each its own Run)
    if not _runs_no_tests(config.option) and not _distributed(config.option):
        run.prestart()
    if workerinput is None:
        if resume is None:
            _prepare_report_dir(Path(rc.report_dir))
        from reports.runinfo import start_run
        state["started"] = start_run(run, skipped, getattr(o, "numprocesses", None))["started"]
        if resume is not None and resume.started:
            state["started"] = resume.started
        if config.pluginmanager.hasplugin("xdist"):
            config.pluginmanager.register(_XdistHooks(run_id, resume.offset if resume else None,
                                                      state["worker_stats"]), "qconform-xdist")
    # the default run (only the suite's tests, nothing selecting): the case set now, and the
    # targets start on the guessed plan while pytest starts its session and collects
    if preloaded is None and _collects_only_the_suite(config) and _guessable(config):
        try:
            _load_cases(config)
        except Exception:   # raised again where it is reported: in the suite's collection
            state["cases"] = None
        else:
            _start_guessed(config)


def _collects_only_the_suite(config) -> bool:
    """Every test path given is the suite's folder or its test module (no test ids)."""
    own = (SUITE_DIR.resolve(), (SUITE_DIR / "test_conformance.py").resolve())
    if config.getoption("ignore", None) or config.getoption("ignore_glob", None):
        return False
    return bool(config.args) and all("::" not in str(a) and Path(str(a)).resolve() in own for a in config.args)


def _golden_cache_dir(option: str | None) -> str | None:
    from suite.harness.golden_cache import folder_of
    d = folder_of(option)
    return str(d) if d is not None else None


def _prepare_report_dir(d: Path) -> None:
    """Start a fresh report: the previous results of this directory are replaced."""
    d.mkdir(parents=True, exist_ok=True)
    for name in ("results.jsonl", "summary.csv", "summary.md", "run.json", "results.parquet", "index.html",
                 "certificate.md", "certificate.json", "timing.json"):
        p = d / name
        if p.exists():
            p.unlink()
    fail_dir = d / "failures"
    if fail_dir.exists():
        import shutil
        shutil.rmtree(fail_dir, ignore_errors=True)


class _XdistHooks:
    def __init__(self, run_id: str, resume_offset: int | None = None, worker_stats: list | None = None):
        self.run_id = run_id
        self.resume_offset = resume_offset
        self.worker_stats = worker_stats if worker_stats is not None else []

    def pytest_testnodedown(self, node, error):
        """A worker's wall-time accounting (Run.stats), for the run's timing (suite/timing.py)."""
        out = getattr(node, "workeroutput", None) or {}
        if "qconform_stats" in out:
            self.worker_stats.append(out["qconform_stats"])

    def pytest_configure_node(self, node):
        node.workerinput["qconform_run_id"] = self.run_id
        if self.resume_offset is not None:
            node.workerinput["qconform_resume_offset"] = self.resume_offset
        gw = str(getattr(node.gateway, "id", ""))
        if gw[2:].isdigit():   # worker gw<k> drives --device number k (targets/remote.py)
            node.workerinput["qconform_device"] = int(gw[2:])


def _state(config):
    return getattr(config, _KEY, None)


def pytest_report_header(config):
    st = _state(config)
    if st is None:
        return None
    run = st["run"]
    lines = [f"qconform {__import__('suite').__version__}: seed={run.config.seed} "
             f"cases-per-op={run.config.cases_per_op} report-dir={run.config.report_dir}"]
    for name in run.config.targets:
        v = run.versions(name)
        ver = ", ".join(f"{k} {val}" for k, val in v.items())
        lines.append(f"  target {name}: {ver}")
    for name, why in st["skipped"]:
        lines.append(f"  target {name}: unavailable ({why})")
    if not run.config.targets:
        lines.append("  no target is available: see `qconform targets`")
    return lines


# ----------------------------------------------------------------------------- collection

def _load_cases(config):
    """The generated case set (from the golden-cache folder when an earlier run made it)."""
    st = _state(config)
    if st["cases"] is None:
        rc = st["run"].config

        def make():   # (the generators are imported only when the set is not in the cache: 0.25 s)
            from suite.cases.generate import generate, generator_ops
            known = generator_ops()
            return generate([op for op in (rc.ops or known) if op in known], rc.cases_per_op, rc.seed)
        from suite.harness.golden_cache import cached_cases
        folder = Path(rc.golden_cache) if rc.golden_cache else None
        st["cases"] = cached_cases(folder, rc.ops, rc.cases_per_op, rc.seed, make)
    return st["cases"]


def _guessable(config) -> bool:
    """The run pipelines, and nothing will select or reorder its tests (:func:`_plan_is_foreseeable`)."""
    return _state(config)["run"].pipelines() and _plan_is_foreseeable(config)


def _start_guessed(config) -> None:
    """The targets start on the plan collection will most likely give (Run.start_pipeline)."""
    st = _state(config)
    run = st["run"]
    if not run.guessing and run._pipeline is None and _guessable(config):
        run.plan(_test_order(st["cases"], run.config.targets))
        run.start_pipeline(guess=True)


def _cases(config):
    st = _state(config)
    if st["cases"] is None:
        _load_cases(config)
        _start_guessed(config)
    return st["cases"]


def _test_order(cases, targets) -> list:
    """The (case, target) pairs in the order of the tests pytest_generate_tests makes."""
    by_op: dict[str, list] = {}
    for c in cases:
        by_op.setdefault(c.op, []).append(c)
    return [(c, t) for cs in by_op.values() for t in targets for c in cs]


def _plan_is_foreseeable(config) -> bool:
    """Whether the collected plan will almost surely be every generated pair in test order:
    no selection (-k, -m, --deselect, test ids, --lf/--ff/--nf/--sw, --resume), no reordering
    plugin, not --collect-only or --fixtures, not under xdist. If a plugin changes it anyway, the
    guess is corrected at the end of collection (Run.settle_plan)."""
    o = config.option
    st = _state(config)
    if (_runs_no_tests(o) or _distributed(o) or hasattr(config, "workerinput")
            or st.get("resume")):
        return False
    if (getattr(o, "keyword", "") or getattr(o, "markexpr", "") or getattr(o, "deselect", None)
            or any(getattr(o, k, False) for k in ("lf", "failedfirst", "newfirst", "stepwise", "stepwise_skip",
                                                   "looponfail"))):
        return False
    if any("::" in str(a) for a in config.args):
        return False
    pm = config.pluginmanager
    return not any(pm.hasplugin(name) for name in ("randomly", "random_order"))


def pytest_generate_tests(metafunc):
    if "qc_pair" not in metafunc.fixturenames:
        return
    st = _state(metafunc.config)
    if st is None:
        metafunc.parametrize("qc_pair", [pytest.param(None, marks=pytest.mark.skip(
            reason="not a conformance run"))], ids=["none"])
        return
    params = _test_order(_cases(metafunc.config), st["run"].config.targets)
    metafunc.parametrize("qc_pair", params, ids=[f"{c.id}:{t}" for c, t in params])


@pytest.hookimpl(trylast=True)
def pytest_collection_modifyitems(session, config, items):
    st = _state(config)
    if st is None:
        return
    res = st.get("resume")
    if res is not None:   # --resume: pairs already recorded are not run again
        keep, drop = [], []
        for item in items:
            cs = getattr(item, "callspec", None)
            pair = cs.params.get("qc_pair") if cs is not None else None
            done = pair and res.done.get((pair[0].id, pair[1]), 0) >= st["resume_need"]
            (drop if done else keep).append(item)
        if drop:
            config.hook.pytest_deselected(items=drop)
            items[:] = keep
        st["resume_skipped"] = len(drop)


def pytest_collection_finish(session):
    """The plan: the (case, target) pairs of the tests that will run, in their order, once every
    plugin has selected and ordered them (-k, -m, --lf/--ff, --resume, ...); then the pipeline
    (suite/pipeline.py) may run them ahead of the tests."""
    st = _state(session.config)
    if st is None:
        return
    pairs = []
    for item in session.items:
        cs = getattr(item, "callspec", None)
        if cs is not None and cs.params.get("qc_pair"):
            pairs.append(cs.params["qc_pair"])
    run = st["run"]
    run.stats["collect_s"] = time.perf_counter() - st["t0"]   # generation and collection
    o = session.config.option
    # no test will run: collection failed (pytest stops before the first test unless
    # --continue-on-collection-errors), was interrupted (the exception is on its way out: this
    # hook runs in a finally), or pytest only collects, sets up or shows fixtures
    idle = (bool(session.testsfailed and not getattr(o, "continue_on_collection_errors", False))
            or sys.exc_info()[1] is not None or _runs_no_tests(o))
    if run.guessing:   # the pipeline started on the plan collection was expected to give
        run.stats["plan_guessed_right"] = float(run.settle_plan([] if idle else pairs))
        return
    run.plan(pairs)
    if not idle:
        run.start_pipeline()


def _distributed(o) -> bool:
    """pytest-xdist spreads this run's tests over worker processes (-n / --dist)."""
    return getattr(o, "dist", "no") != "no"


def _runs_no_tests(o) -> bool:
    """--collect-only, --setup-plan, --setup-only, --fixtures, --fixtures-per-test: pytest collects
    (and may set up) but calls no test; --markers, --help: pytest configures and ends. No target runs."""
    return any(getattr(o, k, False) for k in ("collectonly", "setupplan", "setuponly", "showfixtures",
                                              "show_fixtures_per_test", "markers", "help", "version"))


def pytest_xdist_auto_num_workers(config):
    """``-n auto`` with several --device values: one worker per device."""
    if getattr(config.option, "device", None):
        from targets.transport import parse_device_list
        try:
            return len(parse_device_list(config.option.device)) or None
        except QconformError:
            return None
    return None


def pytest_xdist_make_scheduler(config, log):
    """xdist's own scope scheduling (LoadScopeScheduling) so batches stay whole: with
    --device-dist=shard each (op, target) group runs on one device; with ``-n N`` on local
    targets (``--dist load``, xdist's default with -n, or ``loadgroup``) each op, all its
    targets, runs on one worker (its batches stay whole and the worker computes each golden
    once). Other --dist modes are left to xdist."""
    st = _state(config)
    if st is None:
        return None
    if config.option.device:
        if config.option.device_dist != "shard":
            return None
        scope = "{op}:{target}"
    elif getattr(config.option, "dist", "no") in ("load", "loadgroup"):
        scope = "{op}"
    else:
        return None
    from targets.remote import op_target_scheduler
    groups = {f"{c.id}:{t}": scope.format(op=c.op, target=t) for c in _cases(config)
              for t in st["run"].config.targets}
    return op_target_scheduler(config, log, groups)


@pytest.hookimpl(wrapper=True)
def pytest_cmdline_main(config):
    """Several --device values: one xdist worker per device (a wrapper: before xdist reads -n / --dist)."""
    if getattr(config.option, "device", None) and not hasattr(config, "workerinput"):
        from targets.remote import plan_workers
        try:
            plan_workers(config.option, config.pluginmanager.hasplugin("xdist"))
        except QconformError as e:
            raise pytest.UsageError(str(e)) from None
    return (yield)


# ----------------------------------------------------------------------------- verdicts

@pytest.hookimpl(tryfirst=True)
def pytest_runtest_protocol(item, nextitem):
    """``--test-protocol lean``: a conformance test's reports made by the plugin (suite/lean.py)."""
    st = _state(item.config)
    if st is None or not st.get("lean"):
        return None
    from suite.harness import lean
    if not lean.is_conformance_item(item):
        return None
    return lean.run_item(item, nextitem, st["run"])


@pytest.fixture
def qc_verdict(request, qc_pair):
    """The verdict of this (case, target) pair; target errors surface as pytest ERROR
    (``--test-protocol pytest``; the lean protocol makes the same reports, suite/lean.py)."""
    from suite.harness.lean import ERROR_STATUSES, properties, xfail_reason
    st = _state(request.config)
    case, target = qc_pair
    v = st["run"].verdict(case, target)
    # JUnit XML (--junitxml) carries these as <property> of each testcase (works under xdist)
    request.node.user_properties.extend(properties(v))
    why = xfail_reason(v)
    if v.status in ERROR_STATUSES and why is None:
        raise QcTargetError(v.message())
    # a waived failure or a known runtime bug (suite/core/findings.toml): shown as XFAIL, labelled, not
    # hidden. As a mark (the test then fails with pytrace=False): pytest.xfail() would have pytest
    # format a traceback for every such test
    if why is not None:
        request.applymarker(pytest.mark.xfail(reason=why, strict=False))
    return v


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    outcome = yield
    rep = outcome.get_result()
    if call.excinfo is not None and call.excinfo.errisinstance(QcTargetError):
        rep.longrepr = str(call.excinfo.value)


# ----------------------------------------------------------------------------- summary

def _current_rows(run, st, config):
    """This run's rows: those this process wrote (kept as it wrote them), or from results.jsonl
    when other processes wrote some (xdist workers, earlier sessions of a --resume)."""
    from reports.results import last_of_each, read_rows
    if run.kept_rows is not None:
        return last_of_each(run.kept_rows)
    return [r for r in read_rows(run.report_dir) if r.get("run_id") == run.run_id]


def pytest_sessionfinish(session, exitstatus):
    st = _state(session.config)
    if st is None:
        return
    run = st["run"]
    st["session_finished"] = True
    # the rest of the session makes many objects and frees few: no garbage collection passes
    # over everything alive (pytest's items, the cases), which cost a third of the report's
    # time; collection resumes at pytest_unconfigure
    if gc.isenabled() and not st.get("gc_off"):
        st["gc_off"] = True
        gc.disable()
    try:
        _sessionfinish(session, exitstatus, st, run)
    finally:
        run.reap()   # if _finish raised


_FROZEN = []   # gc.freeze() done by pytest_unconfigure (undone by the next run in this process)


def pytest_unconfigure(config):
    st = _state(config)
    if st is not None and not st.get("session_finished"):
        # no session end (a plugin's configure or sessionstart raised, Ctrl-C before collection,
        # --markers): the workers and a pipeline started at configure end here
        try:
            st["run"].close()
        finally:
            st["run"].reap()
    if st is not None and st.pop("gc_off", False):
        # what is alive now is frozen (gc.freeze): otherwise the next collection, and the
        # interpreter's final ones at exit, walk every object of the session again (0.3 s and
        # 0.7 s after a default run). A later run in this process unfreezes them (pytest_configure)
        gc.freeze()
        _FROZEN.append(True)
        gc.enable()


def _sessionfinish(session, exitstatus, st, run):
    run.close(wait_workers=False)   # the workers end while the report is written (Run.reap)
    if not st["controller"]:
        run.reap()
        wo = getattr(session.config, "workeroutput", None)
        if wo is not None:   # xdist: the controller adds it up (suite/timing.py)
            wo["qconform_stats"] = dict(run.stats)
        return
    try:
        _finish(session, exitstatus, st, run)
    finally:   # the run's timing, report artefacts and the workers' exit included (suite/timing.py)
        run.reap()
        from suite.harness import timing
        workers = st["worker_stats"]
        st["timing"] = timing.summarize(timing.merge((workers or [dict(run.stats)])
                                                     + ([{"report_s": run.stats["report_s"]}] if workers else [])),
                                        time.perf_counter() - st["t0"], max(1, len(workers)))
        timing.write(run.report_dir, st["timing"])


def _finish(session, exitstatus, st, run):
    rows = _current_rows(run, st, session.config)
    if st.get("resume") is not None:   # the exit status of the whole run, recorded rows included
        bad = any(r.get("status") in ("fail", "error", "crash", "timeout", "infra")
                  and not r.get("finding") for r in rows)   # a known finding (any status) is xfail
        if bad and session.exitstatus in (0, 5):
            session.exitstatus = exitstatus = 1
        elif not bad and rows and session.exitstatus == 5:
            session.exitstatus = exitstatus = 0
    from reports.runinfo import finish_run   # run.json, results.parquet, index.html, certificate
    t0 = time.perf_counter()
    summary, problem = None, None
    try:
        if rows:   # the table once, for summary.csv/md, index.html and the terminal
            from reports.summary import summarize
            summary = summarize(rows, run.report_cache)
    except Exception as e:   # the other artefacts are still written; the terminal summary says why
        problem = f"summary: {type(e).__name__}: {e}"
    try:
        st["artefacts"] = finish_run(run, rows, st["skipped"], int(exitstatus), st.get("started"),
                                     getattr(session.config.option, "numprocesses", None), summary=summary)
        if problem:
            st["artefacts"]["errors"].append(problem)
        st["summary"] = summary
    finally:
        run.stats["report_s"] += time.perf_counter() - t0


def pytest_terminal_summary(terminalreporter, exitstatus, config):
    st = _state(config)
    if st is None or not st["controller"] or st.get("summary") is None:
        return
    from reports.summary import to_text
    tr = terminalreporter
    tr.write_sep("=", "qconform: per-op x target summary")
    if st.get("resume") is not None:
        tr.write_line(f"resumed {st['resume'].dir}: {st.get('resume_skipped', 0)} result(s) were recorded "
                      f"already, the rest ran now")
    tr.write_line(to_text(st["summary"]))
    tr.write_line(f"results: {st['run'].report_dir / 'results.jsonl'}  summary: "
                  f"{st['run'].report_dir / 'summary.md'}")
    from reports.runinfo import terminal_lines
    for line, markup in terminal_lines(st.get("artefacts")):
        tr.write_line(line, **markup)
    if st.get("timing"):
        from suite.harness.timing import lines
        tr.write_sep("-", "qconform: where the time went (timing.json, docs/performance.md)")
        for line in lines(st["timing"]):
            tr.write_line(line)
