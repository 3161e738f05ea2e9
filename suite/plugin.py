"""The qconform pytest plugin: options, collection and the verdicts' pytest outcomes.

Thin hooks around one session object (as pytest-xdist's plugin registers its DSession): a
conformance run registers a :class:`QconformSession` at configure; it holds the run
(suite/harness/run.py) and does each step of docs/architecture.md in the hook pytest gives
for it. Every option is in the "qconform" group of ``pytest --help``.
"""

from __future__ import annotations

from suite.harness.stop import Stop

# SIGTERM/SIGINT are held from here, before the slow imports below: a signal while pytest starts
# a run interrupts it with its run.json and reports (QconformSession), never kills it unrecorded
_EARLY: Stop | None = Stop().install()

import atexit
import gc
import os
from collections import Counter
from dataclasses import replace
from pathlib import Path

import pytest

from reports import terminal_lines, write_reports
from reports.build import dismiss, parquet_child
from reports.diff import run_folder
from reports.junit import group_properties, group_repro
from reports.results import iter_rows
from reports.runinfo import now, run_info, write_run_info
from reports.summary import case_counts, compact_table, fit, terminal_verdict, to_text, totals, with_failures
from suite.cases.generate import generate, generator_ops
from suite.core.case import Case
from suite.core.errors import QconformError
from suite.core.verdict import Outcome, Status, Verdict
from suite.harness import items as grouped
from suite.harness import resume as resume_mod
from suite.harness.folder import DiskError, RunFolder, disk_error, new_run_id, write_whole
from suite.harness.identity import identity
from reports import attest
from reports.summary import certificate_failures
from suite.harness.goldens import GoldenStore
from suite.harness.groups import GROUP_TEST, GroupRows, after_their_cases, has_group_rule
from suite.harness.hunt import Hunter, HuntOptions, findings_on
from suite.harness.junit import add_suite_properties, suite_properties
from suite.harness.options import DEFAULT_REPORT_ROOT, split_list
from suite.harness.repro import TOLERANCE_COPY
from suite.harness.run import Run
from suite.harness.session import set_up
from suite.harness.shard import parse_shard, run_group, shard_info
from suite.models.harvest import feed_sets, harvest_model
from suite.models.onnx import parse_input_shapes
from suite.models.verdicts import model_lines, write_model_reports
from targets import DEFAULT_TARGETS
from targets.device_runner import isa_flags
from targets.remote import plan_workers
from targets.transport import parse_device_list

SUITE_DIR = Path(__file__).resolve().parent
SESSION = pytest.StashKey["QconformSession"]()
#: a conformance test's duration (JUnit time, --durations): its verdict's ``seconds``, what its case cost
#: the run, in place of its setup's wall time (the first test of a batch waits for the whole batch)
SECONDS = pytest.StashKey[float]()
try:   # optional (the dev extra's allure-pytest): labels and attachments when it reports the run
    import allure as _ALLURE
except ImportError:
    _ALLURE = None
_OWN_OPTIONS = ("--target", "--case-file", "--model", "--ops", "--cases-per-op", "--seed", "--report-dir",
                "--tolerance", "--scheme", "--certify", "--device", "--resume", "--waivers", "--hunt", "--shard")
_PROPERTIES = tuple((k, f"qconform.{k}") for k in ("status", "bit_exact", "max_abs_lsb", "mismatches",
                                                  "elements", "p50_us", "repro"))
_SELECTING = ("keyword", "markexpr", "deselect", "lf", "failedfirst", "stepwise", "stepwise_skip", "case_id")


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
                help="where run folders go: DIR/runs/<run id>/, DIR/latest -> the last complete, "
                     "unfiltered run (default reports)")
    g.addoption("--tolerance", default=None, metavar="FILE",
                help="tolerance policy file (default suite/core/tolerances.toml)")
    g.addoption("--scheme", default=None, metavar="NAME",
                help="requantization scheme of the golden (default tflite-ref-double)")
    g.addoption("--warmup", type=int, default=1, metavar="N", help="untimed invocations per case (default 1)")
    g.addoption("--repeats", type=int, default=5, metavar="N", help="timed invocations per case (default 5)")
    g.addoption("--batch-size", type=int, default=64, metavar="N",
                help="cases handed to a target at once (default 64)")
    g.addoption("--latency-cases", type=int, default=None, metavar="N",
                help="per (op, target), the first N cases run alone so their latency is their own "
                     "(the rest are batched; a merged batch has only a batch time) (default 3; 0 on an "
                     "emulated device, whose latencies are the emulator's)")
    g.addoption("--htp-performance-mode", default="burst", metavar="MODE",
                help="QNN HTP performance mode (default burst)")
    g.addoption("--cache-dir", default=None, metavar="DIR",
                help="compiled-model caches of the htp, openvino and tosa targets (default "
                     "$QCONFORM_CACHE_DIR, else ~/.cache/qconform/qnn, .../openvino and .../tosa; "
                     "tosa keeps its entries in DIR/tosa; 'off' disables them; see docs/performance.md)")
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
    g.addoption("--certify-key", default=None, metavar="FILE",
                help="sign the certificate with this key file (default: the per-user key of the golden store)")
    g.addoption("--waivers", action="append", default=[], metavar="FILE",
                help="waiver file (qconform-waivers/1) turning known failures into 'waived' (repeatable)")
    g.addoption("--isolation", default="process", choices=["process", "none"],
                help="'process' (default): native targets run in worker processes, so a crash or hang "
                     "is that case's crash/timeout verdict; 'none': everything in this process")
    g.addoption("--golden-cache", default=None, metavar="DIR",
                help="goldens kept between runs, keyed by case digest and the golden's own source, "
                     "authenticated (default $QCONFORM_GOLDEN_CACHE or ~/.cache/qconform/golden; 'off': none)")
    g.addoption("--ahead", type=int, default=4, metavar="N",
                help="batches a target's worker process is given before their tests ask, so it runs "
                     "while pytest reports (default 4; 0: each batch when its first test asks)")
    g.addoption("--case-timeout", type=float, default=60.0, metavar="SECONDS",   # (--timeout: pytest-timeout's)
                help="per-case time limit of an isolated target (default 60; scaled for batches)")
    g.addoption("--witness-cases", type=int, default=int(os.environ.get("QCONFORM_WITNESS_CASES", 200)), metavar="N",
                help="the first N failing cases also run on the local targets the run does not include, "
                     "as witnesses of the golden (default 200, or $QCONFORM_WITNESS_CASES; 0: none)")
    g.addoption("--model", default=None, metavar="MODEL",
                help="an int8 .tflite or quantized (QDQ or QOperator) .onnx model: its layers as cases on each target, the whole model on "
                     "each target that can run it, layers.csv and models.csv (see docs/models.md)")
    g.addoption("--model-inputs", default=None, metavar="NPZ|N",
                help="the --model's inputs (an .npz keyed by its input names; default: seeded data over their real "
                     "range), or N: the whole model on N seeded inputs per target, each output's error "
                     "distribution in outputs.csv")
    g.addoption("--model-input-shape", action="append", default=[], metavar="NAME=D0,D1,...",
                help="the shape of a --model .onnx input with symbolic dimensions, e.g. input=1,3,224,224 (repeatable)")
    g.addoption("--hunt", type=float, default=None, metavar="SECONDS",
                help="after the cases, hunt each (op, target) for SECONDS (qconform hunt, docs/hunt.md): "
                     "test <OP>:<target>::test_hunt fails with the new distinct failures; cases in <run>/hunt/")
    g.addoption("--baseline", default=None, metavar="RUN",
                help="a run folder (or a report directory: its latest run) to compare with: the report "
                     "opens with what is new since it, then what still fails (see docs/reports.md)")
    g.addoption("--shard", default=None, metavar="K/N",
                help="run the K-th of N shares of the (op, target) groups (the same split on every host, balanced "
                     "by cases); `qconform merge` makes one run of the N shards (see docs/devices.md)")
    g.addoption("--item", default="group", choices=list(grouped.ITEM_MODES), dest="qc_item",
                help="'group' (default): one pytest item per (op, target), each case still judged, recorded and "
                     "reported (terminal, JUnit, --lf) on its own; 'case': one per (case, target), for pytest's "
                     "per-case hooks and -k on a case id (see docs/performance.md)")
    g.addoption("--case-id", action="append", default=[], metavar="ID[,ID]",
                help="only these cases (repeatable or comma list; -k selects ops and targets, or cases with --item=case)")
    g.addoption("--run-group", default=None, metavar="ID",
                help="the id of the run a shard is part of (default: $QCONFORM_RUN_GROUP, else the CI's run id: "
                     "GITHUB_RUN_ID, CI_PIPELINE_ID, ...): `qconform merge` refuses shards of different groups")
    g.addoption("--resume", default=None, metavar="RUN_DIR",
                help="continue an interrupted run: skip the (case, target) pairs RUN_DIR/results.jsonl "
                     "records, append the rest, rebuild the summaries (see docs/reliability.md)")


@pytest.hookimpl(tryfirst=True)
def pytest_load_initial_conftests(early_config, parser, args):
    """``pytest --target=X`` with no test path runs the conformance tests from any folder."""
    if any(a == "--timeout" or a.startswith("--timeout=") for a in args) and \
            not early_config.pluginmanager.hasplugin("timeout"):   # the option's old name
        raise pytest.UsageError("qconform: the per-case time limit is --case-timeout (--timeout is pytest-timeout's)")
    if getattr(early_config.known_args_namespace, "file_or_dir", None):
        return
    if any(a == o or a.startswith(o + "=") for a in args for o in _OWN_OPTIONS):
        args.append(str(SUITE_DIR / "test_conformance.py"))


@pytest.hookimpl(wrapper=True)
def pytest_cmdline_main(config):
    """Before pytest-xdist reads -n / --dist: several --device values get one worker each; with
    ``-n`` the (op, target) groups are xdist's scopes (``--dist loadscope``), so batches stay whole."""
    o = config.option
    if not hasattr(config, "workerinput"):
        try:
            if o.device:
                plan_workers(o, config.pluginmanager.hasplugin("xdist"))
            if getattr(o, "numprocesses", None) and getattr(o, "dist", "no") == "no":
                o.dist = "loadscope"
            if getattr(o, "dist", "no") not in ("no", "each", "loadscope", "loadfile") and _is_conformance_run(config):
                raise QconformError(f"--dist {o.dist} would split an (op, target) group over workers",
                                    field="--dist", rule="use --dist loadscope (the default with -n) or each")
        except QconformError as e:
            raise pytest.UsageError(str(e)) from None
    return (yield)


@pytest.hookimpl(optionalhook=True)   # (pytest-xdist's hook: a run without it, -p no:xdist, still starts)
def pytest_xdist_auto_num_workers(config):
    """``-n auto`` with several --device values: one worker per device."""
    try:
        return len(parse_device_list(config.option.device)) or None
    except (QconformError, AttributeError):
        return None


def pytest_configure(config):
    config.addinivalue_line("markers", "qconform: a conformance case of the qconform suite")
    global _EARLY
    early, _EARLY = _EARLY, None
    controller = getattr(config, "workerinput", None) is None
    if not _is_conformance_run(config) or not controller:
        if early is not None:
            early.release()
        if not _is_conformance_run(config):
            return
    # SIGTERM/SIGINT from here on end the run as interrupted, however many come (suite/harness/stop.py)
    stop = (early or Stop().install()) if controller else None
    try:
        session = QconformSession(config, stop)
    except BaseException as e:
        if stop is not None:
            stop.restore()
        if isinstance(e, QconformError):
            raise pytest.UsageError(str(e)) from None
        raise
    config.stash[SESSION] = session
    config.pluginmanager.register(session, "qconform-session")


def _is_conformance_run(config) -> bool:
    """Whether this pytest invocation collects the conformance tests (suite/)."""
    o = config.option
    if (o.target or o.case_file or o.model or o.ops or o.cases_per_op is not None or o.device or o.resume or o.hunt
            or o.shard):
        return True
    for a in config.args:
        p = Path(str(a).split("::")[0]).resolve()
        if p == SUITE_DIR or SUITE_DIR in p.parents or p in SUITE_DIR.parents:
            return True
    return False


class QcTargetError(Exception):
    """A target's error/crash/timeout/infra verdict: reported by pytest as ERROR. pytest-rerunfailures
    may run it again (a crash, a hang, a lost device can pass the next time)."""


class QcVerdictFailed(pytest.fail.Exception):
    """A numeric verdict (a case's mismatch, a group's bias or declared scheme): ``pytest.fail``'s
    outcome, deterministic, so never run again by pytest-rerunfailures (:func:`_no_verdict_reruns`).
    Shown as pytest shows ``pytest.fail`` ("Failed: ..."), as pytest names its own outcomes."""

    __module__ = "builtins"


QcVerdictFailed.__name__ = QcVerdictFailed.__qualname__ = "Failed"


def verdict_failed(message: str):
    raise QcVerdictFailed(message, pytrace=False)


def _allure():
    """allure-pytest's public ``allure`` module (None without it)."""
    return _ALLURE


def _allure_on(config) -> bool:
    """Whether allure-pytest reports this run (--alluredir)."""
    return bool(getattr(config.option, "allure_report_dir", None)) and _ALLURE is not None


def _allure_case(config, case, row: dict) -> None:
    """Allure's labels of a case (op, target, variant, finding) and its parameter as the case id (not
    the repr of its arrays)."""
    if not _allure_on(config):
        return
    allure = _allure()
    allure.dynamic.parameter("qc_case", case.id)
    for name, value in (("op", row.get("op")), ("target", row.get("target")), ("variant", case.variant),
                        ("finding", row.get("finding")), ("device", row.get("device"))):
        if value:
            allure.dynamic.label(name, str(value))


def attach_evidence(config, row: dict) -> None:
    """For Allure, from the test's body (a fixture's attachments are the fixture's): a bad verdict's
    case with got and want (its failure file) and its reproduction command."""
    if not _allure_on(config):
        return
    allure = _allure()
    ff = row.get("failure_file")
    if ff and Path(ff).is_file():   # (the file this run wrote: the case, got and want)
        allure.attach.file(ff, name="case, got and want", attachment_type=allure.attachment_type.JSON)
    if row.get("repro"):
        allure.attach(str(row["repro"]), name="reproduce", attachment_type=allure.attachment_type.TEXT)


def _allure_group(config, op: str, target: str, failures: list[dict], command: str) -> None:
    if not _allure_on(config):
        return
    allure = _allure()
    allure.dynamic.label("op", op)
    allure.dynamic.label("target", target)
    for f in failures:
        if f.get("finding"):
            allure.dynamic.label("finding", str(f["finding"]))
    if failures:
        allure.attach("\n".join(f["text"] for f in failures), name="group verdict",
                      attachment_type=allure.attachment_type.TEXT)
    allure.attach(command, name="reproduce", attachment_type=allure.attachment_type.TEXT)


def _no_verdict_reruns(config, items) -> None:
    """With pytest-rerunfailures' --reruns (or its ini ``reruns``), each conformance test gets its
    public ``flaky`` marker with the same reruns and :class:`QcVerdictFailed` added to
    ``rerun_except`` (with the user's --rerun-except patterns): a numeric fail or bias is not run
    again, a crash, timeout or infra error may be."""
    if not config.pluginmanager.hasplugin("rerunfailures"):
        return
    reruns = config.getoption("reruns", None)
    if reruns is None:
        try:
            reruns = int(config.getini("reruns"))
        except (TypeError, ValueError, KeyError):
            reruns = None
    if not reruns:
        return
    if getattr(config.option, "reruns_mode", None) == "append":
        reruns = 0   # (the marker's count is added to the global one)
    except_ = [QcVerdictFailed, *(getattr(config.option, "rerun_except", None) or config.getini("rerun_except") or [])]
    for item in items:
        if _pair(item) is not None or getattr(item, "name", "") == GROUP_TEST:
            if item.get_closest_marker("flaky") is None:
                item.add_marker(pytest.mark.flaky(reruns=reruns, rerun_except=except_))


@pytest.fixture
def qc_verdict(request, qc_case) -> Verdict:
    """The verdict of this test's (case, target); a target error is this test's ERROR."""
    session = request.config.stash[SESSION]
    try:
        v = session.run.verdict(qc_case, request.cls.target)
    except DiskError as e:   # the run folder cannot be written: the run ends here, saying where
        pytest.exit(f"qconform: {e}", returncode=pytest.ExitCode.INTERNAL_ERROR)
    request.node.user_properties.extend(   # JUnit XML <property> of each testcase
        (name, v.row[k]) for k, name in _PROPERTIES if v.row.get(k) is not None)
    if v.seconds is not None:
        request.node.stash[SECONDS] = v.seconds
    if (v.op, v.target) in session.judged_whole:   # its (op, target)'s test_group judges the group from them
        session.group_rows.add(v.row)
    _allure_case(request.config, qc_case, v.row)
    if v.outcome is Outcome.ERROR:
        raise QcTargetError(v.message)
    return v


class QconformSession:
    """One conformance run as pytest sees it: the run, its folder and its cases."""

    def __init__(self, config, stop: Stop | None = None):
        self.config, self.stop = config, stop
        self._kernels: dict[str, dict] = {}   # target -> its identity, for the certificate
        o = config.option
        self.worker_input = getattr(config, "workerinput", None)
        self.controller = self.worker_input is None
        self.distributed = self.controller and getattr(o, "dist", "no") != "no"
        s = set_up(o, argv=[str(a) for a in config.invocation_params.args], worker_input=self.worker_input,
                   harvest=_harvest(o) if o.model else None, stop=stop,
                   runs=not self.distributed and not _runs_no_tests(o))
        try:
            self._start(config, s)
        except BaseException:   # (the workers the set-up started; Run.close ends them too)
            for ex in s.workers.values():
                ex.close()
            raise

    def _start(self, config, s) -> None:
        """The session from the run's set-up ``s`` (the rest of __init__, which ends the workers
        the set-up started if this fails)."""
        o = config.option
        self.opts, self.targets, self.selectors, self.unavailable = s.opts, s.targets, s.selectors, s.unavailable
        # default targets whose workers have not said yet whether they can run here: waited for
        # when the tests are made (_settle), so the cases are made while the workers import
        self.pending = list(s.pending)
        self.cases, self.graph, self.model_feeds = s.cases, s.graph, s.model_feeds
        self._dropped_digests: list = []   # [case id, sha256] of the cases of ops done (_drop_cases)
        self.policy, self.tolerance_digest, self.reruns = s.policy, s.tolerance_digest, s.reruns
        self.resumed, self.device_text = s.resumed, s.device_text
        self.signer = s.signer   # --certify's key, read (or made) before anything runs
        # ---- --item=group (suite/harness/items.py): one item per (op, target); --case-id
        self.item_mode, self.case_ids = o.qc_item, set(split_list(o.case_id)) or None
        self.failed_before = grouped.failed_pairs(config) if self.item_mode == "group" else set()
        # cases with items of their own under --item=group: those --lf / --ff rerun
        self.own = self.failed_before if getattr(o, "lf", False) or getattr(o, "failedfirst", False) else set()
        self.judged_whole: set = set()   # (op, target)s with a test_group: their rows are kept for it
        policy, waivers, policy_text = s.policy, s.waivers, s.policy_text
        self.waivers = waivers
        # resolved before this run's folder exists: a `latest` given as the baseline must not become this run
        self.baseline = run_folder(o.baseline, "--baseline") if o.baseline and self.controller else None
        if self.resumed is not None and not o.shard:   # ---- --shard (a resumed shard stays that shard)
            o.shard = (self.resumed.options.get("shard") or {}).get("text")
        self.shard, self.shard_groups, self.shard_doc = parse_shard(o.shard), None, None
        self.run_group = run_group(o.run_group or ((self.resumed.options.get("run_group") if self.resumed else None)))
        if self.controller:
            self.run_id = self.resumed.run_id if self.resumed else new_run_id()
            self.folder = (RunFolder.resume(self.resumed.dir) if self.resumed
                           else RunFolder.create(o.report_dir or DEFAULT_REPORT_ROOT, self.run_id))
            self.started = (self.resumed.started if self.resumed else None) or now()
            if self.resumed is None:
                write_whole(self.folder.path / TOLERANCE_COPY, policy_text)
        else:
            self.run_id = self.worker_input["qconform_run_id"]
            self.folder = RunFolder.join(self.worker_input["qconform_dir"])
        self.run: Run | None = None
        self.group_rows = GroupRows()   # ---- group verdicts as tests (suite/harness/groups.py)
        if self.resumed is not None:
            self.group_rows.preload(self.folder.path, self.run_id, self.resumed.offset)
        # a --model run in one process: its targets one after another (Run.sequential)
        self.sequential = bool(o.model) and not self.distributed and self.worker_input is None
        try:
            if not self.distributed and not _runs_no_tests(o):
                store = GoldenStore(Path(self.opts.golden_cache)) if self.opts.golden_cache else None
                self.run = Run(self.opts, self.folder, self.targets, self.run_id, store,
                               worker=(self.worker_input or {}).get("workerid"), policy=policy, waivers=waivers,
                               tolerance=(str(self.folder.path / TOLERANCE_COPY), self.tolerance_digest),
                               sequential=self.sequential, workers=s.workers)
            if self.shard is not None:   # (its groups: the targets that can run here)
                self.shard_groups, self.shard_doc = shard_info(self.shard, self._group_sizes())
            if self.controller:
                self._write_run_info()
        except BaseException:   # no session: what was started ends now
            if self.run is not None:
                self.run.close()
            self.folder.close()
            raise
        self.interrupted = False
        self.report = None
        self.hunters: dict = {}   # target -> its Hunter (--hunt), one worker process each
        self.planned: int | None = None   # rows this run is to write (its pairs x devices), once collected
        self._tests_done, self._frozen = 0, False
        self._parquet = None   # results.parquet's writer, started when the tests are planned (reports.build.parquet_child)

    def repro_doc(self) -> dict:
        """What a group's reproduction command is made of (reports.junit.group_repro): the run's options."""
        return {"options": {**self.opts.as_dict(), "tolerance_copy": str(self.folder.path / TOLERANCE_COPY),
                            **self._input_options()}}

    def _input_options(self) -> dict:
        """The options that say what ran and where, besides RunOptions (run.json, repro commands)."""
        o = self.config.option
        return {"model": o.model, "model_inputs": o.model_inputs, "model_input_shape": list(o.model_input_shape or []),
                "devices": list(o.device or []),
                "selectors": {n: self.selectors.get(n, n) for n in self.targets}}   # (name -> as --target gave it)

    def versions(self, name: str) -> dict[str, str]:
        if self.run is not None:
            return self.run.versions(name)
        try:
            return dict(self.targets[name].versions())
        except Exception as e:
            return {"error": f"{type(e).__name__}: {e}"}

    def _settle(self) -> None:
        """Wait for the pending default targets' workers to say whether they can run here: one that
        cannot leaves the run as if the set-up had found it so (run.json's ``unavailable``, the
        header's lines)."""
        if not self.pending:
            return
        pending, self.pending = self.pending, []
        for n in pending:
            ok, why = self.run.availability(n)
            if not ok:
                self.unavailable[n] = why
                self.run.drop(n)
                self.targets.pop(n, None)
                self.selectors.pop(n, None)
        order = {n: i for i, n in enumerate(DEFAULT_TARGETS)}   # (as the set-up lists them)
        self.unavailable = dict(sorted(self.unavailable.items(), key=lambda kv: order.get(kv[0], len(order))))
        if len(self.targets) < len(self.opts.targets):
            self.opts = self.run.opts = replace(self.opts, targets=tuple(self.selectors[n] for n in self.targets))
        if self.controller and getattr(self, "_doc", None) is not None:   # run.json says it from now on
            self._doc["options"]["targets"] = list(self.opts.as_dict()["targets"])
            self._doc["targets"] = self._targets_doc()
            self._doc["unavailable_targets"] = dict(self.unavailable)

    def _known_versions(self, name: str) -> dict[str, str] | None:
        """The versions if known without waiting for a worker (None: not said yet)."""
        return self.run.known_versions(name) if self.run is not None else self.versions(name)

    def _kernel(self, name: str) -> dict:
        """What the target is, by digest (suite/harness/identity.py): taken once, at the start."""
        if name not in self._kernels:
            self._kernels[name] = identity(self.targets[name], self.selectors.get(name, name))
        return self._kernels[name]

    def _targets_doc(self) -> dict:
        """run.json's targets: their versions as far as known without waiting (null: its worker
        has not said yet; the document is written again at collection and at the end)."""
        return {n: {"description": getattr(t, "description", ""), "expected_scheme": getattr(t, "expected_scheme", None),
                    "versions": self._known_versions(n),
                    "devices": t.device_facts() if hasattr(t, "device_facts") else None,
                    **({"kernel": self._kernel(n)} if self.opts.certify else {})}
                for n, t in self.targets.items()}

    def _write_run_info(self, **end) -> dict:
        """run.json: at the start (``finished`` null, so an interrupted run still says what it
        was), and at the end with ``end`` (finished, exit status, interrupted) and the cost."""
        targets = self._targets_doc()
        if not end:
            options = {**self.opts.as_dict(), "report_dir": str(self.folder.path),
                       "workers": getattr(self.config.option, "numprocesses", None), "filtered": self.filtered,
                       "tolerance_digest": self.tolerance_digest,
                       "tolerance_copy": str(self.folder.path / TOLERANCE_COPY),
                       **self._input_options(), "shard": self.shard_doc, "run_group": self.run_group,
                       "baseline": str(self.baseline) if self.baseline else None}   # (#22: the run compared with)
            self._doc = run_info(run_id=self.run_id, options=options, targets=targets, unavailable=self.unavailable,
                                 started=self.started, command=[str(a) for a in self.config.invocation_params.args],
                                 isa=isa_flags())
            doc = self._doc
        else:   # (git and host facts as at the start)
            cost = {k: round(float(v), 3) for k, v in (self.run.stats if self.run is not None else {}).items()}
            doc = {**self._doc, **end, "targets": targets, "cost": cost}
        write_run_info(self.folder.path, doc)
        return doc

    @property
    def filtered(self) -> bool:
        """A subset of the run's tests was selected (-k, -m, --lf, test ids, --case-file, ...)."""
        o = self.config.option
        return (bool(self.opts.case_files) or bool(o.model) or any(getattr(o, k, None) for k in _SELECTING)
                or any("::" in str(a) for a in self.config.args))

    # ---- hooks
    def pytest_report_header(self, config):
        lines = [f"qconform: run {self.folder.path} seed={self.opts.seed} cases-per-op={self.opts.cases_per_op} "
                 f"scheme={self.opts.scheme}"]
        # targets whose workers have not said yet whether they can run here: their lines once the
        # tests are made (pytest_report_collectionfinish), not waited for now
        self._targets_later = bool(self.pending)
        return lines + ([] if self._targets_later else self._target_lines())

    def pytest_report_collectionfinish(self, config, start_path, items):
        if getattr(self, "_targets_later", False):   # (the header was shown: not with -q)
            return self._target_lines()
        return []

    def _target_lines(self) -> list[str]:
        self._settle()
        lines = [f"  target {n}: " + ", ".join(f"{k} {v}" for k, v in self.versions(n).items()) for n in self.targets]
        lines += [f"  target {n}: unavailable ({why})" for n, why in self.unavailable.items()]
        by_selector = {sel: n for n, sel in self.selectors.items()}
        for path, j in self.reruns:   # another runtime release may fix (or break) it: said, not refused
            n = by_selector.get(j.get("target"))
            if n is not None and j.get("versions") != self.versions(n):
                lines.append(f"  note: {path} was judged with {j.get('versions')}; this run has "
                             f"{self.versions(n)}")
        if not self.targets:
            lines.append("  no target is available: see `qconform targets`")
        if self.shard_doc is not None:
            d = self.shard_doc
            lines.append(f"  shard {d['text']}: {len(d['groups'])} of {d['groups_total']} (op, target) groups, "
                         f"{d['cases']} of {d['cases_total']} cases")
        return lines

    def _cases(self) -> list[Case]:
        if self.cases is None:
            known = generator_ops()
            self.cases = generate([op for op in (self.opts.ops or known) if op in known],
                                  self.opts.cases_per_op, self.opts.seed)
        return self.cases

    @pytest.hookimpl(tryfirst=True)
    def pytest_pycollect_makeitem(self, collector, name, obj):
        """The suite's test class becomes one class per (op, target): pytest-xdist's loadscope
        then keeps each group, hence each batch, on one worker."""
        if not getattr(obj, "__qconform__", False) or not isinstance(obj, type):
            return None
        nodes = []
        self._cases()   # (made while the workers import their runtimes)
        self._settle()
        own = {(c.op, t) for c in self._cases() for t in self.targets if (c.id, t) in self.own} if self.own else set()
        for op in dict.fromkeys(c.op for c in self._cases()):
            for t in self.targets:
                if self.shard_groups is not None and (op, t) not in self.shard_groups:
                    continue   # another shard's group
                name = f"{op}:{t}"   # the class is looked up on the module by its node's name
                extra = {"test_hunt": _test_hunt} if self.config.option.hunt else {}
                if self._has_group_rule(op, t):
                    extra[GROUP_TEST] = _test_group
                    self.judged_whole.add((op, t))
                if self.item_mode == "case":
                    extra[grouped.GROUP_ITEM] = None
                elif (op, t) not in own:
                    extra["test_case"] = None   # (no case of it has an item of its own)
                setattr(collector.obj, name, type(name, (obj,), {"op": op, "target": t, "__qconform__": False, **extra}))
                nodes.append(pytest.Class.from_parent(collector, name=name))
        return nodes

    def _group_sizes(self) -> dict[tuple[str, str], int]:
        """(op, target) -> its cases: what --shard splits."""
        self._settle()
        per_op: dict[str, int] = {}
        for c in self._cases():
            per_op[c.op] = per_op.get(c.op, 0) + 1
        return {(op, t): n for op, n in per_op.items() for t in self.targets}

    def _has_group_rule(self, op: str, target: str) -> bool:
        dtypes = {c.outputs[0].dtype for c in self._cases() if c.op == op and c.outputs}
        return has_group_rule(op, target, dtypes, self.policy, getattr(self.targets[target], "expected_scheme", None))

    def judge_group(self, op: str, target: str) -> tuple[int, int, list[str], list[dict]]:
        """(cases judged, cases of the op, the bad verdicts of those this session had not run, failures)
        of (op, target) as a whole. The group's cases not run in this session (-k, --lf, --deselect)
        are run now: a subset that shows no bias would show nothing."""
        cases = [c for c in self._cases() if c.op == op]
        done = self.group_rows.case_ids(op, target)
        missing = [] if self.group_rows.judged(op, target) else [c for c in cases if c.id not in done]
        bad = []
        if missing and self.run is not None:
            self.run.plan([(c, target) for c in missing])
            for c in missing:
                v = self.run.verdict(c, target)
                self.group_rows.add(v.row)
                if v.status.is_bad and not v.known:
                    bad.append(f"{c.id}: {v.status.value}")
        judged, failures = self.group_rows.judge(op, target, self.policy, self.versions(target),
                                                 getattr(self.targets[target], "expected_scheme", None))
        return judged, len(cases), bad, failures

    def pytest_generate_tests(self, metafunc):
        if "qc_case" not in metafunc.fixturenames:
            return
        op, target = metafunc.cls.op, metafunc.cls.target
        cases = [c for c in self._cases() if c.op == op and (self.item_mode == "case" or (c.id, target) in self.own)]
        metafunc.parametrize("qc_case", cases, ids=[f"{c.id}:{target}" for c in cases])

    @pytest.hookimpl(trylast=True)
    def pytest_collection_modifyitems(self, session, config, items):
        _ops_together(items)
        if self.sequential:   # each target's tests together, in the targets' order (then by op)
            rank = {n: i for i, n in enumerate(self.targets)}
            items.sort(key=lambda it: rank.get(getattr(it.cls, "target", None), len(rank)))
        after_their_cases(items)
        _no_verdict_reruns(config, items)
        items.sort(key=lambda item: item.name == "test_hunt")   # the hunts after every case (a stable sort)
        done = resume_mod.recorded(self.folder.path, self.run_id, self.resumed.offset) if self.resumed else {}
        need = self._rows_per_pair()
        by_op: dict[str, list[Case]] = {}
        if self.item_mode == "group":
            for c in self._cases():
                by_op.setdefault(c.op, []).append(c)
        keep, drop, skipped = [], [], 0
        chosen_ops = {c.op for c in self._cases() if c.id in self.case_ids} if self.case_ids is not None else set()
        for item in items:
            pair = _pair(item)
            if item.name == grouped.GROUP_ITEM:   # its cases: the op's, less those selected out or recorded
                t = item.cls.target
                cases = [c for c in by_op.get(item.cls.op, []) if (c.id, t) not in self.own
                         and (self.case_ids is None or c.id in self.case_ids)]
                n = len(cases)
                cases = [c for c in cases if done.get((c.id, t), 0) < need]
                skipped += n - len(cases)
                item.stash[grouped.CASES] = cases
                (keep if cases else drop).append(item)
            elif pair and self.case_ids is not None and pair[0].id not in self.case_ids:
                drop.append(item)
            elif not pair and self.case_ids is not None and getattr(item.cls, "op", None) not in chosen_ops:
                drop.append(item)   # (an op's test_group / test_hunt: --case-id selected none of its cases)
            elif pair and done.get((pair[0].id, pair[1]), 0) >= need:
                drop.append(item)
                skipped += 1
            else:
                keep.append(item)
        if drop:
            config.hook.pytest_deselected(items=drop)
            items[:] = keep
        if self.resumed is not None:
            self.resumed.skipped = skipped

    @pytest.hookimpl(tryfirst=True)
    def pytest_collection(self, session):
        self._pytest_session = session   # (xdist's controller counts the cases its workers report)
        if self.stop is not None:   # a signal during the set-up stops the run here, as interrupted
            self.stop.raise_pending()

    def pytest_collection_finish(self, session):
        tr = self.config.pluginmanager.get_plugin("terminalreporter")
        if self.item_mode == "group" and self.config.option.keyword and not session.items and tr is not None:
            tr.write_line("qconform: -k selected no (op, target): with one item per (op, target) (--item=group, the "
                          "default) -k selects ops and targets; select cases with --case-id ID, or --item=case",
                          yellow=True)
        self._settle()
        pairs = [p for item in session.items for p in _pairs(item)]
        self._items_left = Counter(getattr(getattr(item, "cls", None), "op", None) for item in session.items)
        if self.controller and not self.distributed and self.run is not None:   # what a complete run writes: run.json says it from now
            self.planned = (len(pairs) + (self.resumed.skipped if self.resumed else 0)) * self._rows_per_pair()
            self._doc["planned"] = self.planned
            self._doc["targets"] = self._targets_doc()   # (the versions the workers have said by now)
            write_run_info(self.folder.path, self._doc)
        if self.run is not None:   # (an xdist worker runs only the groups it is given: each when asked)
            self.run.plan(pairs, lazy=not self.controller or self.sequential)
        if self.controller and self._parquet is None:   # results.parquet's writer imports its modules now, not at the end
            self._parquet = parquet_child(self.folder.path, when_told=True)
        _settle_gc()
        self._frozen = True

    def pytest_runtest_logfinish(self, nodeid, location):
        self._tests_done += 1
        if self._tests_done % GC_EVERY == 0:
            _settle_gc()

    @pytest.hookimpl(optionalhook=True)
    def pytest_xdist_node_collection_finished(self, node, ids):
        """pytest-xdist's controller (which collects nothing itself): the run's planned results,
        from what a worker collected (every worker collects every test)."""
        if self.resumed is None and self.distributed:   # (resumed: each worker deselects what it finds recorded)
            planned = sum("::test_case[" in i and self._selected(i) for i in ids)
            planned += sum(self._group_size(i) for i in ids if i.endswith("::" + grouped.GROUP_ITEM))
            planned *= self._rows_per_pair()
            if planned != self.planned:
                self.planned = self._doc["planned"] = planned
                write_run_info(self.folder.path, self._doc)

    def _rows_per_pair(self) -> int:
        o = self.config.option
        return len(parse_device_list(o.device)) if o.device and o.device_dist == "each" else 1

    def _selected(self, nodeid: str) -> bool:
        return self.case_ids is None or nodeid.rsplit("[", 1)[-1].rsplit(":", 1)[0] in self.case_ids

    def _group_size(self, nodeid: str) -> int:
        """The cases a group item of ``nodeid`` runs (xdist's controller: as each worker selects them)."""
        cls = grouped.class_of(nodeid) or ""
        op, _, t = cls.rpartition(":")
        if self.own or self.case_ids is not None:
            return sum(1 for c in self._cases() if c.op == op and (c.id, t) not in self.own
                       and (self.case_ids is None or c.id in self.case_ids))
        if not hasattr(self, "_per_op"):
            self._per_op = Counter(c.op for c in self._cases())
        return self._per_op[op]

    def run_cases(self, item) -> None:
        """A group item (--item=group): its cases, each judged, recorded and reported on its own."""
        t = item.cls.target
        reports = grouped.CaseReports(item, t, runxfail=self.config.option.runxfail, on_worker=not self.controller,
                                      failed=self.failed_before, properties=_PROPERTIES)
        cases = item.stash.get(grouped.CASES, [])
        item.stash[grouped.CASES] = []   # (nothing of a case stays once judged)
        whole = (item.cls.op, t) in self.judged_whole
        try:
            grouped.run_group(item, self.run, t, cases, self.group_rows.add if whole else _drop, reports)
        except DiskError as e:   # the run folder cannot be written: the run ends here, saying where
            pytest.exit(f"qconform: {e}", returncode=pytest.ExitCode.INTERNAL_ERROR)

    @pytest.hookimpl(wrapper=True)
    def pytest_runtest_protocol(self, item, nextitem):
        res = yield
        op = getattr(getattr(item, "cls", None), "op", None)
        left = getattr(self, "_items_left", None)
        if left is not None and op is not None and op in left:   # its op's last test: the op's witness data are done with
            left[op] -= 1
            if left[op] <= 0 and self.run is not None:
                self.run.forget(op)
                self._drop_cases(op)
        return res

    def _drop_cases(self, op: str) -> None:
        """``op``'s tests have all run: its cases go (memory flat in the cases, issue #32); what
        the certificate needs of them, their ids and digests, stays."""
        if not self.cases:
            return
        keep, gone = [], []
        for c in self.cases:
            (gone if c.op == op else keep).append(c)
        if self.opts.certify and self.graph is None:
            self._dropped_digests += [[c.id, c.sha256()] for c in gone]
        self.cases = keep

    @pytest.hookimpl(wrapper=True)
    def pytest_report_from_serializable(self, config, data):
        """A case's report from a pytest-xdist worker gets its own node id back (suite/harness/items.py)."""
        rep = yield
        nodeid = getattr(rep, grouped.NODEID_ATTR, None)
        if isinstance(nodeid, str):
            rep.nodeid = nodeid
            grouped.count_case(rep, getattr(self, "_pytest_session", None))
        return rep

    @pytest.hookimpl(wrapper=True)
    def pytest_runtest_makereport(self, item, call):
        rep = yield
        if call.when == "call" and item.name == grouped.GROUP_ITEM:   # (outside capture from here)
            grouped.log_reports(item)
        if call.excinfo is not None and call.excinfo.errisinstance(QcTargetError):
            rep.longrepr = str(call.excinfo.value)   # the verdict's message, not a traceback
        if call.when == "setup" and SECONDS in item.stash:
            rep.duration = item.stash[SECONDS]
        return rep

    @pytest.hookimpl(optionalhook=True)
    def pytest_configure_node(self, node):
        """A pytest-xdist worker writes its rows into this run's folder; worker gw<k> drives device k."""
        node.workerinput["qconform_run_id"] = self.run_id
        node.workerinput["qconform_dir"] = str(self.folder.path)
        if self.resumed is not None:
            node.workerinput["qconform_resume_offset"] = self.resumed.offset
        gw = str(getattr(node.gateway, "id", ""))
        if gw[2:].isdigit():
            node.workerinput["qconform_device"] = int(gw[2:])

    def hunt(self, op: str, target: str):
        """qconform hunt of (op, target) for --hunt seconds, judged as this run judges (scheme, its
        copy of the tolerance policy, --case-timeout, --seed); its cases go to <run folder>/hunt/."""
        if target not in self.hunters:
            o = self.opts
            opts = HuntOptions(seed=o.seed, budget=self.config.option.hunt, timeout=o.timeout, scheme=o.scheme,
                               tolerance_file=str(self.folder.path / TOLERANCE_COPY),
                               tolerance_digest=self.tolerance_digest, findings=findings_on(), isolation=o.isolation)
            self.hunters[target] = Hunter(target, self.targets[target], opts, selector=self.selectors[target])
        res = self.hunters[target].hunt(op)
        self.hunters[target].write(res, self.folder.path / "hunt")
        return res

    def _close_hunters(self) -> None:
        for h in self.hunters.values():
            h.close()
        self.hunters = {}

    def pytest_sessionfinish(self, session, exitstatus):
        if self.stop is not None:   # from here a signal is counted, never raised: the reports are written whole
            self.stop.armed = False
        self._close_hunters()
        if self.run is not None:
            self.run.close()
        if not self.controller:
            return
        try:
            if self.resumed is not None:   # the exit status of the whole run, recorded rows included
                bad = any(Status(r["status"]).is_bad and not r.get("finding")
                          for r in iter_rows(self.folder.path) if r.get("run_id") == self.run_id)
                if bad and session.exitstatus in (0, 5):
                    session.exitstatus = 1
                elif not bad and session.exitstatus == 5:
                    session.exitstatus = 0
            if self.graph is not None:   # layers.csv, models.csv: before the page, which shows them
                self.model_lines = model_lines(write_model_reports(
                    self.folder.path, self.graph, self.model_feeds, self.targets, self.policy, self.opts.scheme,
                    {n: self.versions(n) for n in self.targets}, timeout=10 * self.opts.timeout))
                if session.exitstatus == 0 and any(bad for _, bad in self.model_lines):   # (#24) like a group's
                    session.exitstatus = 1
            while True:   # a signal while the reports are written: written again, as interrupted
                signals = self.stop.count if self.stop is not None else 0
                self.interrupted = exitstatus == pytest.ExitCode.INTERRUPTED or signals > 0
                if self.interrupted:
                    session.exitstatus = pytest.ExitCode.INTERRUPTED
                doc = self._doc = self._write_run_info(finished=now(), exit_status=int(session.exitstatus),
                                                           interrupted=self.interrupted, planned=self.planned)
                early, self._parquet = self._parquet, None   # (told once: written again, a new one)
                self.report = write_reports(self.folder.path, policy=self.policy,
                                            parquet_in_child=True, parquet_writer=early,
                                            waivers=self.waivers,
                                            certify=self.opts.certify, run_info=doc,
                                            baseline=self.baseline,
                                            certify_cases=(self._dropped_digests + [[c.id, c.sha256()] for c in self._cases()]
                                                           if self.opts.certify and self.graph is None else None),
                                            certify_key=self.signer)
                if self.interrupted or self.stop is None or self.stop.count == signals:
                    break
            # an (op, target) failing as a whole (its bias, its declared scheme) fails the run; judged
            # from results.jsonl, so a resumed or xdist run gets the verdict of an uninterrupted one
            if session.exitstatus == 0 and any(not g["finding"] for g in self.report.groups):
                session.exitstatus = 1
            if session.exitstatus == 0 and certificate_failures(self.report.certificate):   # (#30) the verdict is the point
                session.exitstatus = 1
            if session.exitstatus == 0 and self.report.missing:   # a planned case without a row is no pass
                session.exitstatus = pytest.ExitCode.INTERRUPTED
            if session.exitstatus == 0 and self.report.errors:   # a run whose reports are lost is no pass
                session.exitstatus = pytest.ExitCode.INTERNAL_ERROR
            complete = (session.exitstatus in (0, 1, 5) and not self.interrupted and not self.report.missing
                        and not session.shouldstop and not session.shouldfail)
            if complete and not self.filtered:
                self.folder.mark_latest()
        except QconformError as e:   # (the rows cannot be read, `latest` cannot be moved)
            self.report_error = str(e)
            session.exitstatus = pytest.ExitCode.INTERNAL_ERROR
        except OSError as e:   # run.json cannot be written (full disk, read-only): one line naming it
            self.report_error = str(disk_error(Path(e.filename or self.folder.path), e))
            session.exitstatus = pytest.ExitCode.INTERNAL_ERROR
        finally:
            dismiss(self._parquet)   # (not told: the reports were not written)
            self._parquet = None
            self.folder.close()
        tr = self.config.pluginmanager.get_plugin("terminalreporter")
        if exitstatus == pytest.ExitCode.INTERNAL_ERROR and tr is not None:   # (pytest gives no terminal summary then)
            for line in ([self.report_error] if getattr(self, "report_error", None) else []) + \
                    [f"could not write {e}" for e in (self.report.errors if self.report else [])]:
                tr.write_line(f"qconform: {line}", red=True)

    def pytest_terminal_summary(self, terminalreporter, exitstatus, config):
        tr = terminalreporter
        if not self.controller:
            return
        if getattr(self, "report_error", None):
            tr.write_line(f"qconform: {self.report_error}", red=True)
        rep = self.report
        if rep is None:
            return
        if self.resumed is not None and rep.summary:
            tr.write_line(f"qconform: resumed {self.resumed.dir}: {self.resumed.skipped} result(s) were recorded "
                          f"already, the rest ran now")
        # -v: every (op, target), all columns; default: those with failures, new first, one line each
        # within the terminal's width; -q: those with new ones (reports/summary.py compact_table)
        v, width = config.get_verbosity(), config.get_terminal_writer().fullwidth
        rows = rep.summary if v > 0 else with_failures(rep.summary, known=v == 0)
        if rows:
            tr.write_sep("=", "qconform: " + ("per-op x target summary" if v > 0 else "(op, target)s with new "
                                              "failures" if v < 0 else "(op, target)s with failures, new first"))
            tr.write_line(to_text(rows) if v > 0 else compact_table(rows, width))
            if v <= 0:
                tr.write_line("every (op, target): summary.md in the run folder, or -v")
        for line, markup in terminal_lines(rep, width if v <= 0 else 10_000):
            tr.write_line(line, **markup)
        if self.signer is not None and rep.certificate:
            pub = attest.public_path(self.signer.path)
            if self.signer.created:
                tr.write_line(f"qconform: made your signing key {self.signer.path} (keep it secret) and its public key "
                              f"{pub} (give it to whoever verifies)", yellow=True)
            tr.write_line(f"certificate signed with key {self.signer.keyid[:16]}; verify it: qconform certify --verify "
                          f"{self.folder.path / 'certificate.json'} --public-key {pub}")
        models_bad = 0
        for line, bad in getattr(self, "model_lines", []):   # --model: one line per (model, target) (#24)
            tr.write_line(line, red=bad, yellow=not bad)
            models_bad += bad
        if self.run is not None and self.run.goldens.store is not None:
            for p in self.run.goldens.store.problems:
                tr.write_line(f"qconform: golden cache: {p}", yellow=True)
        if config.option.keyword and not self.opts.ops and not self.opts.case_files:   # (-k matches substrings)
            tr.write_line(fit("hint: --ops OP[,OP] generates only those ops' cases, faster than -k; -k CONV_2D "
                              'also picks DEPTHWISE_CONV_2D (-k "CONV_2D and not DEPTHWISE")', width))
        tr.write_line(f"run folder: {self.folder.path}" + (" (interrupted)" if self.interrupted else ""))
        short = (f" ({rep.missing} of {self.planned} planned results have no row)" if rep.missing else "")
        if rep.summary:   # the last qconform line: the verdict, new failures apart from known ones
            t = totals(rep.summary)
            cert_bad = certificate_failures(rep.certificate)
            line, bad = terminal_verdict(t, runxfail=config.option.runxfail,
                                         exit_status=0 if models_bad or cert_bad else int(exitstatus),   # (said here)
                                         known_groups=sum(1 for g in rep.groups if g["finding"]))
            bad = bad or bool(models_bad) or bool(cert_bad)
            tr.write_line(f"qconform: " + (f"certificate NON-CONFORMANT: {'; '.join(cert_bad)}; " if cert_bad else "")
                          + line + (f"; {models_bad} (model, target) failing as a whole" if models_bad else "")
                          + f"; {case_counts(t)}"
                          + (" (interrupted: the results so far)" if self.interrupted else "") + short,
                          red=bad or bool(short), green=not (bad or short), bold=True)
        elif self.interrupted or short:
            tr.write_line(f"qconform: INCOMPLETE: no case was judged{short}", red=True, bold=True)

    def pytest_unconfigure(self, config):
        if self._frozen:   # (a session run inside another process, pytester's: its objects can be collected)
            gc.unfreeze()
        if self.stop is not None:
            self.stop.restore()
        xml = getattr(config.option, "xmlpath", None)   # ---- --junitxml: the run's properties (suite/harness/junit.py)
        if self.controller and xml and Path(xml).is_file() and getattr(self, "_doc", None):
            try:
                add_suite_properties(xml, suite_properties(self._doc))
            except (OSError, ValueError, SyntaxError) as e:   # (ET.ParseError is a SyntaxError)
                print(f"qconform: could not add the run's properties to {xml}: {e}")
        self._close_hunters()
        if self.run is not None:   # no session end (--markers, a plugin's sessionstart raised)
            self.run.close()
        self.folder.close()


#: tests between two :func:`_settle_gc`
GC_EVERY = 500


def _settle_gc() -> None:
    """Keep CPython's cycle collector off what the session holds. A run's pytest process holds
    its items, cases and reports to the end (half a million objects in a default run), and every
    full collection traverses them all (about 20 in a default run, to free a few thousand
    objects), as does each collection while the interpreter exits. So the young generations are
    collected and everything alive is frozen (gc.freeze: kept out of collections), after
    collection and every GC_EVERY tests; pytest_unconfigure unfreezes it. At exit (atexit, before
    the interpreter's own collections) it is frozen again: the process is about to free it all."""
    gc.collect(1)
    gc.freeze()
    global _AT_EXIT
    if not _AT_EXIT:
        _AT_EXIT = True
        atexit.register(gc.freeze)


_AT_EXIT = False   # (registered once per process)


def _test_hunt(self, request):
    """<OP>:<target>::test_hunt (--hunt): fails with the new distinct failures the hunt found."""
    res = request.config.stash[SESSION].hunt(self.op, self.target)
    if res.new:
        pytest.fail(res.summary(), pytrace=False)
    if res.groups:
        known_failure(request.config, f"known findings only: {res.summary()}")


def _test_group(self, request):
    """<OP>:<target>::test_group: the (op, target) judged whole (bias, declared scheme; what the
    certificate's op_failures and the run's exit status say), after its cases."""
    session = request.config.stash[SESSION]
    judged, total, bad, failures = session.judge_group(self.op, self.target)
    command = group_repro(session.repro_doc(), self.op, self.target)
    request.node.user_properties.extend(   # JUnit XML <property> of the group's testcase
        (name, value) for name, value in group_properties(
            self.op, self.target, "; ".join(sorted({f["text"].split(":", 1)[0] for f in failures})) or "none",
            "; ".join(f["text"] for f in failures) or "pass", command,
            "; ".join(sorted({f["finding"] for f in failures if f.get("finding")})) or None))
    _allure_group(request.config, self.op, self.target, failures, command)
    new = [f["text"] for f in failures if not f["finding"]]
    if bad:   # (cases left out of this session, run for the group's verdict)
        new.append(f"{len(bad)} of its cases not selected here fail: " + ", ".join(bad[:10]))
    if new:
        verdict_failed(f"{self.op} on {self.target} as a whole: " + "; ".join(new) + f"\nreproduce: {command}")
    if judged < total:   # (no run in this process: nothing to judge the rest with)
        pytest.skip(f"not judged: {judged} of the {total} cases of {self.op} on {self.target} ran")
    if failures:
        known_failure(request.config, "; ".join(f"{f['text']} [known finding {f['finding']}]" for f in failures))


def known_failure(config, reason: str, message: str | None = None):
    """pytest.xfail(reason) without a traceback (formatting one parses the test's module again;
    the reason says it all); with --runxfail, the failure it is, with ``message`` (a case's
    verdict message: what is off and the reproduction command)."""
    if config.option.runxfail:
        verdict_failed(message or reason)
    raise pytest.xfail.Exception(reason, pytrace=False)


def _ops_together(items: list) -> None:
    """Each operator's tests together, operators in the order of their first test, in place (a
    stable sort over whatever order pytest-randomly gave, the grouping it provides for). A bad
    verdict's witnesses are its case on the op's other targets (Run._witness), whose batches are
    then at the head of their targets' queues: spread over the run, the pytest process waited for
    each target's worker to run everything queued before them (about 4 s of a default run)."""
    rank: dict = {}
    for it in items:
        rank.setdefault(getattr(it.cls, "op", None), len(rank))
    items.sort(key=lambda it: rank[getattr(it.cls, "op", None)])


def _drop(row) -> None:
    pass


def run_cases(request) -> None:
    """<OP>:<target>::test_cases (--item=group): the (op, target)'s cases, each judged, recorded and
    reported on its own (suite/harness/items.py)."""
    request.config.stash[SESSION].run_cases(request.node)


def _pairs(item) -> list[tuple[Case, str]]:
    """The (case, target) pairs a test asks for."""
    if item.name == grouped.GROUP_ITEM:
        return [(c, item.cls.target) for c in item.stash.get(grouped.CASES, [])]
    p = _pair(item)
    return [p] if p else []


def _pair(item) -> tuple[Case, str] | None:
    cs = getattr(item, "callspec", None)
    case = cs.params.get("qc_case") if cs is not None else None
    return (case, item.cls.target) if case is not None else None


def _harvest(o):
    """--model: the model's graph, its feeds and its layers as cases, under the run's options."""
    def harvest(opts):
        graph = harvest_model(o.model, o.model_inputs, o.seed, opts.scheme, parse_input_shapes(o.model_input_shape))
        return graph, feed_sets(graph, o.model_inputs, o.seed), graph.cases()
    return harvest


def _runs_no_tests(o) -> bool:
    """--collect-only, --setup-plan, --fixtures, --markers, --help, ...: no target runs."""
    return any(getattr(o, k, False) for k in ("collectonly", "setupplan", "setuponly", "showfixtures",
                                              "show_fixtures_per_test", "markers", "help", "version"))
