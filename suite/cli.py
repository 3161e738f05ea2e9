"""The ``qconform`` command line.

Each subcommand lives in ``suite/commands/<name>.py`` and defines
``register(subparsers)``, which adds its parser and sets ``func(args) -> int``.
Only the command given is imported (the others' runtimes and libraries cost seconds): the
top-level help lists :data:`COMMANDS` (tests/test_daily.py checks it against the modules).
A :class:`~suite.errors.QconformError` is printed as one line (no traceback)
with exit status 2.
"""

from __future__ import annotations

import argparse
import importlib
import pkgutil
import sys
from pathlib import Path

from suite import __version__, commands
from suite.core.errors import QconformError


#: each command's one-line help, as its module registers it (the top-level help imports none)
COMMANDS = {
    "bench": "benchmarks: golden vs tflite-ref, cases/s per target (batching on/off), the default run's wall "
             "time and each mechanism's share of it",
    "cases": "write the generated cases of a seed as case files (and goldens)",
    "certify": "verify a certificate (make one with `pytest --certify`)",
    "diff": "regressions of a run against a baseline run (exit 1 if any, 2 if not comparable)",
    "encodings": "show an SNPE/AIMET encodings file as case quantization parameters",
    "golden": "compute the golden output of case files",
    "harvest": "a model's quantized layers as case files",
    "keygen": "make an Ed25519 key pair to sign certificates with (pytest --certify)",
    "history": "every run under a report directory: failing since, flaky cases, trend",
    "hunt": "search each op's parameter space for cases a target gets wrong",
    "merge": "one run folder of the shards of a run (pytest --shard=K/N)",
    "report": "rebuild a run's summary, results.parquet and index.html",
    "repro": "judge a failure file again, as strictly as its run did (exit 1: still fails)",
    "shrink": "reduce a failing case to a smaller one that still fails",
    "targets": "list targets, available or not, and why",
    "witness": "run saved cases on every available target: who gives the golden's value",
}


def build_parser(only: str | None = None) -> argparse.ArgumentParser:
    """The parser: every command's own (``only=None``), or ``only``'s and the others' names."""
    p = argparse.ArgumentParser(prog="qconform", description="Conformance suite for quantized operators. "
                                "Run the suite itself with `pytest --target=...`.")
    p.add_argument("--version", action="version", version=f"qconform {__version__}")
    sub = p.add_subparsers(dest="command", metavar="COMMAND")
    names = sorted(m.name for m in pkgutil.iter_modules(commands.__path__)) if only is None else sorted(COMMANDS)
    for name in names:
        if only is not None and name != only:
            sub.add_parser(name, help=COMMANDS[name], add_help=False)
            continue
        mod = importlib.import_module(f"{commands.__name__}.{name}")
        if hasattr(mod, "register"):
            mod.register(sub)
    return p


def _command(argv: list[str]) -> str:
    """The command named on the command line ("" for none: only the top-level parser)."""
    for a in argv:
        if not a.startswith("-"):
            return a if a in COMMANDS else ""
    return ""


def main(argv: list[str] | None = None) -> int:
    # `--target pkg.mod:Class` imports from the current folder, as `pytest` (rootdir) and
    # `python -m` do: the installed `qconform` script alone would not look there
    if "" not in sys.path and str(Path.cwd()) not in sys.path:
        sys.path.insert(0, str(Path.cwd()))
    argv = sys.argv[1:] if argv is None else list(argv)
    parser = build_parser(only=_command(argv))
    args = parser.parse_args(argv)
    if not getattr(args, "func", None):
        parser.print_help()
        return 2
    try:
        return int(args.func(args) or 0)
    except QconformError as e:
        print(f"qconform: error: {e}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("qconform: interrupted", file=sys.stderr)
        return 130
    except BrokenPipeError:
        return 0


if __name__ == "__main__":
    sys.exit(main())
