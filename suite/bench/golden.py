"""Golden vs LiteRT ``tflite-ref``: time per case, side by side in one process, single-threaded.

For each realistic case (:mod:`suite.bench.cases`) the LiteRT interpreter with the reference
kernels (``OpResolverType.BUILTIN_REF``, ``num_threads=1``) is built once and its inputs set;
then, round after round, one ``interpreter.invoke()`` and one ``reference.golden(case)``
(the full golden call the suite makes, checks and casts included; OpenBLAS limited to one
thread) are timed alternately, so a load spike on a shared machine hits both sides. The
ratio is median(golden) / median(invoke); below 1.0 the golden is the faster. The outputs
are compared element by element (``bit_exact``, ``mismatches``).
"""

from __future__ import annotations

from dataclasses import asdict, dataclass

import numpy as np

from reference import golden
from suite.bench.cases import bench_cases
from suite.bench.timing import interleaved, median, single_threaded_blas
from suite.core.dtypes import DTYPES
from targets import tflite_model


@dataclass
class GoldenRow:
    op: str
    case: str
    golden_ms: float
    tflite_ref_ms: float
    ratio: float
    bit_exact: bool
    mismatches: int
    elements: int
    rounds: int

    def as_dict(self):
        return asdict(self)


def tflite_ref_invoker(case):
    """(invoke, fetch) for ``case`` on LiteRT's reference kernels, model built and inputs set."""
    from ai_edge_litert.interpreter import Interpreter, OpResolverType   # optional runtime
    built = tflite_model.build(case)
    it = Interpreter(model_content=built.content, experimental_op_resolver_type=OpResolverType.BUILTIN_REF,
                     num_threads=1)
    it.allocate_tensors()
    for det, ci in zip(it.get_input_details(), built.input_indices):
        t = case.inputs[ci]
        it.set_tensor(det["index"], np.asarray(t.data).astype(DTYPES[t.dtype].storage).reshape(t.shape))
    outs = it.get_output_details()
    return it.invoke, lambda: [np.array(it.get_tensor(d["index"])) for d in outs]


def bench_case(case, repeats: int = 7, min_time: float = 0.2, scheme: str = "tflite-ref-double") -> GoldenRow:
    invoke, fetch = tflite_ref_invoker(case)
    with single_threaded_blas():
        invoke()                                   # warm-up (first invoke allocates scratch)
        want = golden(case, scheme)
        samples = interleaved({"tflite": invoke, "golden": lambda: golden(case, scheme)}, repeats, min_time)
    got = fetch()
    mism = sum(int(np.count_nonzero(np.asarray(g).reshape(-1) != np.asarray(w).reshape(-1)))
               for g, w in zip(got, want))
    elements = sum(int(np.asarray(w).size) for w in want)
    g, t = median(samples["golden"]), median(samples["tflite"])
    return GoldenRow(case.op, case.id, g * 1e3, t * 1e3, g / t if t > 0 else float("inf"), mism == 0,
                     mism, elements, len(samples["golden"]))


def run(ops: list[str] | None = None, scale: int = 1, repeats: int = 7, min_time: float = 0.2,
        seed: int = 0) -> list[GoldenRow]:
    return [bench_case(c, repeats, min_time) for c in bench_cases(ops, scale, seed)]


def table(rows: list[GoldenRow]) -> str:
    head = f"{'op':<18} {'case':<42} {'golden ms':>10} {'tflite-ref ms':>13} {'ratio':>7} {'bit-exact':>9}"
    lines = [head, "-" * len(head)]
    for r in rows:
        exact = "yes" if r.bit_exact else f"NO ({r.mismatches}/{r.elements})"
        lines.append(f"{r.op:<18} {r.case:<42} {r.golden_ms:>10.3f} {r.tflite_ref_ms:>13.3f} "
                     f"{r.ratio:>7.3f} {exact:>9}")
    return "\n".join(lines)
