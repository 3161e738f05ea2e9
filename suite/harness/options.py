"""The options of a run, checked once where they enter (pytest's command line, run.json of a
resumed run): a bad value is one QconformError naming the option and the rule."""

from __future__ import annotations

import difflib
from dataclasses import asdict, dataclass, field
from typing import Any

from reference import SCHEMES
from reference.schemes import DEFAULT_SCHEME, kernel_schemes
from suite.cases.generate import DEFAULT_CASES_PER_OP
from suite.core.errors import QconformError
from suite.core.spec import known_ops
from targets.htp import HtpTarget

DEFAULT_REPORT_ROOT = "reports"
DEFAULT_BATCH = 64
#: --cases-per-op at most: a run holds some 20-30 KB per test (pytest's item and report, the case,
#: its row), and a full run has 49 ops x 5 targets: 10,000 is already 2.45 million tests, tens of
#: GB; a larger value is a typo
MAX_CASES_PER_OP = 10_000
#: --warmup / --repeats at most: each is a run of every case on the target
MAX_REPEATS = 10_000
#: --seed: what results.parquet (int64) and NumPy's generators hold
MAX_SEED = (1 << 63) - 1


@dataclass(frozen=True)
class RunOptions:
    targets: tuple[str, ...]
    seed: int = 0
    cases_per_op: int = DEFAULT_CASES_PER_OP
    ops: tuple[str, ...] | None = None
    case_files: tuple[str, ...] = ()
    tolerance_file: str | None = None
    scheme: str = DEFAULT_SCHEME
    warmup: int = 1
    repeats: int = 5
    batch_size: int = DEFAULT_BATCH
    latency_cases: int = 3        # per (target, op), run alone: a merged batch has only a batch time
    timeout: float = 60.0         # seconds per case in a worker process
    ahead: int = 4                # batches a target's worker gets before their tests ask
    isolation: str = "process"
    witness_cases: int = 0        # failing cases also run on the local targets outside the run (witnesses;
                                  # pytest's --witness-cases: 200 by default)
    golden_cache: str | None = None
    waivers: tuple[str, ...] = ()
    certify: bool = False
    target_options: dict[str, dict[str, Any]] = field(default_factory=dict)

    def as_dict(self) -> dict[str, Any]:
        d = asdict(self)
        return {k: list(v) if isinstance(v, tuple) else v for k, v in d.items()}


def checked(**kw) -> RunOptions:
    """RunOptions from option values, each checked (QconformError naming the option)."""
    for name in ("cases_per_op", "repeats", "batch_size"):
        v = kw.get(name)
        if v is not None and v < 1:
            raise QconformError(f"must be >= 1 (got {v})", field="--" + name.replace("_", "-"))
    if (kw.get("cases_per_op") or 0) > MAX_CASES_PER_OP:
        raise QconformError(f"must be <= {MAX_CASES_PER_OP:,} (got {kw['cases_per_op']:,}): each case is a "
                            f"test per target, 20-30 KB of memory each", field="--cases-per-op",
                            rule=f"at most {MAX_CASES_PER_OP:,} cases per operator")
    for name in ("warmup", "repeats"):
        v = kw.get(name)
        if v is not None and v > MAX_REPEATS:
            raise QconformError(f"must be <= {MAX_REPEATS:,} (got {v:,})", field="--" + name,
                                rule=f"at most {MAX_REPEATS:,} invocations per case")
    seed = kw.get("seed")
    if seed is not None and not 0 <= seed <= MAX_SEED:
        raise QconformError(f"must be in [0, 2^63 - 1] (got {str(seed)[:40]}{'...' if len(str(seed)) > 40 else ''})",
                            field="--seed", rule="a seed is a non-negative 64-bit integer")
    mode = (kw.get("target_options") or {}).get("htp", {}).get("htp_performance_mode")
    if mode is not None and mode not in HtpTarget.PERFORMANCE_MODES:
        hint = did_you_mean(mode, HtpTarget.PERFORMANCE_MODES)
        raise QconformError(f"unknown mode '{mode}' ({hint + ' ' if hint else ''}known: "
                            f"{', '.join(HtpTarget.PERFORMANCE_MODES)})", field="--htp-performance-mode",
                            rule="onnxruntime-qnn's htp_performance_mode values")
    for name in ("warmup", "latency_cases", "ahead", "witness_cases"):
        v = kw.get(name)
        if v is not None and v < 0:
            raise QconformError(f"must be >= 0 (got {v})", field="--" + name.replace("_", "-"))
    t = kw.get("timeout")
    if t is not None and not (0 < t < float("inf")):
        raise QconformError(f"must be a finite number of seconds > 0 (got {t})", field="--case-timeout")
    scheme = kw.get("scheme") or DEFAULT_SCHEME
    if scheme not in SCHEMES:
        hint = did_you_mean(scheme, SCHEMES)
        raise QconformError(f"unknown scheme '{scheme}' ({hint + ' ' if hint else ''}known: {', '.join(SCHEMES)})",
                            field="--scheme")
    if scheme not in kernel_schemes():   # "exact" gives unrounded reals: no code could match them
        raise QconformError(f"'{scheme}' is not a kernel scheme (a run compares codes; known: "
                            f"{', '.join(kernel_schemes())})", field="--scheme",
                            rule="the golden of a run is rounded to codes")
    kw["scheme"] = scheme
    ops = kw.get("ops")
    if ops:
        bad = [x for x in ops if x not in known_ops()]
        if bad:
            named = [f"{x} ({hint})" if (hint := did_you_mean(x, known_ops())) else x for x in bad]
            raise QconformError(f"unknown operator(s) {', '.join(named)}", field="--ops",
                                rule="operators of the spec tables")
        kw["ops"] = tuple(ops)
    else:
        kw["ops"] = None
    if kw.get("cases_per_op") is None:
        kw["cases_per_op"] = DEFAULT_CASES_PER_OP
    for name in ("targets", "case_files", "waivers"):
        kw[name] = tuple(kw.get(name) or ())
    return RunOptions(**{k: v for k, v in kw.items() if v is not None or k in ("golden_cache", "tolerance_file")})


def check_given(o) -> None:
    """Options given with nothing in them mean a mistake, never "everything" (pytest's option
    namespace ``o``): ``--target=``, ``--target=,,,``, ``--ops=``, ``--report-dir=``, ``--hunt=-1``."""
    for opt, values in (("--target", o.target), ("--ops", o.ops), ("--case-file", o.case_file),
                        ("--waivers", o.waivers), ("--device", o.device)):
        if values and (not split_list(values) or any(not str(v).strip() for v in values)):
            raise QconformError(f"is given empty (got {','.join(map(repr, values))[:80]})", field=opt,
                                rule=f"{opt} names at least one value; leave it out for the default")
    for opt, v in (("--report-dir", o.report_dir), ("--tolerance", o.tolerance), ("--resume", o.resume),
                   ("--model", o.model)):
        if v is not None and not str(v).strip():
            raise QconformError("is given empty", field=opt, rule=f"{opt} names a path; leave it out for the default")
    if getattr(o, "model_input_shape", None) and not o.model:
        raise QconformError("sets the input shapes of a --model: give --model", field="--model-input-shape",
                            rule="--model-input-shape goes with --model")
    hunt = o.hunt
    if hunt is not None and not 0 < hunt < float("inf"):
        raise QconformError(f"must be a finite number of seconds > 0 (got {hunt})", field="--hunt")


def did_you_mean(word: str, known) -> str:
    """``"did you mean 'X'?"`` for the closest of ``known`` (case aside), or ""."""
    by_upper = {k.upper(): k for k in known}
    close = difflib.get_close_matches(str(word).upper(), list(by_upper), n=1)
    return f"did you mean '{by_upper[close[0]]}'?" if close else ""


def split_list(values) -> list[str]:
    """``--opt a,b --opt c`` -> [a, b, c] (order kept, duplicates dropped)."""
    out: list[str] = []
    for v in values or []:
        for part in str(v).split(","):
            part = part.strip()
            if part and part not in out:
                out.append(part)
    return out
