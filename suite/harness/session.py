"""What a conformance run is, made from its options before anything runs: the checked options,
the targets (bound to this process's device), the cases, the tolerance policy and waivers, the
failure files given again, the run being resumed. The pytest plugin makes one at configure
(suite/plugin.py); every mistake in them is one QconformError here, before a folder or process
exists."""

from __future__ import annotations

import hashlib
import sys
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from reports import attest
from suite.cases.files import load_case_files
from suite.core.case import Case
from suite.core.errors import QconformError
from suite.core.tolerance import check_target_names, load_policy
from suite.core.userfile import read_bytes
from suite.core.waivers import load_waivers
from suite.harness import resume as resume_mod
from suite.harness.goldens import folder_of
from suite.harness.isolation import START_TIMEOUT, Isolated, in_worker
from suite.harness.options import RunOptions, check_given, checked, split_list
from suite.harness.repro import TOLERANCE_COPY, check_reruns
from targets import DEFAULT_TARGETS, get_target, known_names, target_name
from targets.batching import CACHED_TARGETS
from targets.remote import device_for_process, device_targets
from targets.transport import parse_device_list

#: ``--model``: the harvest of the model (graph, feeds, cases) under the run's options
Harvest = Callable[[RunOptions], tuple[Any, Any, list[Case]]]


@dataclass
class RunSetup:
    opts: RunOptions
    targets: dict            # name (as rows and test ids give it) -> target
    selectors: dict          # name -> its --target value (repro, resume)
    unavailable: dict        # default targets not available here -> why
    workers: dict            # name -> its started worker (isolation.Isolated): it says the target's availability
    pending: list            # default targets whose workers have not said yet (waited for when the tests are made)
    cases: list[Case] | None   # None: generated when collected
    policy: Any
    waivers: list
    policy_text: bytes       # judged by its exact text: its SHA-256 goes into run.json and failure files
    tolerance_digest: str
    reruns: list             # failure files given again, with their judged sections
    resumed: resume_mod.Resume | None
    device_text: str | None  # the --device this process drives (None: this machine, or a farm's controller)
    graph: Any = None        # --model
    model_feeds: Any = None
    signer: Any = None       # --certify's signing key (reports.attest.Signer), the controller's


def set_up(o, *, argv: list[str], worker_input: dict | None, harvest: Harvest | None = None,
           stop=None, runs: bool = False) -> RunSetup:
    """The run of pytest's options ``o`` (``argv``: the command line) in this process
    (``worker_input``: an xdist worker's, else None; ``stop``: suite.harness.stop.Stop, whose
    signals end a target's construction). ``runs``: this process runs the targets (a Run), so
    each target that runs in a worker process has its worker started now, and the worker says
    whether it can run here (the runtime is not imported here to learn it): a --target one's
    answer is waited for now, a default one's when the tests are made (``pending``)."""
    controller = worker_input is None
    check_given(o)
    if getattr(o, "certify_key", None) and not o.certify:
        raise QconformError("a key to sign a certificate with: give --certify too", field="--certify-key",
                            rule="--certify-key with --certify")
    # a key that cannot be read is an error now, before anything runs (never an unsigned certificate)
    signer = attest.signing_key(o.certify_key) if controller and o.certify else None
    resumed = resume_mod.open_run(o.resume, o.report_dir) if o.resume else None
    if resumed is not None:   # options not given come from the run being resumed
        resume_mod.fill_options(resumed, o, argv)
        resumed.offset = (resume_mod.repair_tail(resumed.dir) if controller
                          else int(worker_input.get("qconform_resume_offset", 0)))
    devices = parse_device_list(o.device) if o.device else []
    device = device_for_process(devices, worker_input) if devices else None
    names = split_list(o.target)
    opts = checked(
        targets=names, seed=o.seed, cases_per_op=o.cases_per_op, ops=split_list(o.ops),
        case_files=o.case_file, tolerance_file=o.tolerance, scheme=o.scheme, warmup=o.warmup,
        repeats=o.repeats, batch_size=o.batch_size, timeout=o.case_timeout,
        latency_cases=o.latency_cases if o.latency_cases is not None else _default_latency_cases(devices, device),
        ahead=o.ahead, isolation=o.isolation, witness_cases=getattr(o, "witness_cases", None), golden_cache=_golden_folder(o.golden_cache), waivers=o.waivers,
        certify=o.certify,
        target_options={**{t: {"cache_dir": o.cache_dir} for t in CACHED_TARGETS},
                        "htp": {"htp_performance_mode": o.htp_performance_mode, "cache_dir": o.cache_dir},
                        "netrun": {"profile": o.netrun_profile}})
    if resumed is not None:
        resume_mod.check_config(resumed, opts)
    by_selector, unavailable, workers = _targets(names, devices, device, opts, stop, runs)
    try:
        return _with_targets(o, opts, names, by_selector, unavailable, workers, resumed, device, signer, harvest)
    except BaseException:
        for ex in workers.values():
            ex.close()
        raise


def _with_targets(o, opts, names, by_selector, unavailable, workers, resumed, device, signer, harvest) -> RunSetup:
    """The rest of the set-up, once the targets are made (their started ``workers`` are closed by
    the caller if it fails)."""
    targets, selectors = _named(by_selector)
    workers = {target_name(sel): ex for sel, ex in workers.items()}
    opts = RunOptions(**{**opts.__dict__, "targets": tuple(selectors[n] for n in targets)})
    cases = load_case_files(list(opts.case_files), opts.scheme) if opts.case_files else None
    graph = feeds = None
    if harvest is not None:
        if opts.case_files:
            raise QconformError("--model and --case-file each give the run's cases: give one",
                                field="--model", rule="one source of cases")
        graph, feeds, cases = harvest(opts)
    if cases is not None and opts.ops:
        cases = [c for c in cases if c.op in opts.ops]
    policy, waivers = load_policy(opts.tolerance_file), load_waivers(list(opts.waivers))
    check_target_names(policy, [*known_names(), *targets])   # a rule for "tfliet" would never apply
    policy_text = read_bytes(policy.source, "tolerance file", "--tolerance", "toml")
    digest = hashlib.sha256(policy_text).hexdigest()
    device_text = device.text if device is not None else None
    # failure files given again must be judged as their run judged them (suite/harness/repro.py)
    reruns = check_reruns(list(opts.case_files), targets=list(opts.targets), scheme=opts.scheme,
                          tolerance_digest=digest, device=device_text,
                          timeout=opts.timeout) if opts.case_files else []
    if resumed is not None and resumed.options.get("tolerance_digest") not in (None, digest):
        raise QconformError("was judged under another tolerance policy (sha256 "
                            f"{resumed.options['tolerance_digest'][:12]}...): give --tolerance="
                            f"{Path(resumed.dir) / TOLERANCE_COPY}", source=str(resumed.dir),
                            field="--resume", rule="a resumed run keeps its tolerance policy")
    return RunSetup(opts=opts, targets=targets, selectors=selectors, unavailable=unavailable, workers=workers,
                    pending=[] if names else list(workers), cases=cases,
                    policy=policy, waivers=waivers, policy_text=policy_text, tolerance_digest=digest,
                    reruns=reruns, resumed=resumed, device_text=device_text, graph=graph, model_feeds=feeds,
                    signer=signer)


def _default_latency_cases(devices: list, device) -> int:
    """3; 0 when this process drives only emulated devices (``qemu:``): each case alone costs
    one more start of the emulated runtime, for a latency that says nothing of the board."""
    if devices and all(d.kind in ("qemu", "qemu-x86") for d in ([device] if device else devices)):
        return 0
    return 3


#: seconds a target's constructor (and its availability check) may take in the pytest process
CONSTRUCT_TIMEOUT = START_TIMEOUT


def construct(spec: str, options: dict, stop=None, isolation: str | None = None) -> tuple[Any, tuple[bool, str] | None]:
    """(the target ``spec`` selects, its availability; None if it runs in a worker process under
    ``isolation``, whose worker says it), made in a thread of its own under
    :data:`CONSTRUCT_TIMEOUT`: a constructor that hangs (a runtime waiting for a device, a lock)
    is one QconformError, and a SIGTERM or Ctrl-C meanwhile (counted by ``stop``: its handler
    only counts while the run is set up) ends the run at once, as interrupted. A hung thread is
    left behind (a daemon: it never holds the process open)."""
    box: dict[str, Any] = {}

    def make():
        try:
            t = get_target(spec, **options)
            box["done"] = (t, None if isolation and in_worker(t, isolation) else t.availability())
        except BaseException as e:  # noqa: BLE001 (raised again in the pytest process's thread)
            box["error"] = e

    th = threading.Thread(target=make, name=f"qconform-construct-{spec}"[:60], daemon=True)
    signals = stop.count if stop is not None else 0
    th.start()
    deadline = time.monotonic() + CONSTRUCT_TIMEOUT
    while th.is_alive():
        th.join(0.05)
        if stop is not None and stop.count > signals:
            sys.stderr.write(f"qconform: the run stops while target {spec!r} is being created\n")
            raise KeyboardInterrupt(f"a signal while target {spec!r} was being created")
        if th.is_alive() and time.monotonic() > deadline:
            raise QconformError(f"target '{spec}' was not created within {CONSTRUCT_TIMEOUT:g} s (its constructor "
                                "or availability check hangs)", field="--target",
                                rule="a target is created within its time limit")
    if "error" in box:
        raise box["error"]
    return box["done"]


def _targets(names: list[str], devices: list, device, opts: RunOptions, stop=None,
             runs: bool = False) -> tuple[dict, dict, dict]:
    """The targets by --target value (bound to this process's device with --device), the default
    targets known not to be available here with why, and the started workers by --target value
    (``runs``: of the targets that run in one, which say whether they can run here; a --target
    one's answer is waited for). An unknown or unavailable requested target is an error."""
    options = opts.target_options
    if devices:
        if not names:
            raise QconformError("--device needs --target (e.g. --target=htp)", field="--device")
        return device_targets(names, device, devices, options), {}, {}
    chosen, unavailable, workers = {}, {}, {}
    try:
        for n in names or DEFAULT_TARGETS:
            t, known = construct(n, options.get(n, {}), stop, opts.isolation if runs else None)
            if known is None:
                workers[n] = Isolated(t, opts.timeout, opts.ahead)
                known = (True, "") if not names else workers[n].availability(_waiting(stop, n))
            ok, why = known
            if ok:
                chosen[n] = t
            elif names:
                raise QconformError(f"target '{n}' is not available on this machine: {why}", field="--target",
                                    rule="requested targets must be available (see `qconform targets`)")
            else:
                unavailable[n] = why
    except BaseException:
        for ex in workers.values():
            ex.close()
        raise
    return chosen, unavailable, workers


def _waiting(stop, spec: str):
    """Called while a --target's worker is being waited for in the set-up (signals are only
    counted then): one that came meanwhile ends the run at once, as interrupted."""
    signals = stop.count if stop is not None else 0

    def check():
        if stop is not None and stop.count > signals:
            sys.stderr.write(f"qconform: the run stops while target {spec!r} is being started\n")
            raise KeyboardInterrupt(f"a signal while target {spec!r} was being started")
    return check


def _named(by_selector: dict) -> tuple[dict, dict]:
    """The targets by the name rows and test ids give them (targets.target_name: a module:Class
    target's own name), and each name's --target value."""
    named, selectors = {}, {}
    for sel, t in by_selector.items():
        name = target_name(sel)
        if name in named:
            raise QconformError(f"'{selectors[name]}' and '{sel}' are both named '{name}'",
                                field="--target", rule="one name, one target")
        named[name], selectors[name] = t, sel
    return named, selectors


def _golden_folder(option: str | None) -> str | None:
    d = folder_of(option)
    return str(d) if d is not None else None
