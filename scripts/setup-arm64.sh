#!/usr/bin/env bash
# Build the emulated ARM64 board of `--device=qemu:` (docs/devices.md), from the package registries only:
#
#   BOARD/rootfs/               Debian 13 "trixie" arm64 (mmdebstrap --variant=extract: Python 3.13, libstdc++)
#   BOARD/qemu-aarch64-static   QEMU 10 user mode, taken from trixie's qemu-user-static (amd64)
#   BOARD/qemu-x86_64-static    the same package's x86-64 QEMU, for --device=qemu-x86:?cpu=MODEL (this host's
#                               runtimes as another x86-64 CPU: Haswell, Nehalem, ...)
#   BOARD/site-packages/        the aarch64 wheels (cp313): ai-edge-litert, onnxruntime, onnxruntime-qnn, numpy
#   BOARD/board.json            what was built; written last, so its presence means a whole board
#
#   bash scripts/setup-arm64.sh            # BOARD = $QCONFORM_ARM64_DIR or ~/.cache/qconform/arm64
#   bash scripts/setup-arm64.sh --check    # exit 0 if the board is built, 1 if not (builds nothing)
#
# Why QEMU 10 and not Debian 12's qemu-user-static (7.2): under 7.2 onnxruntime segfaults on import
# (the host's /proc/cpuinfo shows through) and `-cpu max` corrupts XNNPACK's int8 results.
# The runtimes are pinned to the versions in .venv (when there is one) so that the board and this
# host compare the same releases. Idempotent: a built board is only checked (and rebuilt when
# .venv's releases moved on). Exit 3: a registry
# cannot be reached (the tests that need the board then skip, saying so).
# Every external command runs under `timeout`: some can hang on a machine without network.
set -euo pipefail
cd "$(dirname "$0")/.."

CHECK=0
for a in "$@"; do
  case "$a" in
    --check) CHECK=1 ;;
    *) echo "setup-arm64.sh: unknown option $a (known: --check)" >&2; exit 2 ;;
  esac
done

BOARD=${QCONFORM_ARM64_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/qconform/arm64}
MIRROR=${QCONFORM_DEBIAN_MIRROR:-http://deb.debian.org/debian}
SUITE=trixie
PYVER=3.13
CPU=neoverse-n1
# the glibc tags of the wheels' builds (trixie has glibc 2.41); pip does not widen an explicit --platform itself
PLATFORMS=(--platform manylinux_2_34_aarch64 --platform manylinux_2_28_aarch64 --platform manylinux_2_27_aarch64
           --platform manylinux2014_aarch64)
say() { echo "setup-arm64.sh: $*" >&2; }
# fail CODE WHY: say why, and keep it beside the board for the tests that skip without it (tests/test_arm64.py)
fail() { say "$2"; mkdir -p "$(dirname "$BOARD")"; echo "$2" > "$BOARD.failed"; exit "$1"; }

PY=python3
[ -x .venv/bin/python ] && PY=.venv/bin/python
# stale: the board's runtimes are other releases than .venv's (a cross-device table would then
# compare two releases, not two devices); prints what differs, nothing when the board matches
stale() {
  timeout 60 "$PY" - "$BOARD/board.json" 2>/dev/null <<'EOF' || echo "an unreadable board.json; "
import importlib.metadata as m, json, sys
wheels = {w.split("-")[0].lower(): w.split("-")[1] for w in json.load(open(sys.argv[1]))["wheels"]}
for name in ("ai-edge-litert", "onnxruntime", "onnxruntime-qnn", "numpy"):
    try:
        host = m.version(name)
    except m.PackageNotFoundError:
        continue
    board = wheels.get(name.replace("-", "_"))
    if board != host:
        print(f"{name} {board} (.venv: {host})", end="; ")
EOF
}
built() { [ -f "$BOARD/board.json" ] && [ -x "$BOARD/qemu-aarch64-static" ] && [ -x "$BOARD/rootfs/usr/bin/python3" ]; }
# qemu_x86 DIR: trixie's qemu-x86_64-static into DIR (a board built before it was kept gets it alone);
# a failure is noted in DIR/qemu-x86.failed and not tried again for a day (each try may wait 300 s)
qemu_x86() {
  local tmp
  tmp=$(mktemp -d "$1/.qemu.XXXXXX")
  if command -v mmdebstrap >/dev/null 2>&1 && timeout 300 mmdebstrap --quiet --variant=extract \
       --include=qemu-user-static "$SUITE" "$tmp/q" "$MIRROR" && [ -e "$tmp/q/usr/bin/qemu-x86_64-static" ]; then
    cp -L "$tmp/q/usr/bin/qemu-x86_64-static" "$1/qemu-x86_64-static"
    rm -f "$1/qemu-x86.failed"
  else
    say "could not take qemu-x86_64-static from Debian $SUITE (no mmdebstrap or no registry): no qemu-x86 device"
    echo "$(date -u +%FT%TZ) no qemu-user-static from Debian $SUITE" > "$1/qemu-x86.failed"
  fi
  rm -rf "$tmp"
}

if built; then
  old=$(stale)
  if [ -z "$old" ]; then
    [ "$CHECK" = 1 ] && exit 0
    [ -x "$BOARD/qemu-x86_64-static" ] || [ -n "$(find "$BOARD/qemu-x86.failed" -mmin -1440 2>/dev/null)" ] \
      || qemu_x86 "$BOARD"
    ver=$(timeout 20 "$BOARD/qemu-aarch64-static" --version | head -n1)
    say "board ready in $BOARD ($ver; $(du -sm "$BOARD" | cut -f1) MB; built before: nothing to do)"
    exit 0
  fi
  say "the board in $BOARD does not match .venv (${old%; }): rebuilding it"
fi
[ "$CHECK" = 1 ] && exit 1

t0=$(date +%s)
if [ "$(id -u)" = 0 ]; then SUDO=""; elif command -v sudo >/dev/null 2>&1 && timeout 10 sudo -n true 2>/dev/null; then SUDO="sudo -n"; else SUDO="none"; fi

# 1. the registries answer (Debian's mirror has trixie; PyPI through pip's own configuration)
if ! timeout 20 "$PY" -c 'import sys, urllib.request; urllib.request.urlopen(sys.argv[1], timeout=15).read(64)' \
     "$MIRROR/dists/$SUITE/Release" 2>/dev/null; then
  fail 3 "cannot reach $MIRROR/dists/$SUITE/Release (no registry): the board cannot be built"
fi

# 2. mmdebstrap (apt, as root or through sudo)
if ! command -v mmdebstrap >/dev/null 2>&1; then
  if [ "$SUDO" = none ]; then
    fail 3 "needs mmdebstrap (apt-get install mmdebstrap) and cannot install it (not root, no password-less sudo)"
  fi
  export DEBIAN_FRONTEND=noninteractive
  if ! timeout 300 $SUDO apt-get install -y -qq --no-install-recommends mmdebstrap >/dev/null 2>&1; then
    timeout 300 $SUDO apt-get update -qq >/dev/null || fail 3 "apt-get update failed: no registry"
    timeout 300 $SUDO apt-get install -y -qq --no-install-recommends mmdebstrap >/dev/null
  fi
fi

mkdir -p "$(dirname "$BOARD")"
exec 9>"$BOARD.lock"
timeout 600 flock 9   # another build of the same board: wait for it, then find it built
if built && [ -z "$(stale)" ]; then
  say "board built meanwhile by another run: $BOARD"
  exit 0
fi
STAGE=$(mktemp -d "$BOARD.new.XXXXXX")
trap 'rm -rf "$STAGE"' EXIT

# 3. QEMU 10 from trixie's qemu-user-static (amd64): the aarch64 and x86-64 binaries are kept
say "QEMU from Debian $SUITE ..."
timeout 300 mmdebstrap --quiet --variant=extract --include=qemu-user-static "$SUITE" "$STAGE/qemu" "$MIRROR" \
  || fail 3 "mmdebstrap of qemu-user-static failed (exit $?)"
cp -L "$STAGE/qemu/usr/bin/qemu-aarch64-static" "$STAGE/qemu-aarch64-static"
cp -L "$STAGE/qemu/usr/bin/qemu-x86_64-static" "$STAGE/qemu-x86_64-static"
rm -rf "$STAGE/qemu"
QEMU_VERSION=$(timeout 20 "$STAGE/qemu-aarch64-static" --version | head -n1)

# 4. the aarch64 root file system: extracted, nothing run in it (no binfmt, no chroot)
say "arm64 root file system (Debian $SUITE) ..."
timeout 300 mmdebstrap --quiet --arch=arm64 --variant=extract --include=python3,libstdc++6,coreutils,base-files \
  "$SUITE" "$STAGE/rootfs" "$MIRROR" || fail 3 "mmdebstrap of the arm64 root file system failed (exit $?)"
for d in bin lib sbin; do [ -e "$STAGE/rootfs/$d" ] || ln -s "usr/$d" "$STAGE/rootfs/$d"; done
[ -e "$STAGE/rootfs/etc/os-release" ] || cp "$STAGE/rootfs/usr/lib/os-release" "$STAGE/rootfs/etc/os-release"
rm -rf "$STAGE/rootfs/usr/share/doc" "$STAGE/rootfs/usr/share/man" "$STAGE/rootfs/usr/share/locale"

# 5. the aarch64 wheels, the same releases as the host's .venv where it has them
pin() {   # NAME: NAME==the version in .venv, else NAME
  local v
  v=$(timeout 60 "$PY" -c 'import sys, importlib.metadata as m; print(m.version(sys.argv[1]))' "$1" 2>/dev/null) \
    && echo "$1==$v" || echo "$1"
}
WANT=("$(pin ai-edge-litert)" "$(pin onnxruntime)" "$(pin onnxruntime-qnn)" "$(pin numpy)" flatbuffers)
say "aarch64 wheels: ${WANT[*]} ..."
download() {
  timeout 600 "$PY" -m pip download -q --disable-pip-version-check --only-binary=:all: "${PLATFORMS[@]}" \
    --python-version "$PYVER" --implementation cp -d "$STAGE/wheels" "$@" 2> >(grep -v "^WARNING: Location" >&2)
}
# (no newer or older release instead: the board would then differ from this host by its releases, not its CPU)
download "${WANT[@]}" || fail 3 "pip download of the aarch64 wheels ${WANT[*]} failed (no registry, or no aarch64 wheel of that release)"
mkdir -p "$STAGE/site-packages"
for w in "$STAGE"/wheels/*.whl; do
  timeout 120 python3 -m zipfile -e "$w" "$STAGE/site-packages"
done
WHEELS=$(cd "$STAGE/wheels" && ls ./*.whl | sed 's|^\./||' | tr '\n' ' ')
rm -rf "$STAGE/wheels"

# 6. one start under emulation: it checks the board and writes the .pyc files (a later start takes
#    about half as long); no compileall under emulation (minutes)
say "first start under QEMU ($CPU) ..."
PYTHONPATH="$STAGE/site-packages" timeout 300 "$STAGE/qemu-aarch64-static" -cpu "$CPU" -L "$STAGE/rootfs" \
  "$STAGE/rootfs/usr/bin/python3" -c 'import platform, numpy, onnxruntime; from ai_edge_litert import interpreter
assert platform.machine() == "aarch64", platform.machine()' \
  || fail 1 "the board's Python does not start under QEMU"

BUILT_S=$(( $(date +%s) - t0 ))
DISK_MB=$(du -sm "$STAGE" | cut -f1)
"$PY" - "$STAGE/board.json" "$QEMU_VERSION" "$SUITE" "$CPU" "$BUILT_S" "$DISK_MB" "$WHEELS" <<'EOF'
import json, sys
path, qemu, suite, cpu, built, disk, wheels = sys.argv[1:]
json.dump({"format": "qconform-arm64/1", "qemu": qemu, "debian": suite, "cpu": cpu, "built_s": int(built),
           "disk_mb": int(disk), "wheels": wheels.split()}, open(path, "w"), indent=1)
EOF
rm -rf "$BOARD" "$BOARD.failed"
mv "$STAGE" "$BOARD"
trap - EXIT
say "board ready in $BOARD: built in ${BUILT_S} s, ${DISK_MB} MB on disk ($QEMU_VERSION)"
