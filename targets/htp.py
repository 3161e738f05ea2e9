"""``htp``: ONNX Runtime with onnxruntime-qnn's HTP backend (libQnnHtp.so).

On a Linux x86-64 host the HTP backend runs in simulation. CPU fallback is
disabled (``session.disable_cpu_ep_fallback=1``), so a model that does not run
wholly on HTP fails to load and the case is ``unsupported`` with QNN's reason:
nothing silently runs on the CPU.

Batches run as one merged QDQ model in one session (targets/ort.py, targets/batching.py);
a case whose nodes did not reach QNN (constant-folded) is ``unsupported`` on its own, and a
one-node model runs alone (QNN EP refuses a lone Q/DQ node it accepts inside a graph).
Compiled QNN contexts are kept in a cache folder keyed by the model digest (--cache-dir,
$QCONFORM_CACHE_DIR, default ~/.cache/qconform/qnn): a second run loads them instead of
preparing the graphs again.
"""

from __future__ import annotations

import os
import platform
import re
import sys
import tempfile
import threading
from pathlib import Path

from suite.core.errors import Unsupported
from targets.batching import ContextCache, cache_dir_of, placement_by_case
from targets.onnx_model import load_onnxruntime
from targets.ort import OrtTarget, short_error

_registered = False
_lock = threading.Lock()

#: ONNX Runtime's error when QNN EP's capability check left nodes to the (disabled) CPU EP: a
#: static function of the graph and the EP version, so a one-case refusal of this kind is
#: recorded in the context cache with its reason; other failures (graph finalization, memory)
#: are always tried again.
CAPABILITY_REFUSAL = "assigned to the default CPU EP"


def load_qnn():
    """The ``onnxruntime_qnn`` plug-in, imported on first use (every use goes through here): this
    module must load without it, so that a missing onnxruntime-qnn makes ``htp`` unavailable."""
    import onnxruntime_qnn
    return onnxruntime_qnn


def register_qnn():
    """Register the QNN execution provider library once per process; returns its devices."""
    global _registered
    ort = load_onnxruntime()
    with _lock:
        if not _registered:
            try:
                ort.register_execution_provider_library("QNNExecutionProvider", load_qnn().get_library_path())
            except Exception as e:  # already registered by someone else in this process
                if "already" not in str(e).lower():
                    raise
            _registered = True
    return [d for d in ort.get_ep_devices() if d.ep_name == "QNNExecutionProvider"]


def simulated() -> bool:
    """Whether onnxruntime-qnn's HTP backend is QNN's simulator here: on an x86-64 host there
    is no HTP, only the simulator (on an ARM64 Snapdragon device it is the HTP itself)."""
    return platform.machine().lower() in ("x86_64", "amd64")


class HtpTarget(OrtTarget):
    name = "htp"
    description = "Qualcomm HTP through onnxruntime-qnn (simulated on x86-64), CPU fallback disabled"

    @property
    def latency_cases(self) -> int | None:
        """0 where the HTP is simulated: no case runs alone for a latency that would be the
        simulator's run time on this host, not the HTP's (as the TOSA reference model's); on a
        device with an HTP, as --latency-cases says."""
        return 0 if simulated() else None

    def availability(self):
        try:
            load_onnxruntime()
            load_qnn()
        except Exception as e:  # noqa: BLE001 - any import failure makes the target unavailable
            return False, f"onnxruntime-qnn not importable ({type(e).__name__}: {e}); pip install onnxruntime-qnn"
        try:
            devs = register_qnn()
        except Exception as e:  # noqa: BLE001 - reported as the reason it is unavailable
            return False, f"QNN execution provider failed to register: {short_error(e)}"
        if not devs:
            return False, "QNN execution provider registered but reports no device"
        return True, "onnxruntime-qnn HTP backend"

    def versions(self):
        qnn = load_qnn()
        v = {"onnxruntime": load_onnxruntime().__version__, "onnxruntime-qnn": qnn.__version__,
             "htp_performance_mode": self.perf_mode}
        try:
            v["qnn_sdk"] = getattr(qnn.build_and_package_info, "qnn_version", "unknown")
        except Exception:  # noqa: BLE001, S110 - the SDK version is optional information
            pass
        return v

    #: onnxruntime-qnn's htp_performance_mode values (QNN EP configuration options)
    PERFORMANCE_MODES = ("burst", "balanced", "default", "high_performance", "high_power_saver", "low_balanced",
                         "extreme_power_saver", "low_power_saver", "power_saver", "sustained_high_performance")

    @property
    def perf_mode(self) -> str:
        return str(self.options.get("htp_performance_mode", "burst"))

    # ---- sessions (targets/ort.py drives them; batching and reuse live there)
    def qnn_options(self) -> dict[str, str]:
        return {"backend_path": load_qnn().get_qnn_htp_path(), "htp_performance_mode": self.perf_mode}

    def _session_options(self, context_file: Path | None = None):
        so = self.session_options()
        so.add_session_config_entry("session.disable_cpu_ep_fallback", "1")
        if context_file is not None:   # dump the compiled QNN context next to the run (the cache)
            so.add_session_config_entry("ep.context_enable", "1")
            so.add_session_config_entry("ep.context_file_path", str(context_file))
            so.add_session_config_entry("ep.context_embed_mode", "1")
        so.add_provider_for_devices(register_qnn(), self.qnn_options())
        return so

    def create_session(self, content: bytes):
        return load_onnxruntime().InferenceSession(content, self._session_options())

    @property
    def context_cache(self) -> ContextCache | None:
        """The QNN context cache (option ``cache_dir`` / --cache-dir, $QCONFORM_CACHE_DIR,
        default ~/.cache/qconform/qnn; ``off`` disables it). Its entries are authenticated
        with the user's key; an unsafe key file turns it off (``.enabled`` False) and a forged
        or damaged entry is ignored; ``.problems`` says which, for the harness to print."""
        if not hasattr(self, "_ctx_cache"):
            root = cache_dir_of(self.options.get("cache_dir"))
            self._ctx_cache = ContextCache(root) if root is not None else None
        return self._ctx_cache

    def _cache_key(self, content: bytes) -> str:
        opts = self.qnn_options()
        return self.context_cache.key(content, load_onnxruntime().__version__, load_qnn().__version__,
                                      Path(opts["backend_path"]).name, opts["htp_performance_mode"],
                                      "ORT_ENABLE_ALL", "embed=1")

    def _open(self, content: bytes, prefixes: list[str] | None):
        """A QNN session of ``content``: from the context cache when it holds the model, else
        compiled (and its context dumped into the cache). A batch QNN refused is recorded in
        the cache (the next run splits it at once); one case's refusal is always re-tried."""
        ort = load_onnxruntime()
        cache = self.context_cache
        if cache is None or not cache.enabled:
            sess = self.create_session(content)
            return sess, placement_by_case(sess, prefixes)
        key = self._cache_key(content)
        ctx, meta, failed = cache.lookup_bytes(key)   # verified (the context's bytes, not its path)
        stats = self.batch_stats
        if failed is not None:
            raise cache.refusal(failed, prefixes is not None, stats, "QNN HTP")
        if ctx is not None:
            try:
                sess = ort.InferenceSession(ctx, self._session_options())
                stats.cache_hits += 1
                return sess, meta.get("placement")
            except Exception:  # noqa: BLE001
                cache.forget(key)   # stale or damaged: compile again
        stats.cache_misses += 1
        dump = cache.dump_path(key)
        try:
            sess = ort.InferenceSession(content, self._session_options(dump))
        except Exception as e:
            if dump is not None and dump.exists():
                dump.unlink(missing_ok=True)
            if prefixes is not None:    # a hint only: the next run splits this batch at once
                cache.store_failure(key, short_error(e))
            elif CAPABILITY_REFUSAL in str(e):   # a static decision of QNN EP's GetCapability
                reason = self.refused(content, e)
                cache.store_failure(key, reason)
                raise Unsupported(reason) from None
            raise
        placement = placement_by_case(sess, prefixes)
        cache.store(key, dump, {"placement": placement, "cases": len(prefixes) if prefixes else 1})
        return sess, placement

    def refused(self, content: bytes, error: Exception, model=None) -> str:
        detail = self._qnn_reason(model if model is not None else _Bytes(content), register_qnn())
        return ("QNN HTP cannot run the whole model (CPU fallback disabled): "
                + (f"QNN says: {detail}" if detail else short_error(error)))

    def batchable(self, model) -> bool:
        """A one-node model runs alone: QNN EP treats a graph of a single node specially
        (it refuses a lone QuantizeLinear / DequantizeLinear, which it takes inside a
        larger graph), so that case's verdict must come from its own graph."""
        return len(model.op_types) > 1

    def check_placement(self, eps):
        if eps is not None and not eps.get("QNNExecutionProvider"):
            return ("no node of the model reached QNN HTP (ONNX Runtime folded it to constants): "
                    "HTP computed nothing")
        return None

    def _qnn_reason(self, model, devs) -> str:
        """Re-create the failing session with verbose logging and keep QNN's own words."""
        ort = load_onnxruntime()
        so = self.session_options()
        so.log_severity_level = 0
        so.add_session_config_entry("session.disable_cpu_ep_fallback", "1")
        so.add_provider_for_devices(devs, self.qnn_options())
        lines = _capture_stderr(lambda: ort.InferenceSession(model.content, so))
        ansi = re.compile(r"\x1b\[[0-9;]*m")
        hits = []
        for ln in lines:
            ln = ansi.sub("", ln)
            m = re.search(r"\[([VIWEF]):onnxruntime:[^\]]*\]\s*(.*)", ln)
            if not m:
                continue
            level, text = m.group(1), m.group(2).strip()
            low = text.lower()
            if "qnn" not in ln.lower() and "htp" not in ln.lower():
                continue
            keep = level in "WEF" or "failed" in low or "error" in low
            noise = ("fallback to cpu" in low or "file mapped weights" in low
                     or "epcontext encryption" in low)
            if not keep or text.endswith(":") or noise:
                continue   # e.g. an empty "Unsupported nodes in QNN EP:" list
            if text not in hits:
                hits.append(text)
        return " | ".join(hits[:3])[:800]



class _Bytes:
    """A stand-in model for :meth:`HtpTarget._qnn_reason` (it reads ``.content``)."""

    def __init__(self, content: bytes):
        self.content = content


def _capture_stderr(fn) -> list[str]:
    """Lines written to file descriptor 2 (where ONNX Runtime logs) while ``fn`` runs."""
    sys.stderr.flush()
    saved = os.dup(2)
    with tempfile.TemporaryFile(mode="w+b") as tmp:
        os.dup2(tmp.fileno(), 2)
        try:
            try:
                fn()
            except Exception:  # noqa: BLE001, S110 - the failure is expected: its log is the point
                pass
        finally:
            os.dup2(saved, 2)
            os.close(saved)
        tmp.seek(0)
        return tmp.read().decode("utf-8", "replace").splitlines()
