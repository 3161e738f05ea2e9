"""qconform benchmarks: what a nightly pays for, measured side by side on one machine.

Not part of the default test run. ``qconform bench`` (suite/commands/bench.py) drives them:

* :mod:`suite.bench.golden`     golden compute vs LiteRT ``tflite-ref`` invoke, per op, at realistic
                                sizes (:mod:`suite.bench.cases`), single-threaded, bit-exactness checked;
* :mod:`suite.bench.throughput` cases per second per target with batching on and off, and the share
                                of wall time spent in the target's own invoke;
* :mod:`suite.bench.suite_run`  the wall time of the default run (a whole ``pytest``), and of it
                                without each harness mechanism (``--ahead 0``, ``--golden-cache off``,
                                no golden memo: :mod:`suite.bench.no_memo`), interleaved.

docs/performance.md says what each number means and how it was measured.
"""
