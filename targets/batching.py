"""Batching shared by the LiteRT and ONNX Runtime targets: many cases, one model, one session.

Building a model and a session per case dominates small cases (an HTP session costs about
0.1 s, the op often runs in microseconds). A target's ``run(cases, timing)`` therefore puts
the independent cases of a batch into one model:

* ONNX (``ort``, ``htp``): :func:`merge_onnx` joins the cases' one-op QDQ graphs into one
  graph; every name of case ``k`` gets the prefix ``c<k>_`` (``onnx.compose.add_prefix``)
  and every node a name, so ONNX Runtime's placement info says which case a node belongs to.
* LiteRT (``tflite``, ``tflite-ref``): :func:`build_tflite_batch` writes one .tflite with one
  subgraph and one SignatureDef per case (operator codes and buffers shared).

A batch that fails as a whole (a case HTP cannot compile makes session creation fail) is
split in two and each half retried (:func:`bisect`), so one bad case costs O(log N) extra
sessions and every case keeps its own verdict and reason: a batch of one is the target's
ordinary single-case path.

The QNN context cache (:class:`ContextCache`) keeps the compiled HTP context of a model,
keyed by the digest of the model and everything that changes the compiled graph, so a
second run (and a device reusing the cache) skips QNN graph preparation.
"""

from __future__ import annotations

import hashlib
import json
import os
import stat
import tempfile
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from suite.core.errors import Unsupported
from suite.core.keyed import KeyProblem, mac, user_key, verify
from targets.base import Outcome
from targets.onnx_model import load_onnx
from targets.tflite_model import _subgraph, operator_codes, schema, serialize

DEFAULT_CACHE_DIR = "~/.cache/qconform/qnn"
CACHE_ENV = "QCONFORM_CACHE_DIR"
CONTEXT_FORMAT = "qconform-qnn-context/2 hmac-sha256"   # in every entry's MAC
MAX_SIDECAR_BYTES = 16 << 20
#: the largest compiled artifact (QNN context, OpenVINO blob, TOSA flatbuffer) read back
MAX_ARTIFACT_BYTES = 4 << 30
_NOFOLLOW = getattr(os, "O_NOFOLLOW", 0)
_NONBLOCK = getattr(os, "O_NONBLOCK", 0)   # a FIFO planted in the cache must not block a read


# ----------------------------------------------------------------------------- bisection

class BatchFailed(Exception):
    """A batch could not run as a whole (session creation or run failed): split it."""


@dataclass
class BatchStats:
    """What batching cost in one target instance (sessions built, failed, cached)."""

    batches: int = 0            # batches of more than one case that ran as a whole
    cases: int = 0
    sessions: int = 0           # sessions (interpreters) created, successful or not
    failed: int = 0             # of which failed (each failure splits its batch)
    session_s: float = 0.0      # wall time creating them
    cache_hits: int = 0
    cache_misses: int = 0

    def as_dict(self) -> dict[str, Any]:
        return dict(vars(self))


def bisect(items: Sequence, attempt: Callable[[list], list], single: Callable[[Any], Outcome],
           stats: BatchStats | None = None) -> list[Outcome]:
    """One outcome per item: ``attempt(items)`` runs them as one batch (raising
    :class:`BatchFailed` when the batch fails as a whole); a failed batch is split in two
    halves, each retried the same way, down to ``single(item)`` for one item."""
    items = list(items)
    if not items:
        return []
    if len(items) == 1:
        return [single(items[0])]
    try:
        outs = attempt(items)
        if stats is not None:
            stats.batches += 1
            stats.cases += len(items)
        return outs
    except BatchFailed:
        mid = len(items) // 2
        return bisect(items[:mid], attempt, single, stats) + bisect(items[mid:], attempt, single, stats)


def batch_info(n: int, samples_us: list[float] | None = None) -> dict[str, Any]:
    """Row info of a case that ran inside a batch of ``n`` whose runs could not be timed per
    case: the batch's median run time, labelled as such (never the case's latency)."""
    info: dict[str, Any] = {"batch_size": n, "latency_scope": "batch"}
    if samples_us:
        info["batch_p50_us"] = round(float(np.median(samples_us)), 3)
    return info


# ----------------------------------------------------------------------------- ONNX

PREFIX = "c{}_"


@dataclass
class OnnxBatch:
    """A merged ONNX model of several cases and how to feed it and split its outputs."""

    content: bytes
    cases: list
    models: list                     # targets.onnx_model.OnnxModel of each case
    prefixes: list[str]
    digest: str = ""
    op_types: list[list[str]] = field(default_factory=list)

    def feeds(self) -> dict[str, Any]:
        feeds: dict[str, Any] = {}
        for p, m, c in zip(self.prefixes, self.models, self.cases):
            for name, arr in m.feeds(c).items():
                feeds[p + name] = arr
        return feeds

    def output_names(self) -> list[str]:
        return [p + o.name for p, m in zip(self.prefixes, self.models) for o in m.outputs]

    def split(self, outs: list) -> list[list[np.ndarray]]:
        """The session's outputs (in :meth:`output_names` order) as each case's outputs."""
        res, k = [], 0
        for m in self.models:
            n = len(m.outputs)
            res.append(m.unpack(list(outs[k:k + n])))
            k += n
        return res


def compat_key(content: bytes) -> tuple:
    """Cases can share a merged model when their IR version and opset imports agree."""
    p = load_onnx().load_from_string(content)
    return (p.ir_version, tuple(sorted((o.domain, o.version) for o in p.opset_import)))


def merge_onnx(cases: list, models: list) -> OnnxBatch:
    """One ONNX model holding every case's graph, names prefixed ``c<k>_``."""
    onnx = load_onnx()
    compose, helper = onnx.compose, onnx.helper
    nodes, inits, inputs, outputs, value_info, op_types = [], [], [], [], [], []
    opsets: dict[str, int] = {}
    ir = 0
    prefixes = []
    for k, m in enumerate(models):
        p = onnx.load_from_string(m.content)
        for j, n in enumerate(p.graph.node):
            if not n.name:
                n.name = f"n{j}"
        prefix = PREFIX.format(k)
        compose.add_prefix(p, prefix, inplace=True)
        nodes.extend(p.graph.node)
        inits.extend(p.graph.initializer)
        inputs.extend(p.graph.input)
        outputs.extend(p.graph.output)
        value_info.extend(p.graph.value_info)
        op_types.append([n.op_type for n in p.graph.node])
        for o in p.opset_import:
            opsets[o.domain] = max(opsets.get(o.domain, 0), o.version)
        ir = max(ir, p.ir_version)
        prefixes.append(prefix)
    graph = helper.make_graph(nodes, "qconform-batch", inputs, outputs, inits, value_info=value_info)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid(d, v) for d, v in sorted(opsets.items())],
                              producer_name="qconform")
    model.ir_version = ir
    content = model.SerializeToString()
    return OnnxBatch(content, list(cases), list(models), prefixes, digest_of(content), op_types)


def digest_of(content: bytes, *extra: str) -> str:
    h = hashlib.sha256(content)
    for e in extra:
        h.update(b"\0" + e.encode())
    return h.hexdigest()[:32]


def case_of_node(name: str, prefixes: list[str]) -> int | None:
    """The batch position of the case a node (``c<k>_...``) belongs to, or None."""
    if not name.startswith("c"):
        return None
    head, sep, _ = name.partition("_")
    if not sep or not head[1:].isdigit():
        return None
    k = int(head[1:])
    return k if k < len(prefixes) else None


def placement_by_case(sess, prefixes: list[str] | None) -> list[dict[str, list[str]]] | None:
    """Per case: execution provider -> the op types of the case's nodes it runs (None if
    ONNX Runtime does not record the assignment). ``prefixes`` None: a one-case model."""
    try:
        info = sess.get_provider_graph_assignment_info()
    except Exception:  # noqa: BLE001 - any runtime without the info (or failing to give it): unknown
        return None
    per: list[dict[str, list[str]]] = [{} for _ in range(len(prefixes) if prefixes else 1)]
    for sub in info:
        for node in sub.get_nodes():
            k = case_of_node(getattr(node, "name", ""), prefixes) if prefixes else 0
            if k is not None:
                per[k].setdefault(sub.ep_name, []).append(getattr(node, "op_type", "?"))
    return per


def placement_text(eps: dict[str, list[str]]) -> str:
    if not eps:
        return "no node (constant-folded)"
    return "; ".join(f"{ep}: {','.join(ops)}" for ep, ops in eps.items())


# ----------------------------------------------------------------------------- QNN context cache

#: the targets with a cache of compiled models (option ``cache_dir``, --cache-dir)
CACHED_TARGETS = ("htp", "openvino", "tosa")


def cache_dir_of(option: str | None, default: str = DEFAULT_CACHE_DIR, sub: str | None = None) -> Path | None:
    """The context-cache folder: the option, else $QCONFORM_CACHE_DIR (its folder ``sub`` when
    given), else ``default`` (~/.cache/qconform/qnn); ``off`` / ``none`` / empty disables the cache."""
    value = option if option is not None else os.environ.get(CACHE_ENV)
    if value is None:
        return Path(os.path.expanduser(default))
    if str(value).strip().lower() in ("", "off", "none", "0", "no"):
        return None
    root = Path(os.path.expanduser(str(value)))
    return root / sub if sub else root


class ContextCache:
    """Compiled QNN contexts on disk, one per model digest, every entry authenticated.

    ``<key>.onnx`` is the EPContext model ONNX Runtime dumps (``ep.context_enable=1``,
    ``ep.context_embed_mode=1``: the context binary inside it); ``<key>.json`` holds what
    the harness learnt when it compiled the model (where each case's nodes ran), since a
    context model no longer holds the original nodes. ``<key>.fail.json`` records a model
    QNN refused, with the reason, so it is not compiled again. The key covers the model
    bytes, the QNN options and the runtime versions; files are written atomically.

    Every entry carries an HMAC-SHA256 under the user's secret key (:mod:`suite.core.keyed`):

    * ``<key>.json`` is ``{"format": CONTEXT_FORMAT, "meta": {...}, "mac": hex}``, the MAC
      over the format, ``"context"``, the cache key, the bytes of ``<key>.onnx`` and the
      canonical JSON of ``meta`` (sorted keys, no spaces, ASCII);
    * ``<key>.fail.json`` is ``{"format": CONTEXT_FORMAT, "record": {"reason", "time"}, "mac": hex}``,
      the MAC over the format, ``"failure"``, the cache key and the canonical JSON of ``record``.

    An entry that does not verify (forged, written by another user or an older qconform,
    damaged, or a context and sidecar of two different writers) is ignored, as if absent: the
    model is compiled (or tried) again and the entry rewritten; each such file is one line in
    ``problems``. ``key`` None reads the user's key; when its file is unsafe the cache is off
    (nothing is read or written; ``problems`` says why).

    Other compiled artifacts use the same class with their own ``kind`` (in messages),
    ``suffix`` (the artifact's file name) and ``fmt`` (in every MAC, so an entry of one kind
    never verifies as another's); :meth:`store_bytes` stores an artifact held in memory.
    """

    def __init__(self, root: Path, key: bytes | None = None, kind: str = "QNN context",
                 suffix: str = ".onnx", fmt: str = CONTEXT_FORMAT):
        self.root = Path(root)
        self.problems: list[str] = []
        self.kind, self.suffix, self.format = kind, suffix, fmt
        if key is None:
            try:
                key = user_key()
            except KeyProblem as e:
                self._problem(f"{kind} cache off: key unsafe: {e}")
        elif not isinstance(key, (bytes, bytearray)) or not key:
            raise ValueError("ContextCache: key must be non-empty bytes (or None for the user's key)")
        self._secret = bytes(key) if key is not None else None

    @property
    def enabled(self) -> bool:
        """False when the key is unsafe: then the cache neither reads nor writes."""
        return self._secret is not None

    def key(self, content: bytes, *parts: str) -> str:
        return digest_of(content, *parts)

    def paths(self, key: str) -> tuple[Path, Path, Path]:
        return self.root / f"{key}{self.suffix}", self.root / f"{key}.json", self.root / f"{key}.fail.json"

    def lookup(self, key: str) -> tuple[Path | None, dict | None, dict | None]:
        """(context model, its sidecar, a recorded failure) of ``key``, verified; missing (or
        unverified) parts are None."""
        ctx, meta, data = self.lookup_bytes(key)
        return (self.paths(key)[0] if ctx is not None else None), meta, data

    def lookup_bytes(self, key: str) -> tuple[bytes | None, dict | None, dict | None]:
        """As :meth:`lookup`, with the context model's verified bytes instead of its path (load
        these, not the file again, which may have changed since)."""
        if self._secret is None:
            return None, None, None
        ctx, side, fail = self.paths(key)
        f = self._failure(key, fail)
        if f is not None:
            return None, None, f
        return self._context(key, ctx, side)

    def dump_path(self, key: str) -> Path | None:
        """A fresh temporary file name in the cache folder for ONNX Runtime to dump into
        (None when the cache is off or its folder cannot be made)."""
        if self._secret is None:
            return None
        try:
            self.root.mkdir(parents=True, exist_ok=True)
        except OSError:
            return None
        fd, name = tempfile.mkstemp(prefix=f".{key}.", suffix=f"_ctx{self.suffix}", dir=self.root)
        os.close(fd)
        os.unlink(name)          # ONNX Runtime refuses to overwrite an existing context file
        return Path(name)

    def store(self, key: str, dumped: Path | None, meta: dict) -> bool:
        """Keep the artifact a runtime dumped at ``dumped`` (a :meth:`dump_path`) as ``key``'s."""
        if self._secret is None or dumped is None or not dumped.exists():
            return False
        try:
            content = _read_regular(dumped, MAX_ARTIFACT_BYTES)
        except OSError:
            return False
        return self._seal(key, dumped, content, meta)

    def store_bytes(self, key: str, content: bytes, meta: dict) -> bool:
        """Keep an artifact held in memory as ``key``'s."""
        dump = self.dump_path(key)
        if dump is None:
            return False
        try:
            with open(dump, "xb") as f:
                f.write(content)
        except OSError:
            return False
        if self._seal(key, dump, content, meta):
            return True
        try:
            dump.unlink()
        except OSError:
            pass
        return False

    def _seal(self, key: str, dumped: Path, content: bytes, meta: dict) -> bool:
        """Move ``dumped`` (holding ``content``) into place with its authenticated sidecar."""
        ctx, side, fail = self.paths(key)
        try:
            meta = json.loads(json.dumps(meta))   # as it will read back
            tag = mac(self._secret, self.format, "context", key, content, _canonical(meta))
            os.replace(dumped, ctx)
            _write_json(side, {"format": self.format, "meta": meta, "mac": tag})
        except OSError:
            return False
        if fail.exists() and self._failure(key, fail, quiet=True) is None:
            try:                 # an unverified failure record of a key that compiled
                fail.unlink()
            except OSError:
                pass
        return True

    def store_failure(self, key: str, reason: str, **facts) -> None:
        """Record that the runtime refused ``key``'s model, why, and any JSON ``facts`` of the
        refusal (tosa: the cases the converter named), all under the entry's MAC."""
        if self._secret is None:
            return
        record = json.loads(json.dumps({**facts, "reason": reason, "time": time.time()}))
        tag = mac(self._secret, self.format, "failure", key, _canonical(record))
        try:
            self.root.mkdir(parents=True, exist_ok=True)
            _write_json(self.paths(key)[2], {"format": self.format, "record": record, "mac": tag})
        except OSError:
            pass

    def refusal(self, failed: dict, batch: bool, stats: BatchStats, runtime: str) -> Exception:
        """What a verified refusal record (``lookup_bytes``' third part) raises, counted as a hit:
        for a batch BatchFailed (a hint: it is split at once), for one case Unsupported with the
        recorded reason."""
        stats.cache_hits += 1
        if batch:
            return BatchFailed(f"recorded in the {self.kind} cache: {failed.get('reason', '')}")
        return Unsupported(failed.get("reason") or f"{runtime} refused the model (recorded in the cache)")

    def forget(self, key: str) -> None:
        for p in self.paths(key):
            try:
                p.unlink()
            except OSError:
                pass

    # ---- verification
    def _problem(self, line: str) -> None:
        if line not in self.problems:
            self.problems.append(line)

    def _failure(self, key: str, path: Path, quiet: bool = False) -> dict | None:
        doc = _read_json(path)
        if doc is None:
            if path.exists() and not quiet:
                self._problem(f"damaged {self.kind} cache entry at {path} (ignored)")
            return None
        record, tag = (doc.get("record"), doc.get("mac")) if isinstance(doc, dict) else (None, None)
        if (doc.get("format") if isinstance(doc, dict) else None) != self.format \
                or not isinstance(record, dict) or not isinstance(tag, str) \
                or not verify(self._secret, tag, self.format, "failure", key, _canonical(record)):
            if not quiet:
                self._problem(f"forged {self.kind} cache entry at {path}: its MAC does not verify "
                              "under this user's key (ignored; tried again)")
            return None
        return record

    def _context(self, key: str, ctx: Path, side: Path) -> tuple[bytes | None, dict | None, None]:
        doc = _read_json(side)
        if doc is None:
            if side.exists():
                self._problem(f"damaged {self.kind} cache entry at {side} (ignored)")
            return None, None, None
        try:
            content = _read_regular(ctx, MAX_ARTIFACT_BYTES)
        except FileNotFoundError:
            return None, None, None
        except OSError:
            self._problem(f"damaged {self.kind} cache entry at {ctx}: not a readable regular file (ignored)")
            return None, None, None
        meta, tag = (doc.get("meta"), doc.get("mac")) if isinstance(doc, dict) else (None, None)
        if (doc.get("format") if isinstance(doc, dict) else None) != self.format \
                or not isinstance(meta, dict) or not isinstance(tag, str) \
                or not verify(self._secret, tag, self.format, "context", key, content, _canonical(meta)):
            self._problem(f"forged {self.kind} cache entry at {side}: its MAC (over it and {ctx.name}) "
                          "does not verify under this user's key (ignored; compiled again)")
            return None, None, None
        return content, meta, None


def _canonical(obj) -> bytes:
    return json.dumps(obj, sort_keys=True, separators=(",", ":"), ensure_ascii=True).encode()


def _read_regular(p: Path, limit: int | None = None) -> bytes:
    """The bytes of the regular file ``p`` (not through a symbolic link; OSError otherwise,
    FileNotFoundError when absent)."""
    fd = os.open(p, os.O_RDONLY | _NOFOLLOW | _NONBLOCK)
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            raise OSError(f"{p} is not a regular file")
        if limit is not None and st.st_size > limit:
            raise OSError(f"{p} is larger than {limit} bytes")
    except OSError:
        os.close(fd)
        raise
    with os.fdopen(fd, "rb") as f:
        data = f.read() if limit is None else f.read(limit + 1)   # (a file grown since fstat)
    if limit is not None and len(data) > limit:
        raise OSError(f"{p} is larger than {limit} bytes")
    return data


def _read_json(p: Path) -> dict | None:
    try:
        return json.loads(_read_regular(p, MAX_SIDECAR_BYTES))
    except (OSError, ValueError, RecursionError):   # absent, unreadable, not JSON, nested too deep
        return None


def _write_json(p: Path, obj: dict) -> None:
    fd, name = tempfile.mkstemp(prefix=f".{p.name}.", suffix=".tmp", dir=p.parent)
    try:
        with os.fdopen(fd, "w") as f:
            f.write(json.dumps(obj))
        os.replace(name, p)
    except BaseException:
        try:
            os.unlink(name)
        except OSError:
            pass
        raise


# ----------------------------------------------------------------------------- LiteRT

@dataclass
class TfliteBatch:
    content: bytes
    runtime_inputs: list[list[int]]   # per case: case input index of each subgraph input
    input_tensors: list[list[int]]    # per case: tensor index of each subgraph input (same order)
    output_tensors: list[list[int]]   # per case: tensor index of each output
    keys: list[str]                   # per case: its SignatureDef key


def build_tflite_batch(cases: list) -> TfliteBatch:
    """One .tflite holding one single-op subgraph per case (subgraph k = case k) and a
    SignatureDef ``c<k>`` per subgraph; operator codes and buffers are shared. Each
    subgraph is exactly the one :func:`targets.tflite_model.build` writes for the case."""
    S = schema()
    model = S.ModelT()
    model.version = 3
    model.description = f"qconform batch of {len(cases)}"
    buffers = [S.BufferT()]
    codes: dict[int, int] = {}
    subgraphs, runtime, sigs, keys, ins, outs = [], [], [], [], [], []
    for k, case in enumerate(cases):
        sg, code, rt = _subgraph(case, buffers, S)
        if code not in codes:
            codes[code] = len(codes)
        for op in sg.operators:
            op.opcodeIndex = codes[code]
        subgraphs.append(sg)
        runtime.append(rt)
        ins.append([int(i) for i in sg.inputs])
        outs.append([int(i) for i in sg.outputs])
        key = PREFIX.format(k).rstrip("_")
        sig = S.SignatureDefT()
        sig.signatureKey = key
        sig.subgraphIndex = k
        sig.inputs = [_tensor_map(S, f"input{ci}", ti) for ci, ti in zip(rt, sg.inputs)]
        sig.outputs = [_tensor_map(S, f"output{j}", ti) for j, ti in enumerate(sg.outputs)]
        sigs.append(sig)
        keys.append(key)
    model.operatorCodes = operator_codes(S, codes)
    model.subgraphs = subgraphs
    model.buffers = buffers
    model.signatureDefs = sigs
    return TfliteBatch(serialize(model), runtime, ins, outs, keys)


def _tensor_map(S, name: str, index: int):
    t = S.TensorMapT()
    t.name = name
    t.tensorIndex = int(index)
    return t
