"""STAND-IN for a misbehaving device runtime: runs the device runner with one case made to hang or crash.

Used as the device's Python (through a two-line shell wrapper written by the tests):
``fault_python.py MODE TAG device_runner.py manifest.json`` loads the real
``device_runner.py`` and runs it unchanged, except that when it reaches the case
tagged ``TAG`` it either sleeps forever (``hang``: the host must kill it at its
timeout) or kills itself with SIGSEGV (``crash``). ``--probe`` passes through.
"""

from __future__ import annotations

import importlib.util
import os
import signal
import sys
import time


def main() -> int:
    mode, tag, runner, *rest = sys.argv[1:]
    spec = importlib.util.spec_from_file_location("device_runner", runner)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    real = mod.run_case

    def run_case(rt, case, *args):
        if case["tag"] == tag:
            if mode == "hang":
                while True:
                    time.sleep(1)
            os.kill(os.getpid(), signal.SIGSEGV)
        return real(rt, case, *args)

    mod.run_case = run_case
    return mod.main(rest)


if __name__ == "__main__":
    sys.exit(main())
