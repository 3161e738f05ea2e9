"""``openvino``: Intel's OpenVINO CPU plugin on the QDQ ONNX model the ``ort`` target builds.

``core.compile_model(core.read_model(onnx_bytes, b""), "CPU")``: OpenVINO's low-precision
transformations turn the QuantizeLinear/DequantizeLinear pairs around an op into its int8
kernel, as for an Intel CPU/NPU user's QDQ model. Batches are one merged model compiled once
(targets/ort.py, targets/batching.py). Compiling dominates, so compiled models are kept in an
authenticated cache (targets.batching.ContextCache; --cache-dir, $QCONFORM_CACHE_DIR, default
~/.cache/qconform/openvino): ``export_model`` after a compile, ``import_model`` on a hit. The key
covers the model bytes, the compile config, the OpenVINO build, and the CPU's ISA flags, OpenVINO's
optimization capabilities and default inference precision (its low-precision transformations
pick kernels and precisions by them), so a shared cache never serves another CPU's model.

Latency: models are compiled with ``PERF_COUNT`` (OpenVINO's per-node counters), so each case of
a batch gets its own samples without a model of its own: the time of its executed nodes in each
timed run of the merged model (``latency_scope`` "nodes", :func:`per_case_us`).
"""

from __future__ import annotations

import json
from types import SimpleNamespace

from suite.core.errors import Unsupported
from targets.base import Timing
from targets.batching import ContextCache, cache_dir_of, case_of_node
from targets.device_runner import OPENVINO_CONFIG, isa_flags
from targets.onnx_model import load_onnx
from targets.ort import OrtTarget

DEFAULT_CACHE_DIR = "~/.cache/qconform/openvino"
BLOB_FORMAT = "qconform-openvino-blob/1 hmac-sha256"   # in every entry's MAC
#: OpenVINO's words when it refuses a model for what the model is (a static function of the
#: model, the build and the CPU): a one-case refusal of this kind is recorded in the cache;
#: any other failure is tried again next run
STATIC_REFUSALS = ("No suitable implementations", "Conversion is failed for")

#: the ONNX element types OpenVINO's Python API takes and gives as NumPy arrays (not 4-bit)
_FOUR_BIT = ("int4", "uint4")

#: the compile config: the device runner's, with the per-node counters a batch's cases are timed by
CONFIG = {**OPENVINO_CONFIG, "PERF_COUNT": True}


def load_openvino():
    """``openvino``, imported on first use (every use goes through here), so that a missing
    openvino makes only this target unavailable."""
    import openvino
    return openvino


class _Session:
    """A compiled model seen through the little of ONNX Runtime's session that targets/ort.py
    uses (``get_outputs``, ``run``)."""

    def __init__(self, compiled):
        self.compiled = compiled
        self.request = compiled.create_infer_request()
        self.outputs = [SimpleNamespace(name=o.get_any_name(), type="") for o in compiled.outputs]
        self.fed = None

    def get_outputs(self):
        return self.outputs

    def run(self, names, feeds):
        if feeds is self.fed:   # a batch's runs again: its inputs are in the request already (copied)
            self.request.infer()
        else:
            self.request.infer(feeds)
            self.fed = feeds
        return [self.request.get_tensor(n).data.copy() for n in names]

    def profile(self) -> list[tuple[str, bool, float]]:
        """The last inference's nodes in execution order: (name, executed, µs)."""
        return [(p.node_name, p.status == p.Status.EXECUTED, p.real_time.total_seconds() * 1e6)
                for p in self.request.get_profiling_info()]


def per_case_us(profile: list[tuple[str, bool, float]], prefixes: list[str]) -> list[float] | None:
    """Each of a merged model's cases' time in one inference (``prefixes``: theirs), from OpenVINO's
    per-node counters in execution order; None when a node cannot be given to one case.

    The CPU plugin runs the cases' disjoint graphs one after another: a case's span opens with
    its first node named for it (``c<k>_...``, its Parameter first) and the nodes OpenVINO made
    (``Subtract_816``, reorders) inside the span are its own. A case whose span opens again
    after another's, or an executed node before any span, makes the split unsure: None."""
    per, cur, closed = [0.0] * len(prefixes), None, set()
    for name, executed, us in profile:
        k = case_of_node(name, prefixes)
        if k is not None and k != cur:
            if k in closed:
                return None
            if cur is not None:
                closed.add(cur)
            cur = k
        if executed:
            if cur is None:
                return None
            per[cur] += us
    return per


class OpenvinoTarget(OrtTarget):
    name = "openvino"
    description = "OpenVINO CPU plugin, QDQ ONNX model (low-precision transformations)"

    def availability(self):
        try:
            load_onnx()
            load_openvino()
        except Exception as e:   # ImportError or a broken wheel
            return False, f"openvino not importable ({type(e).__name__}: {e}); pip install openvino"
        return True, "openvino CPU"

    def versions(self):
        ov, onnx = load_openvino(), load_onnx()
        return {"openvino": ov.get_version().split("-")[0], "onnx": onnx.__version__}

    #: no case of a group runs alone for its latency: a batch times each case's nodes
    #: (:meth:`invoke_batch`), where a model of its own would cost a compile or an import
    latency_cases = 0
    #: its batches are the default run's longest (a model compiled or imported for each), so the
    #: run waits on this worker most: it runs above the other workers (10), still below pytest
    #: (docs/performance.md, "the openvino worker's priority")
    worker_nice = 4

    def invoke_batch(self, sess, invoke, prefixes, timing: Timing):
        """The batch's warm-up and timed runs (as one case alone gets); each case's samples are
        its nodes' time in each timed run (:func:`per_case_us`), or None for all when a run's
        nodes cannot be split by case (the rows then say ``latency_scope`` "batch")."""
        for _ in range(timing.warmup):
            invoke()
        outs, samples, splits = None, [], []
        for _ in range(max(1, timing.repeats)):   # (each run's counters are read before the next)
            outs, run = Timing(warmup=0, repeats=1).measure(invoke)
            samples += run
            splits.append(per_case_us(sess.profile(), prefixes))
        if any(split is None for split in splits):
            return outs, samples, None
        return outs, samples, [list(mine) for mine in zip(*splits)]

    def unsupported(self, case):
        for t in list(case.inputs) + list(case.outputs):
            if t.dtype in _FOUR_BIT:
                return f"OpenVINO's Python API has no {t.dtype} arrays to feed or fetch"
        return super().unsupported(case)

    def _core(self):
        if not hasattr(self, "_ov_core"):
            self._ov_core = load_openvino().Core()
        return self._ov_core

    def _compile(self, content: bytes):
        core = self._core()
        return core.compile_model(core.read_model(content, b""), "CPU", CONFIG)

    def create_session(self, content: bytes):
        return _Session(self._compile(content))

    def refused(self, content: bytes, error: Exception, model=None) -> str:
        return f"OpenVINO rejected the model: {_short(error)}"

    @property
    def blob_cache(self) -> ContextCache | None:
        """The compiled-model cache (option ``cache_dir`` / --cache-dir, $QCONFORM_CACHE_DIR,
        default ~/.cache/qconform/openvino; ``off`` disables it): as htp's context cache, its
        entries are authenticated with the user's key, a forged or damaged one is ignored."""
        if not hasattr(self, "_blob_cache"):
            root = cache_dir_of(self.options.get("cache_dir"), DEFAULT_CACHE_DIR)
            self._blob_cache = (ContextCache(root, kind="OpenVINO compiled model", suffix=".blob",
                                             fmt=BLOB_FORMAT) if root is not None else None)
        return self._blob_cache

    def cache_facts(self) -> list[str]:
        """What, besides the model bytes, decides the compiled model: the config, the OpenVINO
        build, the CPU's ISA and what OpenVINO makes of it (capabilities, default precision)."""
        if not hasattr(self, "_cache_facts"):
            core = self._core()
            self._cache_facts = [
                "openvino CPU", load_openvino().get_version(), json.dumps(CONFIG, sort_keys=True),
                "isa=" + " ".join(isa_flags()),
                "caps=" + " ".join(core.get_property("CPU", "OPTIMIZATION_CAPABILITIES")),
                "precision=" + str(core.get_property("CPU", "INFERENCE_PRECISION_HINT"))]
        return self._cache_facts

    def _open(self, content: bytes, prefixes):
        """A compiled model of ``content`` (OpenVINO records no per-node placement): imported
        from the cache when it holds the model, else compiled and exported into it. A batch
        OpenVINO refused is recorded (the next run splits it at once), and so is one case's
        refusal of a :data:`STATIC_REFUSALS` kind."""
        cache = self.blob_cache
        if cache is None or not cache.enabled:
            return self.create_session(content), None
        key = cache.key(content, *self.cache_facts())
        blob, _, failed = cache.lookup_bytes(key)   # verified bytes
        stats = self.batch_stats
        if failed is not None:
            raise cache.refusal(failed, prefixes is not None, stats, "OpenVINO")
        if blob is not None:
            try:
                sess = _Session(self._core().import_model(blob, "CPU", CONFIG))
                stats.cache_hits += 1
                return sess, None
            except Exception:  # noqa: BLE001
                cache.forget(key)   # stale or damaged: compile again
        stats.cache_misses += 1
        try:
            compiled = self._compile(content)
        except Exception as e:
            if prefixes is not None:   # a hint only: the next run splits this batch at once
                cache.store_failure(key, _short(e))
            elif any(m in str(e) for m in STATIC_REFUSALS):
                reason = self.refused(content, e)
                cache.store_failure(key, reason)
                raise Unsupported(reason) from None
            raise
        cache.store_bytes(key, _bytes(compiled.export_model()), {"cases": len(prefixes) if prefixes else 1})
        return _Session(compiled), None


def _bytes(blob) -> bytes:
    return blob.getvalue() if hasattr(blob, "getvalue") else bytes(blob)   # bytes or io.BytesIO by version


def _short(e: Exception) -> str:
    lines = [ln.strip() for ln in str(e).splitlines() if ln.strip()]
    # OpenVINO's messages end with its source location; the line before says what it refused
    useful = [ln for ln in lines if not ln.startswith(("Check ", "Exception from", "File "))]
    return (useful[-1] if useful else (lines[-1] if lines else type(e).__name__))[:600]
