"""``ort``: ONNX Runtime CPU on a QDQ ONNX model (full graph optimization, as users run it)."""

from __future__ import annotations

import time
from collections import OrderedDict


from suite.core.errors import Unsupported

from targets import onnx_model
from targets.onnx_model import load_onnx, load_onnxruntime
from targets.base import Outcome, Target, Timing
from targets.batching import (BatchFailed, BatchStats, batch_info, bisect, compat_key, digest_of, merge_onnx,
                       placement_by_case, placement_text)

REUSE_SESSIONS = 8   # sessions kept per target instance, by model digest (the same model recurs)


def short_error(e: Exception) -> str:
    text = str(e).strip()
    lines = [ln for ln in text.splitlines() if ln.strip()]
    return (lines[-1] if lines else type(e).__name__)[:600]


class OrtTarget(Target):
    name = "ort"
    description = "ONNX Runtime CPU execution provider, QDQ model, ORT_ENABLE_ALL"

    def availability(self):
        try:
            load_onnx()
            load_onnxruntime()
        except Exception as e:
            return False, f"onnx/onnxruntime not importable ({type(e).__name__}: {e}); pip install onnx onnxruntime"
        return True, "onnxruntime"

    def versions(self):
        onnx, onnxruntime = load_onnx(), load_onnxruntime()
        return {"onnxruntime": onnxruntime.__version__, "onnx": onnx.__version__,
                "opset": str(onnx_model.OPSET)}

    def unsupported(self, case):
        if case.op not in onnx_model.supported_ops():
            return f"no ONNX mapping for {case.op}"
        return None

    def session_options(self):
        ort = load_onnxruntime()
        so = ort.SessionOptions()
        so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
        so.intra_op_num_threads = 1
        so.inter_op_num_threads = 1
        so.log_severity_level = 3
        so.add_session_config_entry("session.record_ep_graph_assignment_info", "1")
        return so

    def session(self, model: onnx_model.OnnxModel):
        """A session of a one-case model; Unsupported (with the runtime's reason) if refused."""
        return self.open_session(model.content, None, model)[0]

    # ---- sessions: created, reused, checked
    def create_session(self, content: bytes):
        """A new session of ``content`` (raises whatever ONNX Runtime raises)."""
        return load_onnxruntime().InferenceSession(content, self.session_options(),
                                                   providers=["CPUExecutionProvider"])

    def refused(self, content: bytes, error: Exception, model=None) -> str:
        """Why the runtime refused a one-case model (the verdict's reason)."""
        return f"ONNX Runtime rejected the model: {short_error(error)}"

    def open_session(self, content: bytes, prefixes: list[str] | None, model=None):
        """(session, per-case placement) of a model, reusing a live session of the same bytes.

        ``prefixes``: the case prefixes of a merged batch model (None: one case). A batch the
        runtime refuses raises BatchFailed (to be split); one case raises Unsupported with the
        reason. The per-case placement (execution provider -> op types) is checked by
        :meth:`check_placement`."""
        key = digest_of(content)
        hit = self._sessions().get(key)
        if hit is not None:
            self._sessions().move_to_end(key)
            return hit
        stats = self.batch_stats
        t0 = time.perf_counter()
        stats.sessions += 1
        try:
            sess, placement = self._open(content, prefixes)
        except BatchFailed:
            stats.failed += 1
            raise
        except Unsupported:
            stats.failed += 1
            raise
        except Exception as e:
            stats.failed += 1
            if prefixes is not None:
                raise BatchFailed(short_error(e)) from None
            raise Unsupported(self.refused(content, e, model)) from None
        finally:
            stats.session_s += time.perf_counter() - t0
        try:
            sess.disable_fallback()   # a failing run must fail, never be retried on other providers
        except Exception:
            pass
        cache = self._sessions()
        cache[key] = (sess, placement)
        while len(cache) > REUSE_SESSIONS:
            cache.popitem(last=False)
        return sess, placement

    def _open(self, content: bytes, prefixes: list[str] | None):
        sess = self.create_session(content)
        return sess, placement_by_case(sess, prefixes)

    def batchable(self, model: onnx_model.OnnxModel) -> bool:
        """Whether a case's model may share a merged model with others (its verdict cannot
        depend on having the graph to itself)."""
        return True

    def check_placement(self, eps: dict[str, list[str]] | None) -> str | None:
        """The reason a case cannot count as run by this target, from where its nodes ran."""
        return None

    def _sessions(self) -> OrderedDict:
        if not hasattr(self, "_session_cache"):
            self._session_cache = OrderedDict()
        return self._session_cache

    @property
    def batch_stats(self) -> BatchStats:
        if not hasattr(self, "_batch_stats"):
            self._batch_stats = BatchStats()
        return self._batch_stats

    def close(self) -> None:
        self._sessions().clear()

    # ---- running
    def run_one(self, case, timing: Timing) -> Outcome:
        return self._run_model(case, onnx_model.build(case), timing)

    def _run_model(self, case, model: onnx_model.OnnxModel, timing: Timing) -> Outcome:
        """One case in its own session: its latency is its own ``session.run`` (scope "case")."""
        sess, placement = self.open_session(model.content, None, model)
        eps = placement[0] if placement else None
        why = self.check_placement(eps)
        if why:
            raise Unsupported(why)
        feeds = model.feeds(case)
        names = [o.name for o in model.outputs]
        spent = [0.0]

        def invoke():
            t0 = time.perf_counter()
            try:
                return onnx_model.run_session(sess, names, feeds)   # 4-bit outputs unpacked
            finally:
                spent[0] += time.perf_counter() - t0

        outs, samples = timing.measure(invoke)
        info = {"placement": placement_text(eps)} if eps is not None else self.placement(sess)
        return Outcome.ok(model.unpack(outs), samples, nodes=",".join(model.op_types),
                          latency_scope="case", invoke_s=round(spent[0], 6), **info)

    def _max_batch(self) -> int:
        """Cases per merged model (target option ``max_batch``; the runner's --batch-size decides
        how many a run() call gets; 1 = one model and session per case)."""
        return int(self.options.get("max_batch", 256))

    def run(self, cases, timing: Timing) -> list[Outcome]:
        """Run a batch as one merged ONNX model (targets.batching.merge_onnx) in one session.

        The cases' independent subgraphs run in one ``session.run``, which cannot be timed
        case by case (ONNX Runtime runs every node whatever outputs are asked for, and QNN
        fuses the whole graph into one node): a case of a batch gets no latency samples, and
        its row says ``latency_scope`` "batch" with the batch's run time (``batch_p50_us``)
        and size; the batch runs once (timed, without warm-up). A target that times each
        case's nodes inside the batch (openvino) overrides :meth:`invoke_batch`.
        ``--batch-size 1`` gives per-case latency (--warmup + --repeats runs). A batch the
        runtime refuses, or whose run fails, is split in halves (targets.batching.bisect)
        down to one case, which gets its own verdict and reason."""
        cases = list(cases)
        outs: list[Outcome | None] = [None] * len(cases)
        groups: dict[tuple, list] = {}
        for i, c in enumerate(cases):
            why = self.unsupported(c)
            if why:
                outs[i] = Outcome.unsupported(why)
                continue
            try:
                m = onnx_model.build(c)
                key = compat_key(m.content)
            except Unsupported as e:
                outs[i] = Outcome.unsupported(e.reason)
                continue
            except Exception as e:
                outs[i] = Outcome.from_exception(e)
                continue
            if self.batchable(m):
                groups.setdefault(key, []).append((i, c, m))
            else:
                outs[i] = self._single((i, c, m), timing)
        limit = max(1, self._max_batch())
        for items in groups.values():
            for start in range(0, len(items), limit):
                chunk = items[start:start + limit]
                res = bisect(chunk, lambda its: self._run_batch(its, timing),
                             lambda it: self._single(it, timing), self.batch_stats)
                for (i, _, _), o in zip(chunk, res):
                    outs[i] = o
        return outs

    def _single(self, item, timing: Timing) -> Outcome:
        _, case, model = item
        t0 = time.perf_counter()
        try:
            o = self._run_model(case, model, timing)
        except Unsupported as e:
            o = Outcome.unsupported(e.reason)
        except Exception as e:   # this case's error
            o = Outcome.from_exception(e)
        o.info.setdefault("target_s", round(time.perf_counter() - t0, 6))
        return o

    def _run_batch(self, items: list, timing: Timing) -> list[Outcome]:
        t0 = time.perf_counter()
        cases = [c for _, c, _ in items]
        batch = merge_onnx(cases, [m for _, _, m in items])
        sess, placement = self.open_session(batch.content, batch.prefixes)
        feeds = batch.feeds()
        names = batch.output_names()
        spent = [0.0]

        def invoke():
            t1 = time.perf_counter()
            try:
                return onnx_model.run_session(sess, names, feeds)
            finally:
                spent[0] += time.perf_counter() - t1

        try:
            outs, samples, per_case = self.invoke_batch(sess, invoke, batch.prefixes, timing)
        except Exception as e:
            raise BatchFailed(f"the batch's run failed: {short_error(e)}") from None
        n = len(items)
        per = batch.split(outs)
        share = (time.perf_counter() - t0) / n
        res = []
        for k, (case, outputs) in enumerate(zip(cases, per)):
            eps = placement[k] if placement else None
            why = self.check_placement(eps)
            info = {"target_s": round(share, 6), "invoke_s": round(spent[0] / n, 6), **batch_info(n, samples)}
            if why:
                o = Outcome.unsupported(why)
                o.info.update(info)
            else:
                if per_case is not None:   # the case's own nodes' time in the batch's runs
                    info["latency_scope"] = self.node_scope
                o = Outcome.ok(outputs, per_case[k] if per_case is not None else [], nodes=",".join(batch.op_types[k]),
                               **info, **({"placement": placement_text(eps)} if eps is not None else {}))
            res.append(o)
        return res

    #: a batch's per-case latency (:meth:`invoke_batch`), as its rows' ``latency_scope`` says
    node_scope = "nodes"

    def invoke_batch(self, sess, invoke, prefixes: list[str], timing: Timing):
        """(outputs, the batch's run times in µs, per-case latency samples or None) of a merged
        model. ONNX Runtime runs every node whatever outputs are asked for, and QNN fuses the
        whole graph into one node, so no case of a batch can be timed on its own here: one timed
        run gives the outputs (a target that can time its cases' nodes overrides this)."""
        outs, samples = Timing(warmup=0, repeats=1).measure(invoke)
        return outs, samples, None

    def placement(self, sess) -> dict:
        """Which execution provider ran which nodes (as ONNX Runtime recorded it)."""
        try:
            info = sess.get_provider_graph_assignment_info()
        except Exception:
            return {}
        parts = []
        for sub in info:
            ops = [n[1] if isinstance(n, tuple) else getattr(n, "op_type", str(n)) for n in sub.get_nodes()]
            parts.append(f"{sub.ep_name}: {','.join(ops)}")
        return {"placement": "; ".join(parts) if parts else "no node (constant-folded)"}
