"""Remote targets: a built-in target's runtime on a device, driven through a transport.

``pytest --target=htp --device=ssh:user@board`` wraps ``htp`` in a
:class:`RemoteTarget`: the host builds each case's model exactly as the local
target does (:mod:`targets.onnx_model` for ``htp``/``ort``,
:mod:`targets.tflite_model` for ``tflite``/``tflite-ref``), writes a batch folder
(models, raw inputs, ``manifest.json``, the device runner), and per batch of cases
makes one push, one run of ``targets/device_runner.py`` on the device, one pull
of the raw outputs, latencies and device facts, and one cleanup. Outputs come back
as case-layout arrays, so the golden, the comparison and the report are the same
as for a local target; each row carries the device and its facts. As the local
``ort``/``htp`` targets do (:mod:`targets.batching`), ONNX cases that can share a
graph go to the device merged into one model (one session; ``?merge=0`` turns
this off); a merged model the runtime refuses falls back to the cases alone.

Before any case, each device is probed once (:func:`probe_device`, from
:func:`device_targets` at configure): connect, then set up the runtimes the targets
need with the device's python, within :data:`PROBE_BUDGET_S`; a device that fails
is one usage error naming it and what failed.

Faults: a dropped connection (:class:`~targets.transport.TransportError`, or a
run that ended without the runner's completion line while the device no longer
answers) triggers ``transport.reconnect()`` and a new attempt with the cases that
did not finish (finished ones are kept from the partial pull). The device has one
budget of ``retries`` such failed attempts for the whole run (``?retries=N``,
default 2; its targets share it); one more, or a reconnect that does not bring the
device back within ``wait``, and the device is given up: the unfinished cases and
every later one are ``infra`` verdicts at once, with no further connection attempt.
A runner still going at its timeout (``?timeout=S`` per batch, default 60 s + 10 s
per case) is killed on the device; the case it was running is a ``timeout`` verdict
and the cases after it are run again. A runner that dies on a case (the connection
being fine) makes that case a ``crash``; dying inside a merged batch gives no verdict,
and its cases run alone in the next attempt (this spends nothing of the budget).
Every row records ``retries`` (how often its case was resubmitted) and
``batch_round_trips``.
"""

from __future__ import annotations

import json
import secrets
import shutil
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Sequence

import numpy as np

from suite.core.dtypes import DTYPES
from suite.core.errors import QconformError, Unsupported

from targets import get_target, load_class, onnx_model, tflite_model
from targets.base import Outcome, Target, Timing
from targets.batching import batch_info, compat_key, merge_onnx, placement_text
from targets.transport import (REMOTE_TIMEOUT_RCS, CommandResult, DeviceSpec, Transport, TransportError,
                        make_transport, parse_device, parse_device_list)

RUNNER = Path(__file__).with_name("device_runner.py")
DONE_MARK = "qconform-runner: done"
DEFAULT_RETRIES = 2
PROBE_BUDGET_S = 30.0        # a device's probe at start, cleanup included
PROBE_CLEANUP_S = 5.0        # of which the probe's cleanup may take
PROBE_GRACE_S = 2.0          # the host's wait for a probe command beyond its time limit on the device
#: what to install on the device, per runtime of the device runner
RUNTIME_PACKAGES = {"onnxruntime-qnn": "onnxruntime-qnn", "onnxruntime": "onnxruntime", "litert": "ai-edge-litert",
                    "openvino": "openvino"}


def _text(val) -> str:
    """A device fact as text (a list, such as ``isa``: its items, space-separated)."""
    return " ".join(map(str, val)) if isinstance(val, list) else str(val)


@dataclass(frozen=True)
class RemoteKind:
    model: str                 # "onnx" | "tflite"
    runtime: str               # the device runner's runtime
    options: tuple = ()        # fixed runtime options
    placement: str = ""


#: built-in targets that can run on a device, and how
REMOTABLE: dict[str, RemoteKind] = {
    "htp": RemoteKind("onnx", "onnxruntime-qnn",
                      placement="all nodes on QNNExecutionProvider (CPU fallback disabled)"),
    "ort": RemoteKind("onnx", "onnxruntime"),
    "openvino": RemoteKind("onnx", "openvino"),
    "tflite": RemoteKind("tflite", "litert", (("op_resolver", "AUTO"),)),
    "tflite-ref": RemoteKind("tflite", "litert", (("op_resolver", "BUILTIN_REF"),)),
}


def remote_target(name: str, device: DeviceSpec | str, **options: Any) -> "RemoteTarget":
    """The device form of built-in target ``name``; QconformError if it has none."""
    if name not in REMOTABLE:
        raise QconformError(f"target '{name}' cannot run on a device (device targets: "
                            f"{', '.join(REMOTABLE)}; `netrun` takes --device too)", field="--device",
                            rule="--device applies to device-capable targets")
    return RemoteTarget(name, device, **options)


@dataclass
class _Prepared:
    tag: str
    entry: dict                 # the manifest entry
    files: dict[str, bytes]     # relative path -> content
    unpack: Any                 # list[np.ndarray] (model layout) -> case layout
    case: Any = None
    model: Any = None           # the OnnxModel (ONNX kinds: merged batches)


class RemoteTarget(Target):
    description = "a built-in target's runtime on a device (see docs/devices.md)"
    isolate = False   # the device runner is its own process: crashes/hangs are handled here

    def __init__(self, inner: str, device: DeviceSpec | str, **options: Any):
        super().__init__(**options)
        self.inner = inner
        self.name = inner
        self.kind = REMOTABLE[inner]
        self.local = get_target(inner, **options)   # static checks and descriptions only
        self._bind(device)
        self.description = f"{self.local.description}, on device {self.device.label}"
        self.expected_scheme = self.local.expected_scheme

    def _bind(self, device: DeviceSpec | str) -> None:
        self.device = parse_device(device) if isinstance(device, str) else device
        self._transport: Transport | None = None
        self._facts: dict[str, Any] | None = None
        self._probed = False               # the device answered probe_device for this target
        self._no_merge: set[str] = set()   # case ids whose merged batch died: run alone from now on
        self._uid = secrets.token_hex(3)
        self._batches = 0
        self.retries_max = self.device.get("retries", DEFAULT_RETRIES)

    # ---- plumbing
    @property
    def transport(self) -> Transport:
        if self._transport is None:
            self._transport = make_transport(self.device)
        return self._transport

    def runtime_options(self) -> dict[str, Any]:
        opts = dict(self.kind.options)
        if self.kind.runtime == "onnxruntime-qnn":
            opts["htp_performance_mode"] = str(self.options.get("htp_performance_mode", "burst"))
        return opts

    def batch_timeout(self, n: int) -> float:
        return self.device.get("timeout") or 60.0 + 10.0 * n

    # ---- discovery
    def availability(self):
        """What the host needs (the transport's client, the model builder), then the device's probe."""
        ok, why = self.host_availability()
        if not ok:
            return False, why
        try:
            if not self._probed:
                probe_device([self])
        except QconformError as e:
            return False, e.detail
        return True, why

    def probe_runtime(self) -> str | None:
        """The device runner's runtime this target needs on the device (the probe sets it up)."""
        return self.kind.runtime

    def host_availability(self):
        ok, why = self.transport.available()
        if not ok:
            return False, why
        try:
            if self.kind.model == "onnx":
                onnx_model.load_onnx()
            else:
                tflite_model.schema()   # (it needs flatbuffers)
        except Exception as e:
            return False, (f"the host cannot build {self.kind.model} models ({type(e).__name__}: {e}); "
                           f"pip install {'onnx' if self.kind.model == 'onnx' else 'ai-edge-litert'}")
        return True, f"{self.inner} on {self.device.label} via {why}"

    def versions(self):
        """Device facts (OS, SoC, runtime and QNN versions, HTP mode), probed once."""
        if self._facts is None:
            self._facts = self._probe()
        v = {"device": self.device.label}
        v.update({k: _text(val) for k, val in self._facts.items() if val not in (None, "")})
        v.update({k: str(val) for k, val in self.runtime_options().items()})
        return v

    def _probe(self) -> dict[str, Any]:
        """The facts of a target used without :func:`device_targets` (its device not probed yet)."""
        try:
            probe_device([self])
        except QconformError as e:
            return {"probe_error": e.detail}
        return self._facts or {}

    def device_facts(self):
        """{device: facts} for run.json (probed once, or taken from the first batch)."""
        if self._facts is None:
            self._facts = self._probe()
        return {self.device.label: dict(self._facts)}

    def unsupported(self, case):
        for t in list(case.inputs) + list(case.outputs):
            if t.dtype in ("int4", "uint4"):
                return "4-bit tensors are not carried to devices yet (raw files hold whole bytes)"
        return self.local.unsupported(case)

    # ---- building a batch
    def prepare(self, case, tag: str) -> _Prepared:
        """Model and raw inputs of one case, as the local target would build them."""
        entry: dict[str, Any] = {"tag": tag, "id": case.id}
        files: dict[str, bytes] = {}
        if self.kind.model == "onnx":
            model = onnx_model.build(case)
            entry["model"] = f"models/{tag}.onnx"
            files[entry["model"]] = model.content
            entry["inputs"] = []
            for j, (name, arr) in enumerate(model.feeds(case).items()):
                f = f"inputs/{tag}_{j}.raw"
                files[f] = _le(arr).tobytes()
                entry["inputs"].append({"name": name, "file": f, "dtype": str(arr.dtype), "shape": list(arr.shape)})
            entry["outputs"] = [{"name": go.name, "dtype": str(np.dtype(DTYPES[o.dtype].storage))}
                                for go, o in zip(model.outputs, case.outputs)]
            unpack = model.unpack
            return _Prepared(tag, entry, files, unpack, case, model)
        else:
            built = tflite_model.build(case)
            entry["model"] = f"models/{tag}.tflite"
            files[entry["model"]] = built.content
            entry["inputs"] = []
            for j, ci in enumerate(built.input_indices):
                t = case.inputs[ci]
                arr = np.asarray(t.data).astype(DTYPES[t.dtype].storage).reshape(t.shape)
                f = f"inputs/{tag}_{j}.raw"
                files[f] = _le(arr).tobytes()
                entry["inputs"].append({"name": f"input{j}", "file": f, "dtype": str(arr.dtype),
                                        "shape": list(arr.shape)})
            entry["outputs"] = [{"name": f"output{j}", "dtype": str(np.dtype(DTYPES[o.dtype].storage))}
                                for j, o in enumerate(case.outputs)]
            unpack = lambda outs: [np.ascontiguousarray(o) for o in outs]   # noqa: E731
        return _Prepared(tag, entry, files, unpack)

    def merge_groups(self, prepared: Sequence[_Prepared]) -> list[list[_Prepared]]:
        """The cases that run as one merged model (as the local ort/htp targets batch them:
        targets/batching.py), in groups of at most ``max_batch``; the rest run one by one."""
        if (self.kind.model != "onnx" or len(prepared) < 2 or int(self.options.get("max_batch", 256)) < 2
                or self.device.get("merge", 1) == 0):
            return []
        groups: dict[tuple, list[_Prepared]] = {}
        for p in prepared:
            if p.model is None or p.case.id in self._no_merge or not self.local.batchable(p.model):
                continue
            groups.setdefault(compat_key(p.model.content), []).append(p)
        limit = int(self.options.get("max_batch", 256))
        out = []
        for g in groups.values():
            out += [g[k:k + limit] for k in range(0, len(g), limit) if len(g[k:k + limit]) > 1]
        return out

    def write_batch(self, folder: Path, prepared: Sequence[_Prepared], timing: Timing) -> None:
        manifest = {"format": "qconform-batch/1", "runtime": self.kind.runtime, "options": self.runtime_options(),
                    "warmup": int(timing.warmup), "repeats": int(timing.repeats), "out": "out",
                    "cases": [p.entry for p in prepared], "groups": []}
        for k, group in enumerate(self.merge_groups(prepared)):
            merged = merge_onnx([p.case for p in group], [p.model for p in group])
            rel = f"models/g{k:03d}.onnx"
            (folder / "models").mkdir(parents=True, exist_ok=True)
            (folder / rel).write_bytes(merged.content)
            members = []
            for prefix, p in zip(merged.prefixes, group):
                members.append({"tag": p.tag, "prefix": prefix,
                                "inputs": [dict(i, name=prefix + i["name"]) for i in p.entry["inputs"]],
                                "outputs": [dict(o, name=prefix + o["name"]) for o in p.entry["outputs"]]})
            manifest["groups"].append({"gtag": f"g{k:03d}", "model": rel, "members": members})
        for p in prepared:
            for rel, content in p.files.items():
                dst = folder / rel
                dst.parent.mkdir(parents=True, exist_ok=True)
                dst.write_bytes(content)
        (folder / "manifest.json").write_text(json.dumps(manifest, indent=1))
        shutil.copy(RUNNER, folder / "device_runner.py")

    # ---- hooks of the device side (targets/netrun.py overrides them for net-run tools)
    def before_first_batch(self) -> None:
        """Once per session, before the first batch (e.g. push libraries)."""

    def runner_argv(self, ws: str) -> list[str]:
        t = self.transport
        return [t.python, f"{ws}/device_runner.py", f"{ws}/manifest.json"]

    def runner_env(self, ws: str) -> dict[str, str] | None:
        return None

    def case_done(self, out: Path, p: _Prepared) -> bool:
        return (out / f"{p.tag}.json").exists()

    def case_started(self, out: Path, p: _Prepared) -> bool:
        return (out / f"{p.tag}.started").exists()

    def group_in_flight(self, out: Path) -> list[str]:
        """Tags of the members of a merged group the runner started and never finished."""
        tags: list[str] = []
        for f in sorted(out.glob("g*.started")):
            if not f.with_suffix(".json").exists():
                try:
                    tags += json.loads(f.read_text() or "[]")
                except ValueError:
                    pass
        return tags

    def read_facts(self, out: Path) -> dict[str, Any] | None:
        f = out / "device.json"
        try:
            facts = json.loads(f.read_text()) if f.exists() else None
        except ValueError:
            return None
        return {**facts, **self.transport.facts()} if isinstance(facts, dict) else None

    def collect(self, p: _Prepared, out: Path) -> Outcome:
        return self._outcome(p, json.loads((out / f"{p.tag}.json").read_text()), out)

    # ---- running
    def run(self, cases: Sequence, timing: Timing) -> list[Outcome]:
        outcomes: list[Outcome | None] = [None] * len(cases)
        prepared: dict[int, _Prepared] = {}
        for i, c in enumerate(cases):
            why = self.unsupported(c)
            if why:
                outcomes[i] = Outcome.unsupported(why)
                continue
            try:
                prepared[i] = self.prepare(c, f"c{i:04d}")
            except Unsupported as e:
                outcomes[i] = Outcome.unsupported(e.reason)
            except Exception as e:
                outcomes[i] = Outcome.error(f"building the model failed: {type(e).__name__}: {e}"[:2000])
        retries = [0] * len(cases)
        todo = sorted(prepared)
        t = self.transport
        trips0 = t.round_trips
        if todo and t.given_up is None and self._batches == 0:
            try:
                self.before_first_batch()
            except TransportError as e:
                self._give_up(f"setting up the device failed: {e}")
        self._batches += 1
        if todo and t.given_up is not None:   # given up earlier in the run: no connection, no wait
            for i in todo:
                outcomes[i] = Outcome.error(f"device {self.device.label}, earlier in this run: {t.given_up}",
                                            status="infra")
            todo = []
        failures, last_problem, last_status = 0, "", "infra"
        attempt = 0
        while todo:
            stage = Path(tempfile.mkdtemp(prefix="qcbatch"))
            try:
                resolved, problem, status = self._attempt(stage, attempt, [prepared[i] for i in todo], todo,
                                                          outcomes, timing)
            finally:
                shutil.rmtree(stage, ignore_errors=True)
            attempt += 1
            todo = [i for i in todo if outcomes[i] is None]
            if problem:
                last_problem, last_status = problem, status
                if status == "infra":   # the device failed: the run's budget for it
                    t.failures += 1
                    if t.given_up is None and t.failures > self.retries_max:
                        self._give_up(f"gave up after {t.failures} failed attempt(s) in this run: {problem}")
                elif not resolved:      # a merged batch died: its cases run alone next, so this ends
                    failures += 1
            if todo and t.given_up is not None:
                for i in todo:
                    outcomes[i] = Outcome.error(f"device {self.device.label}: {t.given_up}", status="infra")
                break
            if todo and failures > len(prepared):   # (a guard: each such death isolates cases)
                for i in todo:
                    outcomes[i] = Outcome.error(f"device {self.device.label}: gave up on this batch after "
                                                f"{failures} failed attempt(s): {_one_line(last_problem)}",
                                                status=last_status)
                break
            for i in todo:
                retries[i] += 1
        trips = t.round_trips - trips0
        facts = self._facts or {}
        for i, o in enumerate(outcomes):
            o.info.setdefault("device", self.device.label)
            o.info["retries"] = retries[i]
            o.info["batch_round_trips"] = trips
            o.info["batch_cases"] = len(cases)
            for k, v in facts.items():
                if isinstance(v, (str, int, float, list)) and k != "probe_error":
                    o.info.setdefault(f"device_{k}", _text(v) if isinstance(v, list) else v)
        return outcomes  # type: ignore[return-value]

    def _give_up(self, why: str) -> None:
        """Stop using the device for the rest of the run (every target on it: they share the transport)."""
        if self.transport.given_up is None:
            self.transport.given_up = _one_line(why)

    def _attempt(self, stage: Path, attempt: int, batch: list[_Prepared], idx: list[int],
                 outcomes: list, timing: Timing) -> tuple[int, str, str]:
        """One push/run/pull/cleanup; fills ``outcomes`` of finished cases.

        Returns (cases resolved, the problem if the attempt fell short, its status).
        """
        t = self.transport
        self.write_batch(stage / "batch", batch, timing)
        ws = t.workspace(f"qconform-{self._uid}-{self._batches:04d}-{attempt}")
        timeout = self.batch_timeout(len(batch))
        res: CommandResult | None = None
        cut = ""
        try:
            t.push(stage / "batch", ws)
            res = t.run(self.runner_argv(ws), timeout=timeout, env=self.runner_env(ws))
        except TransportError as e:
            cut = str(e)
        finished = res is not None and DONE_MARK in res.stdout
        # 124 (or 137 when KILL was needed) at the time limit: the device-side timeout stopped it
        timed_out = res is not None and not finished and (
            res.timed_out or (res.rc in REMOTE_TIMEOUT_RCS and res.seconds >= timeout - 1.0))
        if res is not None and not finished and not timed_out and not self._alive():
            cut = f"connection lost during the run (exit {res.rc})" + (f": {res.tail(300)}" if res.tail() else "")
        if cut:
            try:
                t.reconnect()
            except TransportError as e:   # not back within `wait`: given up, no more attempts
                self._give_up(f"reconnect failed ({e}) after: {cut}")
                return 0, cut, "infra"
        out = stage / "out"
        try:
            t.pull(f"{ws}/out", out)
        except TransportError as e:
            if not cut:
                cut = f"pull failed: {e}"
                try:
                    t.reconnect()
                except TransportError as e2:
                    self._give_up(f"reconnect failed ({e2}) after: {cut}")
        try:
            if t.given_up is None:
                t.cleanup(ws)
        except TransportError:
            pass
        if self._facts is None:
            self._facts = self.read_facts(out)
        resolved = 0
        in_flight = None
        for p, i in zip(batch, idx):
            if self.case_done(out, p):
                try:
                    outcomes[i] = self.collect(p, out)
                except Exception as e:   # a torn or garbled result file: this case's error
                    outcomes[i] = Outcome.error(f"reading the device's result failed: {type(e).__name__}: {e}")
                resolved += 1
            elif self.case_started(out, p) and in_flight is None:
                in_flight = (p, i)
        if cut:
            return resolved, cut, "infra"
        if finished:
            missing = [p.tag for p, i in zip(batch, idx) if outcomes[i] is None]
            if missing:   # a counted failure: resubmitting without limit could loop for ever
                return resolved, (f"device runner finished but left no result for {len(missing)} case(s) "
                                  f"({', '.join(missing[:5])})"), "infra"
            return resolved, "", ""
        group = [t for t in self.group_in_flight(out) if t not in {p.tag for p, i in zip(batch, idx)
                                                                    if outcomes[i] is not None}]
        if in_flight is None and group:
            # the runner died inside a merged batch: no verdict; its cases run alone next time
            for p in batch:
                if p.tag in group:
                    self._no_merge.add(p.case.id if p.case is not None else p.tag)
            what = "timed out" if timed_out else f"died (exit {res.rc})"
            return resolved, f"device runner {what} in a merged batch: {res.tail(300)}", \
                "timeout" if timed_out else "crash"
        if in_flight is not None:
            p, i = in_flight
            if timed_out:
                outcomes[i] = Outcome.error(f"device runner killed at its timeout ({timeout:g} s per batch) "
                                            f"while running this case on {self.device.label}", status="timeout")
            else:
                outcomes[i] = Outcome.error(f"device runner died (exit {res.rc}) while running this case on "
                                            f"{self.device.label}: {res.tail(400)}", status="crash")
            resolved += 1
        what = "timed out" if timed_out else f"exited {res.rc} without finishing"
        if in_flight is None:   # it never got to a case: the device's environment, not a kernel
            return resolved, f"device runner {what} before its first case: {res.tail(300)}", "infra"
        return resolved, f"device runner {what}: {res.tail(300)}", "timeout" if timed_out else "crash"

    def _alive(self) -> bool:
        try:
            return self.transport.run(["true"], timeout=20.0).rc == 0
        except TransportError:
            return False

    def _outcome(self, p: _Prepared, rec: dict, out: Path) -> Outcome:
        status = rec.get("status")
        if status == "unsupported":
            return Outcome.unsupported(rec.get("reason", ""))
        if status != "ok":
            return Outcome.error(f"on {self.device.label}: {rec.get('reason', '')}")
        outs = []
        for o in rec.get("outputs", []):
            arr = np.fromfile(out / o["file"], dtype=np.dtype(o["dtype"]).newbyteorder("<"))
            outs.append(arr.astype(np.dtype(o["dtype"])).reshape(o["shape"]))
        info: dict[str, Any] = {"device": self.device.label}
        eps = rec.get("placement")
        check = getattr(self.local, "check_placement", None)
        if eps is not None and check is not None:
            why = check(eps)          # the local target's own rule (e.g. htp: nothing reached QNN)
            if why:
                return Outcome.unsupported(why)
            info["placement"] = placement_text(eps)
        elif self.kind.placement:
            info["placement"] = self.kind.placement
        if rec.get("batch_size", 1) > 1:
            info.update(batch_info(int(rec["batch_size"]), rec.get("batch_us")))
        else:
            info["latency_scope"] = "case"
        return Outcome.ok(p.unpack(outs), rec.get("latency_us", []), **info)

    def close(self) -> None:
        if self._transport is not None:
            self._transport.close()


def _one_line(text: str, limit: int = 300) -> str:
    """A problem as one short line (a row's reason, a terminal line)."""
    line = " ".join(str(text).split())
    return line if len(line) <= limit else line[:limit - 3] + "..."


def _le(arr: np.ndarray) -> np.ndarray:
    arr = np.ascontiguousarray(arr)
    return arr.astype(arr.dtype.newbyteorder("<"), copy=False)


# ----------------------------------------------------------------------------- plugin helpers

DIST_MODES = ("each", "shard")


class FarmView(Target):
    """What the xdist controller holds for a target spread over several devices.

    It never runs a case (each worker runs its own device's RemoteTarget); it names the
    devices for the report header and run.json. Device facts are in every result row
    (``device_os``, ``device_soc``, ``device_qnn_sdk``, ...), as each worker probed them.
    """

    isolate = False   # never runs a case

    def __init__(self, inner: str, devices: Sequence[DeviceSpec], **options: Any):
        super().__init__(**options)
        self.name = inner
        self.devices = list(devices)
        self.description = f"{inner} on {len(self.devices)} devices (one pytest-xdist worker each)"

    def versions(self):
        return {"devices": ", ".join(f"{d.label} (gw{k})" for k, d in enumerate(self.devices))}

    def device_facts(self):
        return {d.label: {"worker": f"gw{k}", "facts": "in the result rows (device_* columns)"}
                for k, d in enumerate(self.devices)}

    def run(self, cases, timing):
        raise RuntimeError("the xdist controller does not run cases")


def takes_device(name: str) -> bool:
    """Whether target ``name`` drives a device itself (``netrun``, or a class with ``takes_device = True``)."""
    return bool(getattr(load_class(name), "takes_device", False))


def probe_device(targets: Sequence["RemoteTarget"], budget: float | None = None) -> None:
    """Probe the device of ``targets`` (one device, one shared transport) once, within ``budget``
    seconds (default: the transport's ``probe_budget``, :data:`PROBE_BUDGET_S` but for an emulated
    board): connect, then set up there, with the device's python, the runtimes the targets need
    (the device runner's ``--probe``). Each target gets the device facts; a device that does not
    answer or lacks a runtime is one QconformError naming it and what failed."""
    first = targets[0]
    device, t = first.device, first.transport
    budget = budget or getattr(t, "probe_budget", None) or PROBE_BUDGET_S
    runtimes = sorted({r for tg in targets if (r := tg.probe_runtime())})
    deadline = time.monotonic() + budget - PROBE_CLEANUP_S - PROBE_GRACE_S

    def left() -> float:
        return max(1.0, deadline - time.monotonic())

    def fail(what: str) -> QconformError:
        return QconformError(_one_line(what, 1200), source=device.text, field="--device",
                             rule=f"the device answers and sets up the targets' runtimes within {budget:g} s")
    if not runtimes:   # (a net-run tool: no python needed) the connection only
        try:
            res = t.run(["true"], timeout=left(), grace=PROBE_GRACE_S)
        except TransportError as e:
            raise fail(f"the device does not answer: {e}") from None
        if res.rc != 0:
            raise fail(f"the device does not run a command (`true`: exit {res.rc}): {res.tail(300)}")
        for tg in targets:
            tg._probed = True
        return
    stage = Path(tempfile.mkdtemp(prefix="qcprobe"))
    ws = t.workspace(f"qconform-probe-{first._uid}")
    try:
        shutil.copy(RUNNER, stage / "device_runner.py")
        try:
            t.push(stage, ws, timeout=left())
        except TransportError as e:
            raise fail(f"the device does not answer: {e}") from None
        try:
            res = t.run([t.python, f"{ws}/device_runner.py", "--probe", *runtimes], timeout=left(),
                        grace=PROBE_GRACE_S)
        except TransportError as e:
            raise fail(f"the connection was lost during the probe: {e}") from None
        finally:
            try:
                t.cleanup(ws, timeout=PROBE_CLEANUP_S)
            except TransportError:
                pass
    finally:
        shutil.rmtree(stage, ignore_errors=True)
    if res.timed_out or res.rc in REMOTE_TIMEOUT_RCS:
        raise fail(f"the device's python ({t.python}) did not set up {', '.join(runtimes)} within {budget:g} s")
    try:
        facts = json.loads(res.stdout.strip().splitlines()[-1]) if res.rc == 0 else None
    except (ValueError, IndexError):
        facts = None
    if not isinstance(facts, dict):
        said = [ln for ln in res.tail(2000).splitlines() if ln.strip()]   # a traceback's last line says why
        raise fail(f"the device's python ({t.python}) cannot run the device runner (exit {res.rc}: "
                   f"{said[-1] if said else 'no output'}); it needs Python 3 and NumPy there: install them, "
                   f"or name the interpreter with ?python=/path/to/python3")
    errors = facts.pop("runtime_errors", None) or {}
    if errors:
        needs = []
        for rt, why in sorted(errors.items()):
            names = ", ".join(tg.name for tg in targets if tg.probe_runtime() == rt)
            needs.append(f"{names} needs {rt}, which the device's python ({t.python}) cannot set up ({why}): "
                         f"pip install {RUNTIME_PACKAGES.get(rt, rt)} for that python")
        raise fail("; ".join(needs) + "; or name a python that has it with ?python=/path/to/python3")
    per_runtime = facts.pop("runtimes", None) or {}
    facts.update(t.facts())   # what the device cannot tell itself (an emulator: emulated, its CPU)
    for tg in targets:
        tg._probed = True
        rt = tg.probe_runtime()
        if rt:
            tg._facts = {**facts, **per_runtime.get(rt, {}), **{k: str(v) for k, v in tg.runtime_options().items()}}


def device_targets(names: Sequence[str], device: DeviceSpec | None, devices: Sequence[DeviceSpec],
                   target_options: dict[str, dict] | None = None) -> dict[str, Target]:
    """The targets of a ``--device`` run: each name bound to ``device`` (None: the xdist controller,
    which gets a :class:`FarmView` per name). Every device is probed once here, before any case
    (:func:`probe_device`; by the controller for a farm, all devices at once).

    Raises QconformError for a target that has no device form, is not available, or whose
    device fails its probe.
    """
    target_options = target_options or {}
    if device is None:
        for n in names:
            if not (n in REMOTABLE or takes_device(n)):
                remote_target(n, devices[0])   # raises the explanation
        with ThreadPoolExecutor(max_workers=max(1, len(devices))) as pool:   # each waits on its device
            results = list(pool.map(lambda d: _bind_and_probe(names, d, target_options, close=True), devices))
        errors = [e for e in results if isinstance(e, QconformError)]
        if len(errors) == 1:
            raise errors[0]
        if errors:
            raise QconformError(f"{len(errors)} of {len(devices)} devices failed their probe: "
                                + "; ".join(f"{e.source}: {e.detail}" for e in errors), field="--device",
                                rule=errors[0].rule)
        return {n: FarmView(n, devices, **dict(target_options.get(n, {}))) for n in names}
    # a farm's worker: the controller probed its device
    out = _bind_and_probe(names, device, target_options, probe=len(devices) < 2)
    if isinstance(out, QconformError):
        raise out
    return out


def _bind_and_probe(names: Sequence[str], device: DeviceSpec, target_options: dict[str, dict],
                    probe: bool = True, close: bool = False) -> "dict[str, Target] | QconformError":
    """The targets of ``names`` on ``device`` (sharing its connection), checked and probed; or the error."""
    out: dict[str, Target] = {}
    shared: Transport | None = None    # the targets of one device share its connection
    try:
        for n in names:
            opts = dict(target_options.get(n, {}))
            t = get_target(n, device=device, **opts) if takes_device(n) else remote_target(n, device, **opts)
            out[n] = t
            if isinstance(t, RemoteTarget) and t.device.label == device.label:
                shared = shared or t.transport
                t._transport = shared
            check = t.host_availability if isinstance(t, RemoteTarget) else t.availability
            ok, why = check()
            if not ok:
                raise QconformError(f"target '{n}' cannot run on {device.label}: {why}", field="--device",
                                    rule="requested targets must be available")
        remote = [t for t in out.values() if isinstance(t, RemoteTarget) and t._transport is shared]
        if probe and remote:
            probe_device(remote)
    except QconformError as e:
        close = True
        return e
    finally:
        if close and shared is not None:
            shared.close()
    return out


def device_for_process(devices: Sequence[DeviceSpec], workerinput: dict | None) -> DeviceSpec | None:
    """The device this pytest process drives: worker gw<k> gets device k; a lone process the only one."""
    if not devices:
        return None
    if workerinput is None:
        return devices[0] if len(devices) == 1 else None
    k = workerinput.get("qconform_device")
    if k is None:
        wid = str(workerinput.get("workerid", "gw0"))
        k = int(wid[2:]) if wid[2:].isdigit() else 0
    if not 0 <= int(k) < len(devices):
        raise QconformError(f"worker {workerinput.get('workerid')} has no device (only {len(devices)} given)",
                            field="--device", rule="one xdist worker per device")
    return devices[int(k)]


def plan_workers(option, has_xdist: bool) -> None:
    """Before xdist reads its options: several devices -> one worker per device.

    ``-n`` absent: set to the number of devices; ``-n auto``: resolved by
    ``pytest_xdist_auto_num_workers`` to the same number; any other ``-n`` must
    equal it. ``--dist`` becomes ``each`` (every device runs every case) or, with
    ``--device-dist=shard``, xdist's ``loadscope``: the suite's tests are one class per
    (op, target), so each group runs, batched, on one device.
    """
    devices = parse_device_list(getattr(option, "device", None))
    if len(devices) < 2:
        return
    if not has_xdist:
        raise QconformError(f"{len(devices)} devices need pytest-xdist (one worker per device): "
                            f"pip install pytest-xdist", field="--device", rule="one xdist worker per device")
    n = getattr(option, "numprocesses", None)
    if n == 0:
        raise QconformError(f"-n 0 with {len(devices)} devices", field="--device",
                            rule="one xdist worker per device")
    if n is None:
        option.numprocesses = len(devices)
    elif n not in ("auto", "logical") and int(n) != len(devices):
        raise QconformError(f"-n {n} with {len(devices)} devices (drop -n, or give -n {len(devices)})",
                            field="--device", rule="one xdist worker per device")
    want = "loadscope" if getattr(option, "device_dist", "each") == "shard" else "each"
    if getattr(option, "dist", "no") not in ("no", want):
        raise QconformError(f"--dist {option.dist} with several devices (the suite uses --dist {want} for "
                            f"--device-dist={getattr(option, 'device_dist', 'each')})", field="--dist",
                            rule="one xdist worker per device")
    option.dist = want
