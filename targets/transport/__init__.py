"""Transports: how the suite reaches a device (this host, an ssh host, an adb device, an emulated board).

One interface, :class:`Transport`, with four verbs a remote target needs per batch
of cases:

``push(local_dir, remote_dir)``   copy a folder's contents to the device (one round trip)
``run(argv, timeout, env, cwd)``  run a command there; exit code, stdout, stderr (one round trip)
``pull(remote_dir, local_dir)``   copy a folder's contents back (one round trip)
``cleanup(remote_dir)``           remove a workspace (one round trip)

plus ``reconnect()`` after a dropped connection and ``close()``. Commands are
argv lists: the local transport runs them without a shell; ssh and adb must hand
the device a shell string, which is built with :func:`shlex.quote` on every
token, so a path or value with spaces, quotes or ``;`` stays one argument.

A connection-level failure (host unreachable, device offline, session cut) raises
:class:`TransportError`; a command that ran and failed is a :class:`CommandResult`
with its exit code. Device strings (``--device``)::

    local                          this host, workspaces under the system temp folder
    local:/some/folder             this host, workspaces under /some/folder
    ssh:[user@]host[:port]         the system OpenSSH client (keys, ~/.ssh/config as usual)
    adb:SERIAL                     the system adb client (Debian's ``adb``)
    qemu:[ROOTFS]                  an aarch64 root file system run under QEMU user mode on this host
                                   (default: the board of scripts/setup-arm64.sh)
    qemu-x86                       this host's Python and runtimes under QEMU user mode as another x86-64 CPU
                                   (?cpu=Haswell, the default: AVX2 without VNNI; Nehalem: SSE4.2; max)

followed by optional ``?key=value&key=value`` settings (URL-encoded): ``python``
(the device's Python, default ``python3``), ``root`` (remote workspace folder),
``name`` (label in reports), ``timeout`` (runner timeout per batch, seconds),
``retries`` (failed attempts the whole run may retry on the device), ``wait``
(seconds a reconnect may take), ``merge`` (0: no merged ONNX batches, every case
its own session and latency), and per kind: ssh ``config`` (an ssh_config file,
``-F``), ``identity`` (``-i``), ``port``, ``ssh`` (client path), ``connect_timeout``;
adb ``adb`` (client path), ``server`` (the adb server socket, e.g. ``tcp:127.0.0.1:5037``);
qemu ``qemu`` (the binary), ``cpu`` (the emulated CPU, default neoverse-n1), ``site_packages``;
qemu-x86 ``qemu`` and ``cpu`` (default Haswell).
:func:`parse_device` checks a string whole (the address, every setting typed and
bounded by :data:`SETTINGS`) and raises one QconformError naming the setting and the rule.
"""

from __future__ import annotations

from targets.transport.adb import AdbTransport
from targets.transport.base import (COMMON_KEYS, KIND_KEYS, KINDS, REMOTE_TIMEOUT_RCS, SETTINGS,  # noqa: F401
                                    CommandResult, DeviceSpec, Transport, TransportError, parse_device,
                                    parse_device_list, shell_command)
from targets.transport.local import LocalTransport
from targets.transport.qemu import QemuTransport, QemuX86Transport
from targets.transport.ssh import SshTransport


def make_transport(spec: DeviceSpec | str) -> Transport:
    if isinstance(spec, str):
        spec = parse_device(spec)
    if spec.kind == "local":
        return LocalTransport(spec)
    if spec.kind == "ssh":
        return SshTransport(spec)
    if spec.kind == "qemu":
        return QemuTransport(spec)
    if spec.kind == "qemu-x86":
        return QemuX86Transport(spec)
    return AdbTransport(spec)
