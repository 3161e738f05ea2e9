"""Measure: cases per second of the local ``htp`` target vs the same cases through ssh.

    python examples/devices/measure_ssh.py [N_CASES] [--device ssh:user@board?python=...]

Without --device it starts the throwaway sshd of the tests (tests/standins/sshd.py) on
127.0.0.1, so "the device" is this host and the difference is the transport and the
device runner's start-up. One batch of N cases (default 100) each way, in the same
process; prints cases/s and the round trips the remote batch cost.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("n", nargs="?", type=int, default=100)
    ap.add_argument("--device")
    ap.add_argument("--ops", default="ADD,SUB,MUL")
    ap.add_argument("--local-cache", default="off",
                    help="the local htp target's QNN context cache folder (default off: both sides compile)")
    a = ap.parse_args()
    import numpy as np
    from suite.cases.generate import generate
    from targets import get_target
    from targets.base import Timing
    from targets.remote import RemoteTarget
    ops = a.ops.split(",")
    cases = generate(ops, a.n // len(ops) + 1, 0)[: a.n]
    timing = Timing(warmup=1, repeats=5)
    sshd = None
    device = a.device
    if device is None:
        from tests.standins.sshd import start_sshd
        sshd = start_sshd(Path(tempfile.mkdtemp(prefix="qcsshd")))
        device = sshd.device(python=sys.executable)
    try:
        local = get_target("htp", cache_dir=a.local_cache)
        ok, why = local.availability()
        if not ok:
            print(f"htp unavailable: {why}")
            return 1
        t0 = time.perf_counter()
        lo = local.run(cases, timing)
        t_local = time.perf_counter() - t0
        remote = RemoteTarget("htp", device)
        t0 = time.perf_counter()
        ro = remote.run(cases, timing)
        t_remote = time.perf_counter() - t0
        same = sum(a.status == b.status and (a.outputs is None or all(np.array_equal(x, y) for x, y in
                                                                         zip(a.outputs, b.outputs)))
                   for a, b in zip(lo, ro))
        print(f"{len(cases)} cases ({a.ops}), one batch, warmup 1 + 5 timed runs per case")
        print(f"local htp : {t_local:7.2f} s  (context cache {a.local_cache})  {len(cases) / t_local:6.1f} cases/s")
        print(f"ssh   htp : {t_remote:7.2f} s  {len(cases) / t_remote:6.1f} cases/s  "
              f"round trips {remote.transport.round_trips} (push, run, pull, cleanup)")
        print(f"identical outcomes: {same}/{len(cases)}")
        remote.close()
    finally:
        if sshd is not None:
            sshd.stop()
            import shutil
            shutil.rmtree(sshd.folder, ignore_errors=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
