"""The reports of a run, made from its results.jsonl (see docs/reports.md).

Modules, each importing only those before it (and the suite's core; causes also the golden):
results (the rows: reading, writing, atomic files) < causes (mismatch causes, best scheme)
< summary (summary.csv/.md, the terminal table) < plots (SVG charts) < html (index.html);
runinfo (run.json), parquet (results.parquet), certify (the certificate) and diff
(``qconform diff``) beside them; build (:func:`write_reports`, the one entry point) on top.
"""

__all__ = ["Report", "terminal_lines", "write_reports"]


def __getattr__(name: str):
    """build's names, imported when first asked for: ``python -m reports.parquet`` (a child of every
    run) and the harness's ``reports.results`` need none of build's imports (NumPy, causes, certify)."""
    if name in __all__:
        from reports import build
        return getattr(build, name)
    raise AttributeError(f"module 'reports' has no attribute {name!r}")
