"""STAND-IN for an Android device: a small adb *server* over a local folder.

This is not adb and not a device. It exists so the real ``adb`` client (Debian's
``adb`` package) can be tested end to end in CI where no phone is attached: the
client talks to this process exactly as it talks to the adb server it normally
starts (the smart-socket protocol on a loopback port: ``adb -P PORT`` or
``ADB_SERVER_SOCKET=tcp:127.0.0.1:PORT``), and this process plays both the server
and the device behind it:

* host services: ``host:version``, ``host:devices(-l)``, ``host:features``,
  ``host-serial:S:features``, ``host-serial:S:get-state``, ``host:reconnect-offline``,
  ``wait-for-*``, ``host:transport:S`` / ``host:tport:serial:S`` / ``host:transport-any``;
* device services: ``shell,v2,...:CMD`` (stdout/stderr/exit packets) and legacy
  ``shell:CMD``, and ``sync:`` (STAT/STA2/LST2/LIST/LIS2/SEND/RECV/DATA/DONE/QUIT).

The device's ``/data/local/tmp`` is a local folder: sync paths under it are mapped
to the folder, and shell commands run locally with ``sh -c`` after the same prefix
is rewritten in the command text (so the folder's own path must need no shell
quoting). Faults for the tests: ``drop_after(n, pattern)`` cuts the connection of
a running device-runner command once ``n`` files matching ``pattern`` have appeared
below the folder since it started, kills the command and everything it started (its
session), and keeps the device ``offline`` until the client sends ``adb reconnect
offline`` (with ``revive=False``, for good: a device that died); each device records how many
such files each cut left (``dropped_after``), and ``log`` every request the client made.

Run standalone: ``python tests/standins/fake_adb_server.py --port 5137 --device
SERIAL=/some/folder``, then ``adb -P 5137 -s SERIAL shell echo hi``.
"""

from __future__ import annotations

import argparse
import os
import shlex
import signal
import socket
import socketserver
import struct
import subprocess
import threading
import time
from pathlib import Path

SERVER_VERSION = 41                      # adb 1.0.41 (platform-tools 29+)
DEVICE_ROOT = "/data/local/tmp"
FEATURES = "shell_v2,cmd,stat_v2,ls_v2,fixed_push_mkdir,apex,abb,fixed_push_symlink_timestamp,abb_exec"
SYNC_DATA_MAX = 64 * 1024

# shell protocol v2 packet ids
ID_STDIN, ID_STDOUT, ID_STDERR, ID_EXIT, ID_CLOSE_STDIN, ID_WINDOW = range(6)


class _Closed(Exception):
    pass


class Device:
    def __init__(self, serial: str, folder: Path):
        self.serial = serial
        self.folder = Path(folder).resolve()
        if shlex.quote(str(self.folder)) != str(self.folder):
            raise ValueError(f"stand-in folder {self.folder} needs shell quoting; use a plain path")
        self.folder.mkdir(parents=True, exist_ok=True)
        self.state = "device"
        self.revive = True                # whether `adb reconnect offline` brings it back
        self.transport_id = 1
        self.commands: list[str] = []     # shell commands seen (for the tests)
        self.drops = 0
        self.dropped_after: list[int] = []   # per drop: the matching files there when it was cut

    def host_path(self, device_path: str) -> Path:
        """Device path -> local path; only /data/local/tmp exists on this stand-in device."""
        p = device_path.rstrip("/") or "/"
        if p == DEVICE_ROOT or p.startswith(DEVICE_ROOT + "/"):
            return Path(str(self.folder) + p[len(DEVICE_ROOT):])
        raise PermissionError(f"{device_path}: only {DEVICE_ROOT} exists on the stand-in device")

    def rewrite(self, cmd: str) -> str:
        return cmd.replace(DEVICE_ROOT, str(self.folder))


class FakeAdbServer:
    """The stand-in; ``start()`` serves on 127.0.0.1:port in a background thread."""

    def __init__(self, devices: dict[str, str | Path], port: int = 0):
        self.devices = {s: Device(s, Path(f)) for s, f in devices.items()}
        self.port = port
        self.log: list[str] = []
        self._fault: dict | None = None
        self._lock = threading.Lock()
        self._server: socketserver.ThreadingTCPServer | None = None
        self._thread: threading.Thread | None = None

    # ---- control
    def start(self) -> "FakeAdbServer":
        outer = self

        class Handler(socketserver.BaseRequestHandler):
            def handle(self):
                outer._serve(self.request)

        class Server(socketserver.ThreadingTCPServer):
            allow_reuse_address = True
            daemon_threads = True

        self._server = Server(("127.0.0.1", self.port), Handler)
        self.port = self._server.server_address[1]
        self._thread = threading.Thread(target=self._server.serve_forever, name="fake-adb", daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
            self._server = None

    @property
    def socket_spec(self) -> str:
        return f"tcp:127.0.0.1:{self.port}"

    def drop_after(self, n_files: int, pattern: str, times: int = 1, command: str = "device_runner",
                   revive: bool = True) -> None:
        """Cut the next shell command(s) holding ``command`` once ``n_files`` files matching
        ``pattern`` (a glob below the folder) appeared after the command started; ``revive=False``:
        the device stays offline after the cut, whatever the client does."""
        with self._lock:
            self._fault = {"n": n_files, "pattern": pattern, "times": times, "command": command,
                           "revive": revive}

    def set_state(self, serial: str, state: str) -> None:
        self.devices[serial].state = state

    # ---- protocol helpers
    @staticmethod
    def _read_exact(sock: socket.socket, n: int) -> bytes:
        buf = b""
        while len(buf) < n:
            chunk = sock.recv(n - len(buf))
            if not chunk:
                raise _Closed()
            buf += chunk
        return buf

    def _read_request(self, sock) -> str:
        n = int(self._read_exact(sock, 4), 16)
        return self._read_exact(sock, n).decode()

    @staticmethod
    def _okay(sock, payload: str | None = None) -> None:
        msg = b"OKAY"
        if payload is not None:
            data = payload.encode()
            msg += b"%04x" % len(data) + data
        sock.sendall(msg)

    @staticmethod
    def _fail(sock, message: str) -> None:
        data = message.encode()
        sock.sendall(b"FAIL" + b"%04x" % len(data) + data)

    # ---- dispatch
    def _serve(self, sock: socket.socket) -> None:
        try:
            req = self._read_request(sock)
            self.log.append(req)
            self._host(sock, req)
        except (_Closed, ConnectionError, OSError):
            pass
        finally:
            try:   # shutdown first: it wakes a thread blocked in recv and sends the FIN
                sock.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
            sock.close()

    def _pick(self, sock, selector: str) -> Device | None:
        """A device by serial ('' = the only one); FAIL sent when none."""
        if selector:
            dev = self.devices.get(selector)
            if dev is None:
                self._fail(sock, f"device '{selector}' not found")
                return None
        else:
            if len(self.devices) != 1:
                self._fail(sock, "more than one device/emulator" if self.devices else "no devices/emulators found")
                return None
            dev = next(iter(self.devices.values()))
        return dev

    def _host(self, sock, req: str) -> None:
        serial = ""
        if req.startswith("host-serial:"):
            rest = req[len("host-serial:"):]
            serial, _, req = rest.rpartition(":")
            req = "host:" + req
        elif req.startswith("host-local:") or req.startswith("host-usb:"):
            req = "host:" + req.split(":", 1)[1]
        if req == "host:version":
            return self._okay(sock, "%04x" % SERVER_VERSION)
        if req in ("host:devices", "host:devices-l"):
            lines = "".join(f"{d.serial}\t{d.state}\n" for d in self.devices.values())
            return self._okay(sock, lines)
        if req in ("host:features", "host:host-features"):
            return self._okay(sock, FEATURES)
        if req == "host:get-state":
            dev = self._pick(sock, serial)
            if dev:
                self._okay(sock, dev.state)
            return None
        if req == "host:get-serialno":
            dev = self._pick(sock, serial)
            if dev:
                self._okay(sock, dev.serial)
            return None
        if req == "host:reconnect-offline":
            n = 0
            for d in self.devices.values():
                if d.state == "offline" and d.revive:
                    d.state = "device"
                    n += 1
            return self._okay(sock, f"reconnecting {n} device(s)\n" if n else "")
        if req.startswith("host:wait-for-"):
            return self._wait_for(sock, serial, req)
        if req == "host:kill":
            self._okay(sock)
            return None
        if req.startswith("host:transport:") or req.startswith("host:tport:serial:"):
            sel = req.rsplit(":", 1)[1]
            return self._transport(sock, sel, tport=req.startswith("host:tport:"))
        if req in ("host:transport-any", "host:tport:any", "host:transport-usb", "host:transport-local"):
            return self._transport(sock, "", tport=req.startswith("host:tport:"))
        self._fail(sock, f"unsupported by the stand-in: {req}")
        return None

    def _wait_for(self, sock, serial: str, req: str) -> None:
        want = req.rsplit("-", 1)[-1]        # device / recovery / bootloader / sideload / any
        self._okay(sock)
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            dev = self.devices.get(serial) if serial else (next(iter(self.devices.values()))
                                                           if len(self.devices) == 1 else None)
            if dev is not None and dev.state == "device" and want in ("device", "any"):
                self._okay(sock)
                return
            if _hung_up(sock):   # the client gave up waiting (its own timeout): so does this
                return
            time.sleep(0.05)
        self._fail(sock, "timeout waiting for device")

    def _transport(self, sock, selector: str, tport: bool) -> None:
        dev = self._pick(sock, selector)
        if dev is None:
            return
        if dev.state != "device":
            self._fail(sock, f"device {dev.state}")
            return
        self._okay(sock)
        if tport:
            sock.sendall(struct.pack("<Q", dev.transport_id))
        req = self._read_request(sock)
        self.log.append(f"[{dev.serial}] {req}")
        if req.startswith("shell"):
            head, _, cmd = req.partition(":")
            opts = head.split(",")[1:]
            self._shell(sock, dev, cmd, v2="v2" in opts)
        elif req.startswith("exec:"):
            self._shell(sock, dev, req[len("exec:"):], v2=False)
        elif req == "sync:":
            self._okay(sock)
            self._sync(sock, dev)
        else:
            self._fail(sock, f"unsupported device service: {req}")

    # ---- shell
    def _shell(self, sock, dev: Device, cmd: str, v2: bool) -> None:
        self._okay(sock)
        dev.commands.append(cmd)
        if not cmd.strip():
            msg = b"interactive shells are not supported by the stand-in\n"
            if v2:
                sock.sendall(struct.pack("<BI", ID_STDERR, len(msg)) + msg + struct.pack("<BI", ID_EXIT, 1) + b"\x01")
            return
        fault = self._fault if self._fault is not None and self._fault["command"] in cmd else None
        # files there before the command started do not count (by name, not by a clock's mtime)
        before = set(dev.folder.glob(fault["pattern"])) if fault is not None else set()
        p = subprocess.Popen(["sh", "-c", dev.rewrite(cmd)], cwd=dev.folder, stdin=subprocess.DEVNULL,
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE, start_new_session=True)
        send_lock = threading.Lock()
        broken = threading.Event()

        def pump(stream, pid_byte):
            for chunk in iter(lambda: stream.read1(65536) if hasattr(stream, "read1") else stream.read(65536), b""):
                if broken.is_set():
                    continue
                try:
                    with send_lock:
                        if v2:
                            sock.sendall(struct.pack("<BI", pid_byte, len(chunk)) + chunk)
                        elif pid_byte == ID_STDOUT:
                            sock.sendall(chunk)
                except OSError:
                    broken.set()

        peer_gone = threading.Event()

        def drain():   # stdin packets are discarded; EOF means the client hung up
            try:
                while sock.recv(65536):
                    pass
            except OSError:
                pass
            peer_gone.set()

        pumps = [threading.Thread(target=pump, args=(p.stdout, ID_STDOUT), daemon=True),
                 threading.Thread(target=pump, args=(p.stderr, ID_STDERR), daemon=True)]
        for t in pumps:
            t.start()
        threading.Thread(target=drain, daemon=True).start()
        while p.poll() is None:
            if fault is not None and fault["times"] > 0:
                n = len(set(dev.folder.glob(fault["pattern"])) - before)
                if n >= fault["n"]:
                    with self._lock:
                        fault["times"] -= 1
                    dev.drops += 1
                    dev.state = "offline"
                    dev.revive = fault["revive"]
                    _kill_group(p)
                    broken.set()
                    try:
                        sock.shutdown(socket.SHUT_RDWR)
                    except OSError:
                        pass
                    # counted again with nothing left running: what the host can still pull
                    n = len(set(dev.folder.glob(fault["pattern"])) - before)
                    dev.dropped_after.append(n)
                    self.log.append(f"[{dev.serial}] DROPPED after {n} files")
                    return
            if peer_gone.is_set():
                _kill_group(p)
                broken.set()
                return
            time.sleep(0.02)
        for t in pumps:
            t.join()
        if v2 and not broken.is_set():
            try:
                sock.sendall(struct.pack("<BI", ID_EXIT, 1) + bytes([p.returncode & 0xFF]))
            except OSError:
                pass

    # ---- sync
    def _sync(self, sock, dev: Device) -> None:
        while True:
            head = self._read_exact(sock, 8)
            cmd, n = head[:4], struct.unpack("<I", head[4:])[0]
            if cmd == b"QUIT":
                return
            arg = self._read_exact(sock, n).decode(errors="surrogateescape") if n else ""
            if cmd == b"STAT":
                sock.sendall(b"STAT" + self._stat_v1(dev, arg))
            elif cmd in (b"STA2", b"LST2"):
                sock.sendall(cmd + self._stat_v2(dev, arg, follow=cmd == b"STA2"))
            elif cmd in (b"LIST", b"LIS2"):
                self._list(sock, dev, arg, v2=cmd == b"LIS2")
            elif cmd == b"SEND":
                self._recv_file(sock, dev, arg)
            elif cmd == b"RECV":
                self._send_file(sock, dev, arg)
            else:
                self._sync_fail(sock, f"unknown sync command {cmd!r}")
                return

    @staticmethod
    def _sync_fail(sock, message: str) -> None:
        data = message.encode()
        sock.sendall(b"FAIL" + struct.pack("<I", len(data)) + data)

    def _stat_v1(self, dev, path) -> bytes:
        try:
            st = os.stat(dev.host_path(path))
            return struct.pack("<III", st.st_mode, st.st_size & 0xFFFFFFFF, int(st.st_mtime))
        except (OSError, PermissionError):
            return struct.pack("<III", 0, 0, 0)

    def _stat_v2(self, dev, path, follow: bool) -> bytes:
        try:
            hp = dev.host_path(path)
            st = os.stat(hp) if follow else os.lstat(hp)
            return struct.pack("<IQQIIIIQqqq", 0, st.st_dev, st.st_ino, st.st_mode, st.st_nlink, st.st_uid,
                               st.st_gid, st.st_size, int(st.st_atime), int(st.st_mtime), int(st.st_ctime))
        except FileNotFoundError:
            return struct.pack("<IQQIIIIQqqq", 2, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0)      # ENOENT
        except (OSError, PermissionError):
            return struct.pack("<IQQIIIIQqqq", 13, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0)     # EACCES

    def _list(self, sock, dev, path, v2: bool) -> None:
        try:
            hp = dev.host_path(path)
            names = sorted(os.listdir(hp)) if hp.is_dir() else []
        except (OSError, PermissionError):
            names, hp = [], None
        for name in [".", ".."] + names if hp is not None else []:
            try:
                st = os.lstat(hp / name)
            except OSError:
                continue
            nb = name.encode(errors="surrogateescape")
            if v2:
                sock.sendall(b"DNT2" + struct.pack("<IQQIIIIQqqqI", 0, st.st_dev, st.st_ino, st.st_mode,
                                                   st.st_nlink, st.st_uid, st.st_gid, st.st_size,
                                                   int(st.st_atime), int(st.st_mtime), int(st.st_ctime),
                                                   len(nb)) + nb)
            else:
                sock.sendall(b"DENT" + struct.pack("<IIII", st.st_mode, st.st_size & 0xFFFFFFFF,
                                                   int(st.st_mtime), len(nb)) + nb)
        if v2:
            sock.sendall(b"DONE" + bytes(struct.calcsize("<IQQIIIIQqqqI")))
        else:
            sock.sendall(b"DONE" + bytes(16))

    def _recv_file(self, sock, dev, arg: str) -> None:
        path, _, mode = arg.rpartition(",")
        chunks, err = [], None
        try:
            hp = dev.host_path(path)
        except PermissionError as e:
            hp, err = None, str(e)
        while True:
            head = self._read_exact(sock, 8)
            cmd, n = head[:4], struct.unpack("<I", head[4:])[0]
            if cmd == b"DATA":
                chunks.append(self._read_exact(sock, n))
            elif cmd == b"DONE":
                mtime = n
                break
            else:
                raise _Closed()
        if err is None:
            try:
                hp.parent.mkdir(parents=True, exist_ok=True)     # adbd's fixed_push_mkdir
                hp.write_bytes(b"".join(chunks))
                os.chmod(hp, int(mode or "0o644") & 0o777 if mode else 0o644)
                os.utime(hp, (mtime, mtime))
            except OSError as e:
                err = f"{path}: {e.strerror}"
        if err is None:
            sock.sendall(b"OKAY" + bytes(4))
        else:
            self._sync_fail(sock, err)

    def _send_file(self, sock, dev, path: str) -> None:
        try:
            data = dev.host_path(path).read_bytes()
        except (OSError, PermissionError) as e:
            self._sync_fail(sock, f"{path}: {getattr(e, 'strerror', None) or e}")
            return
        for i in range(0, len(data), SYNC_DATA_MAX):
            chunk = data[i:i + SYNC_DATA_MAX]
            sock.sendall(b"DATA" + struct.pack("<I", len(chunk)) + chunk)
        sock.sendall(b"DONE" + bytes(4))


def _hung_up(sock: socket.socket) -> bool:
    """Whether the client closed its end (a read would see end of file)."""
    try:
        return sock.recv(1, socket.MSG_PEEK | socket.MSG_DONTWAIT) == b""
    except BlockingIOError:
        return False
    except OSError:
        return True


def _session(sid: int) -> list[int]:
    """Pids of the processes of session ``sid``."""
    out = []
    for d in Path("/proc").iterdir():
        if d.name.isdigit():
            try:
                fields = (d / "stat").read_text().rsplit(")", 1)[1].split()
            except (OSError, IndexError):
                continue
            if len(fields) > 3 and int(fields[3]) == sid:
                out.append(int(d.name))
    return out


def _kill_group(p: subprocess.Popen) -> None:
    """Kill the command and everything it started: its whole session (it was started with
    start_new_session), not only its process group, since the device-side ``timeout`` puts
    itself and the runner into a group of their own. A device that drops off leaves nothing
    running that could still write results (as a phone rebooting, or adbd killing the shell)."""
    for _ in range(20):
        pids = _session(p.pid)
        if not pids:
            break
        for pid in pids:
            try:
                os.kill(pid, signal.SIGKILL)
            except (ProcessLookupError, PermissionError):
                pass
        if p.poll() is None:
            try:
                p.wait(timeout=0.05)
            except subprocess.TimeoutExpired:
                pass
    try:
        p.wait(timeout=5)
    except subprocess.TimeoutExpired:
        pass


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--port", type=int, default=5137)
    ap.add_argument("--device", action="append", required=True, metavar="SERIAL=FOLDER")
    a = ap.parse_args(argv)
    devs = dict(d.split("=", 1) for d in a.device)
    srv = FakeAdbServer(devs, a.port).start()
    print(f"stand-in adb server on {srv.socket_spec} with {', '.join(devs)}", flush=True)
    try:
        while True:
            time.sleep(3600)
    except KeyboardInterrupt:
        srv.stop()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
