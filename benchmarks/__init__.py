"""qconform benchmarks: what a nightly pays for, measured side by side on one machine.

Not part of the default test run. ``qconform bench`` (suite/commands/bench.py) drives them:

* :mod:`benchmarks.golden`     golden compute vs LiteRT ``tflite-ref`` invoke, per op, at realistic
                               sizes (:mod:`benchmarks.cases`), single-threaded, bit-exactness checked;
* :mod:`benchmarks.throughput` cases per second per target with batching on and off, and the share
                               of wall time spent in the target's own invoke;
* :mod:`benchmarks.suite_run`  the wall time and harness share of a whole pytest run (the default run).

docs/performance.md says what each number means and how it was measured.
"""
