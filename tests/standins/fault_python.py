"""STAND-IN for a misbehaving device runtime: runs the device runner with one case made to hang or crash.

Used as the device's Python (through a two-line shell wrapper written by the tests):
``fault_python.py MODE TAG device_runner.py manifest.json`` loads the real
``device_runner.py`` and runs it unchanged, except that when it reaches the case
tagged ``TAG`` (alone, or inside a merged batch) it either sleeps forever (``hang``:
the host must kill it at its timeout) or kills itself with SIGSEGV (``crash``).
``slow SECONDS`` instead waits that long before every case (a slow device).
``stall N`` (or ``stall N:K``) runs N cases, then stops before the next one and waits
until it is killed (a device about to be dropped: a fault injected "after N cases" then
finds exactly N finished, however fast or slow the host is); with ``:K`` only the first K
runs that finish N cases stall (counted in the file ``$QC_FAULT_STATE``), the later ones go on.
``without MOD[,MOD...]`` runs it as on a device whose python lacks those modules (a runtime
not installed there): importing one raises ModuleNotFoundError, as Python would.
``--probe`` passes through.
"""

from __future__ import annotations

import importlib.abc
import importlib.util
import os
import signal
import sys
import time


class _Without(importlib.abc.MetaPathFinder):
    """Makes the named top-level modules (and their submodules) impossible to import."""

    def __init__(self, names):
        self.names = set(names)

    def find_spec(self, fullname, path=None, target=None):
        if fullname.split(".")[0] in self.names:
            raise ModuleNotFoundError(f"No module named '{fullname}'", name=fullname)
        return None


def main() -> int:
    mode, tag, runner, *rest = sys.argv[1:]
    if mode == "without":
        sys.meta_path.insert(0, _Without(tag.split(",")))
    spec = importlib.util.spec_from_file_location("device_runner", runner)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    real = mod.run_case
    ran, stall = [0], [False]

    def run_case(rt, case, *args):
        if mode == "slow":             # a slow device: TAG seconds before every case
            time.sleep(float(tag))
            return real(rt, case, *args)
        if mode == "stall":
            if stall[0]:
                while True:            # until the test cuts the connection and kills it
                    time.sleep(1)
            rec = real(rt, case, *args)
            ran[0] += 1
            # decided (and counted) before the N-th result file exists: the cut it triggers may
            # kill this process at any moment after that, before its next case starts
            stall[0] = ran[0] == int(tag.split(":")[0]) and _may_stall(tag)
            return rec
        if case["tag"] == tag:
            if mode == "hang":
                while True:
                    time.sleep(1)
            os.kill(os.getpid(), signal.SIGSEGV)
        return real(rt, case, *args)

    real_group = mod.run_group

    def run_group(rt, group, *args):   # a merged batch holding the case hangs or crashes too
        if any(m["tag"] == tag for m in group["members"]):
            rt.prepare_group = lambda g, ws: run_case(rt, {"tag": tag})
        return real_group(rt, group, *args)

    mod.run_case = run_case
    mod.run_group = run_group
    return mod.main(rest)


def _may_stall(tag: str) -> bool:
    """``N``: always; ``N:K``: if fewer than K runs stalled yet (and count this one)."""
    if ":" not in tag:
        return True
    state = os.environ["QC_FAULT_STATE"]
    try:
        with open(state) as f:
            done = int(f.read() or 0)
    except FileNotFoundError:
        done = 0
    if done >= int(tag.split(":")[1]):
        return False
    with open(state, "w") as f:
        f.write(str(done + 1))
    return True


if __name__ == "__main__":
    sys.exit(main())
