"""The ``qconform`` command line.

Each subcommand lives in ``suite/commands/<name>.py`` and defines
``register(subparsers)``, which adds its parser and sets ``func(args) -> int``.
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


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="qconform", description="Conformance suite for quantized operators. "
                                "Run the suite itself with `pytest --target=...`.")
    p.add_argument("--version", action="version", version=f"qconform {__version__}")
    sub = p.add_subparsers(dest="command", metavar="COMMAND")
    for m in sorted(pkgutil.iter_modules(commands.__path__), key=lambda m: m.name):
        mod = importlib.import_module(f"{commands.__name__}.{m.name}")
        if hasattr(mod, "register"):
            mod.register(sub)
    return p


def main(argv: list[str] | None = None) -> int:
    # `--target pkg.mod:Class` imports from the current folder, as `pytest` (rootdir) and
    # `python -m` do: the installed `qconform` script alone would not look there
    if "" not in sys.path and str(Path.cwd()) not in sys.path:
        sys.path.insert(0, str(Path.cwd()))
    parser = build_parser()
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
