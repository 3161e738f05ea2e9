"""The reports of a run, made from its results.jsonl (see docs/reports.md).

Modules, each importing only those before it (and the suite's core; causes also the golden):
results (the rows: reading, writing, atomic files) < causes (mismatch causes, best scheme)
< summary (summary.csv/.md, the terminal table) < plots (SVG charts) < html (index.html);
runinfo (run.json), parquet (results.parquet), certify (the certificate) and diff
(``qconform diff``) beside them; build (:func:`write_reports`, the one entry point) on top.
"""

from reports.build import Report, terminal_lines, write_reports

__all__ = ["Report", "terminal_lines", "write_reports"]
