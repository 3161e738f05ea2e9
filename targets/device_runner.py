#!/usr/bin/env python3
"""qconform device runner: runs one batch of cases on the device's own runtime.

Self-contained (standard library + NumPy + the device's runtime; nothing from the
qconform project), so it can be pushed next to a batch and run as::

    python3 device_runner.py WORKSPACE/manifest.json
    python3 device_runner.py --probe [RUNTIME...]   # device facts as JSON on stdout

The manifest (``qconform-batch/1``, JSON) names the runtime, its options, warm-up
and timed runs, and every case: a model file, raw input files (dtype, shape) and
the expected output tensors. Runtimes:

``onnxruntime-qnn``  onnxruntime with the QNN execution provider (HTP backend),
                     CPU fallback disabled; the onnxruntime-qnn plug-in package or
                     an onnxruntime build with QNN inside
``onnxruntime``      onnxruntime, CPU execution provider, full graph optimization
``litert``           ai_edge_litert (or tflite_runtime) interpreter, one thread,
                     op resolver ``AUTO`` or ``BUILTIN_REF``
``openvino``         OpenVINO's CPU plugin on the same QDQ ONNX models, one thread

A runtime that is installed but finds none of its hardware here (onnxruntime-qnn with no QNN
device, e.g. on a board without an NPU) makes every case of the batch ``unsupported`` with
what the runtime listed, and the probe records it (``no_hardware``) instead of failing.

The manifest's ``groups`` (ONNX runtimes) are merged models of several cases (names
prefixed ``c<k>_``), run first: one session and one timed run per group, as the host's
batched targets do; a group that cannot run as a whole falls back to its cases alone.
For each remaining case, in order, it writes ``out/<tag>.started``, then the raw outputs
``out/<tag>_<j>.raw`` and ``out/<tag>.json`` (status ok / unsupported / error,
the reason, latencies in µs, where its nodes ran), the JSON last and atomically: a
case whose JSON exists is finished, a case with only ``.started`` was in flight when
the runner died (``out/g<k>.started``: a group was). ``out/device.json`` holds the device facts (OS, SoC/CPU, runtime and QNN
versions, HTP performance mode). The last line on stdout is
``qconform-runner: done <n>``; its absence tells the host the run was cut.
"""

from __future__ import annotations

import ctypes
import json
import mmap
import os
import platform
import subprocess
import sys
import time
from importlib.metadata import version

import numpy as np

FORMAT = "qconform-batch/1"
DONE_MARK = "qconform-runner: done"


class Unsupported(Exception):
    pass


class NoHardware(Exception):
    """The runtime is installed and set up, but this device has none of its hardware (e.g. no HTP):
    every case of the batch is unsupported, with this reason."""


# ----------------------------------------------------------------------------- runtime modules

# A device has one of the runtimes (or none): each is imported here, only when asked for.

def _onnxruntime():
    """onnxruntime (raises ImportError if the device has none)."""
    import onnxruntime
    return onnxruntime


def _onnxruntime_qnn():
    """The onnxruntime-qnn plug-in; None if it is not installed (onnxruntime may have QNN inside)."""
    try:
        import onnxruntime_qnn
    except ImportError:
        return None
    return onnxruntime_qnn


def _openvino():
    """openvino (raises ImportError if the device has none)."""
    import openvino
    return openvino


def _litert():
    """The LiteRT interpreter module: ai_edge_litert, or tflite_runtime on older boards."""
    try:
        from ai_edge_litert import interpreter
    except ImportError as first:
        try:
            from tflite_runtime import interpreter
        except ModuleNotFoundError as e:
            if e.name != "tflite_runtime":
                raise                   # tflite_runtime is there but lacks something
            if getattr(first, "name", None) != "ai_edge_litert":
                raise first from None   # ai_edge_litert is there but broken
            raise ModuleNotFoundError("No module named 'ai_edge_litert' (nor 'tflite_runtime')",
                                      name="ai_edge_litert") from None
    return interpreter


# ----------------------------------------------------------------------------- device facts

def _read(path, limit=4096):
    try:
        with open(path, "rb") as f:
            return f.read(limit).decode(errors="replace").strip("\x00 \n")
    except OSError:
        return ""


def _getprop(name):
    try:
        return subprocess.run(["getprop", name], capture_output=True, text=True, timeout=5).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        return ""


def _cpuinfo():
    text = _read("/proc/cpuinfo", 65536)
    fields = {}
    for line in text.splitlines():
        k, _, v = line.partition(":")
        k, v = k.strip(), v.strip()
        if k and v and k not in fields:
            fields[k] = v
    return fields


#: the x86 ISA extensions runtimes dispatch on (/proc/cpuinfo's names): CPUID (leaf, subleaf, register, bit)
#: and the XCR0 state bits the OS must enable for them (as the runtimes' own dispatch checks)
X86_ISA = {"sse4_1": (1, 0, 2, 19, 0), "fma": (1, 0, 2, 12, 0x6), "avx2": (7, 0, 1, 5, 0x6),
           "avx512f": (7, 0, 1, 16, 0xE6), "avx512bw": (7, 0, 1, 30, 0xE6), "avx512_vnni": (7, 0, 2, 11, 0xE6),
           "avx_vnni": (7, 1, 0, 4, 0x6), "avx512_bf16": (7, 1, 0, 5, 0xE6), "amx_bf16": (7, 0, 3, 22, 0x60000), "amx_tile": (7, 0, 3, 24, 0x60000),
           "amx_int8": (7, 0, 3, 25, 0x60000)}
#: the aarch64 ones (/proc/cpuinfo's Features)
ARM_ISA = ("asimd", "asimddp", "i8mm", "sve", "sve2")
# cpuid(leaf, subleaf, uint32 out[4]) and xgetbv(0), x86-64 System V
_CPUID = bytes.fromhex("5389f889f14989d00fa241890041895804418948084189500c5bc3")
_XGETBV = bytes.fromhex("31c90f01d048c1e2204809d0c3")


def _x86_cpuid_isa():
    """The X86_ISA flags the CPU reports through CPUID and the OS enables in XCR0: what the
    runtimes see, also under QEMU user mode, where /proc/cpuinfo is the host's, not the emulated
    CPU's. None if code cannot be run from memory here."""
    try:
        page = mmap.mmap(-1, 4096, flags=mmap.MAP_PRIVATE | mmap.MAP_ANONYMOUS,
                         prot=mmap.PROT_READ | mmap.PROT_WRITE | mmap.PROT_EXEC)
    except (OSError, AttributeError, ValueError):
        return None
    page.write(_CPUID + _XGETBV)
    base = ctypes.addressof(ctypes.c_char.from_buffer(page))
    regs = (ctypes.c_uint32 * 4)()
    cpuid = ctypes.CFUNCTYPE(None, ctypes.c_uint32, ctypes.c_uint32, ctypes.c_void_p)(base)

    def reg(leaf, sub, r):
        cpuid(leaf, sub, ctypes.addressof(regs))
        return regs[r]
    cpuid(0, 0, ctypes.addressof(regs))
    top = regs[0]
    osxsave = top >= 1 and reg(1, 0, 2) >> 27 & 1
    xcr0 = ctypes.CFUNCTYPE(ctypes.c_uint64)(base + len(_CPUID))() if osxsave else 0
    return sorted(name for name, (leaf, sub, r, bit, state) in X86_ISA.items()
                  if leaf <= top and reg(leaf, sub, r) >> bit & 1 and xcr0 & state == state)


def isa_flags():
    """The ISA extensions of :data:`X86_ISA` / :data:`ARM_ISA` this CPU has, sorted: on x86-64
    from CPUID (/proc/cpuinfo's flags where code cannot run from memory), on aarch64 from
    /proc/cpuinfo's Features (QEMU emulates that file for an aarch64 guest)."""
    machine = platform.machine().lower()
    if machine in ("x86_64", "amd64"):
        try:
            found = _x86_cpuid_isa()
        except Exception:
            found = None
        if found is not None:
            return found
        names = X86_ISA
    else:
        names = ARM_ISA
    ci = _cpuinfo()
    present = set((ci.get("flags") or ci.get("Features") or "").split())
    return sorted(n for n in names if n in present)


def device_facts(runtime=None, options=None):
    """What the report records about the device: OS, SoC or CPU, runtime versions."""
    options = options or {}
    facts = {"hostname": platform.node(), "machine": platform.machine(),
             "python": platform.python_version(), "cpus": os.cpu_count()}
    if os.path.exists("/system/build.prop") or _getprop("ro.build.version.release"):
        rel, sdk = _getprop("ro.build.version.release"), _getprop("ro.build.version.sdk")
        facts["os"] = f"Android {rel} (API {sdk})"
        facts["build"] = _getprop("ro.build.fingerprint")
        soc = " ".join(x for x in (_getprop("ro.soc.manufacturer"), _getprop("ro.soc.model")) if x)
        facts["soc"] = soc or _getprop("ro.board.platform") or _getprop("ro.hardware")
        facts["model"] = _getprop("ro.product.model")
    else:
        pretty = ""
        for line in _read("/etc/os-release", 8192).splitlines():
            if line.startswith("PRETTY_NAME="):
                pretty = line.split("=", 1)[1].strip().strip('"')
        facts["os"] = f"{platform.system()} {platform.release()}" + (f" ({pretty})" if pretty else "")
        ci = _cpuinfo()
        soc = _read("/sys/devices/soc0/machine") or _read("/proc/device-tree/model")
        facts["soc"] = soc or ci.get("Hardware") or ci.get("model name") or platform.processor() or platform.machine()
        fam = _read("/sys/devices/soc0/family")
        if fam:
            facts["soc_family"] = fam
    facts["isa"] = isa_flags()
    facts["numpy"] = np.__version__
    if runtime in ("onnxruntime", "onnxruntime-qnn"):
        try:
            facts["onnxruntime"] = _onnxruntime().__version__
        except Exception as e:
            facts["onnxruntime"] = f"missing ({type(e).__name__})"
    if runtime == "onnxruntime-qnn":
        try:
            qnn = _onnxruntime_qnn()
        except Exception:   # installed but broken
            qnn = None
        if qnn is not None:
            facts["onnxruntime-qnn"] = getattr(qnn, "__version__", "unknown")
            info = getattr(qnn, "build_and_package_info", None)
            if info is not None:
                facts["qnn_sdk"] = str(getattr(info, "qnn_version", "unknown"))
        else:
            facts["onnxruntime-qnn"] = "built into onnxruntime" if _ort_has_qnn() else "missing"
        facts["htp_performance_mode"] = str(options.get("htp_performance_mode", "burst"))
    if runtime == "openvino":
        try:
            facts["openvino"] = _openvino().get_version().split("-")[0]
        except Exception as e:
            facts["openvino"] = f"missing ({type(e).__name__})"
    if runtime == "litert":
        facts["litert"] = _litert_version()
        facts["op_resolver"] = str(options.get("op_resolver", "AUTO"))
    return facts


def _ort_has_qnn():
    try:
        return "QNNExecutionProvider" in _onnxruntime().get_available_providers()
    except Exception:
        return False


def _litert_version():
    for dist in ("ai-edge-litert", "tflite-runtime", "tensorflow"):
        try:
            return f"{dist} {version(dist)}"
        except Exception:
            continue
    return "unknown"


# ----------------------------------------------------------------------------- runtimes

def _short(e):
    lines = [ln for ln in str(e).strip().splitlines() if ln.strip()]
    return (lines[-1] if lines else type(e).__name__)[:600]


class OrtRuntime:
    """onnxruntime on the CPU execution provider (the host's ``ort`` target)."""

    def __init__(self, options):
        self.ort = _onnxruntime()
        self.options = options

    def session_options(self):
        so = self.ort.SessionOptions()
        so.graph_optimization_level = self.ort.GraphOptimizationLevel.ORT_ENABLE_ALL
        so.intra_op_num_threads = 1
        so.inter_op_num_threads = 1
        so.log_severity_level = 3
        return so

    def session(self, path):
        try:
            return self.ort.InferenceSession(path, self.session_options(), providers=["CPUExecutionProvider"])
        except Exception as e:
            raise Unsupported(f"ONNX Runtime rejected the model: {_short(e)}") from None

    def prepare(self, case, ws):
        sess = self.session(os.path.join(ws, case["model"]))
        feeds, names = group_feeds({"members": [case]}, ws)
        self.last_placement = placement(sess, None)
        return lambda: sess.run(names, feeds)

    def prepare_group(self, group, ws):
        """A merged model of several cases (names prefixed c<k>_): one session, one run."""
        sess = self.session(os.path.join(ws, group["model"]))
        feeds, names = group_feeds(group, ws)
        self.last_placement = placement(sess, [m["prefix"] for m in group["members"]])
        return lambda: sess.run(names, feeds)


class QnnRuntime(OrtRuntime):
    """onnxruntime + QNN execution provider, HTP backend, CPU fallback disabled (the ``htp`` target)."""

    def __init__(self, options):
        super().__init__(options)
        self.devices = None
        self.plugin = _onnxruntime_qnn()
        if self.plugin is None:
            if not _ort_has_qnn():
                raise RuntimeError("neither onnxruntime-qnn nor an onnxruntime with QNNExecutionProvider is "
                                   "installed on the device")
        if self.plugin is not None:
            try:
                self.ort.register_execution_provider_library("QNNExecutionProvider", self.plugin.get_library_path())
            except Exception as e:
                if "already" not in str(e).lower():
                    raise
            listed = self.ort.get_ep_devices()
            self.devices = [d for d in listed if d.ep_name == "QNNExecutionProvider"]
            if not self.devices:
                seen = ", ".join(f"{d.ep_name} ({getattr(d.device.type, 'name', d.device.type)})" for d in listed)
                raise NoHardware(f"onnxruntime-qnn registered QNNExecutionProvider, but onnxruntime lists no QNN device "
                                 f"on this {platform.machine()} device (its devices: {seen or 'none'}): no HTP here, "
                                 f"and this build of onnxruntime-qnn has no HTP simulator for it")

    def session(self, path):
        so = self.session_options()
        so.add_session_config_entry("session.disable_cpu_ep_fallback", "1")
        mode = str(self.options.get("htp_performance_mode", "burst"))
        try:
            if self.plugin is not None:
                backend = self.options.get("backend_path") or self.plugin.get_qnn_htp_path()
                so.add_provider_for_devices(self.devices, {"backend_path": backend, "htp_performance_mode": mode})
                return self.ort.InferenceSession(path, so)
            backend = self.options.get("backend_path") or "libQnnHtp.so"
            return self.ort.InferenceSession(path, so, providers=["QNNExecutionProvider"],
                                             provider_options=[{"backend_path": backend,
                                                                "htp_performance_mode": mode}])
        except Exception as e:
            raise Unsupported(f"QNN HTP cannot run the whole model (CPU fallback disabled): {_short(e)}") from None


class LiteRtRuntime:
    """LiteRT interpreter, one thread, the given op resolver (``tflite`` / ``tflite-ref`` targets)."""

    def __init__(self, options):
        self.mod = _litert()
        self.resolver = str(options.get("op_resolver", "AUTO"))

    def prepare(self, case, ws):
        mod = self.mod
        try:
            rtype = getattr(mod.OpResolverType, self.resolver)
            it = mod.Interpreter(model_path=os.path.join(ws, case["model"]), experimental_op_resolver_type=rtype,
                                 num_threads=1)
            it.allocate_tensors()
        except Exception as e:
            raise Unsupported(f"LiteRT rejected the model: {_short(e)}") from None
        for det, spec in zip(it.get_input_details(), case["inputs"]):
            it.set_tensor(det["index"], read_raw(os.path.join(ws, spec["file"]), spec["dtype"], spec["shape"]))
        outs = it.get_output_details()

        def invoke():
            it.invoke()
            return [it.get_tensor(d["index"]) for d in outs]
        return invoke


#: OpenVINO's compile (and import) config, here and in the host's ``openvino`` target: one thread,
#: as the other CPU runtimes; nothing that changes kernels
OPENVINO_CONFIG = {"INFERENCE_NUM_THREADS": 1}


class OpenvinoRuntime:
    """OpenVINO's CPU plugin, one inference thread (the host's ``openvino`` target), on the ONNX
    models the onnxruntime runtimes get: its low-precision transformations make them int8 kernels."""

    def __init__(self, options):
        self.core = _openvino().Core()

    def _request(self, path, feeds, names):
        try:
            compiled = self.core.compile_model(self.core.read_model(path), "CPU", OPENVINO_CONFIG)
        except Exception as e:
            raise Unsupported(f"OpenVINO rejected the model: {_short(e)}") from None
        request = compiled.create_infer_request()

        def invoke():
            request.infer(feeds)
            return [request.get_tensor(n).data.copy() for n in names]
        return invoke

    def prepare(self, case, ws):
        return self._request(os.path.join(ws, case["model"]), *group_feeds({"members": [case]}, ws))

    def prepare_group(self, group, ws):
        """A merged model of several cases (names prefixed c<k>_): one compiled model, one run."""
        return self._request(os.path.join(ws, group["model"]), *group_feeds(group, ws))


RUNTIMES = {"onnxruntime": OrtRuntime, "onnxruntime-qnn": QnnRuntime, "litert": LiteRtRuntime,
            "openvino": OpenvinoRuntime}


def placement(sess, prefixes):
    """Per case: execution provider -> op types of the case's nodes it runs, as ONNX Runtime
    recorded it (None if it does not); ``prefixes`` None: a one-case model."""
    try:
        info = sess.get_provider_graph_assignment_info()
    except Exception:
        return None
    per = [dict() for _ in range(len(prefixes) if prefixes else 1)]
    for sub in info:
        for node in sub.get_nodes():
            k = 0
            if prefixes:
                head, sep, _ = str(getattr(node, "name", "")).partition("_")
                if not (sep and head[:1] == "c" and head[1:].isdigit() and int(head[1:]) < len(prefixes)):
                    continue
                k = int(head[1:])
            per[k].setdefault(sub.ep_name, []).append(getattr(node, "op_type", "?"))
    return per


# ----------------------------------------------------------------------------- files

def read_raw(path, dtype, shape):
    arr = np.fromfile(path, dtype=np.dtype(dtype).newbyteorder("<"))
    return arr.astype(np.dtype(dtype)).reshape([int(d) for d in shape])


def group_feeds(group, ws):
    """A merged group's inputs by name (every member's) and its output names, in member order (one
    case: ``{"members": [case]}``)."""
    feeds, names = {}, []
    for m in group["members"]:
        for i in m["inputs"]:
            feeds[i["name"]] = read_raw(os.path.join(ws, i["file"]), i["dtype"], i["shape"])
        names += [o["name"] for o in m["outputs"]]
    return feeds, names


def write_json(path, obj):
    tmp = path + ".tmp"
    with open(tmp, "w") as f:
        json.dump(obj, f)
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, path)


def run_case(rt, case, ws, out_dir, warmup, repeats):
    """Run one case; returns its result record (outputs written next to it)."""
    rec = {"tag": case["tag"], "id": case.get("id", case["tag"]), "status": "ok", "reason": "",
           "latency_us": [], "outputs": []}
    try:
        rt.last_placement = None
        invoke = rt.prepare(case, ws)
        if getattr(rt, "last_placement", None) is not None:
            rec["placement"] = rt.last_placement[0]
        result = None
        for _ in range(max(0, warmup)):
            result = invoke()
        for _ in range(max(1, repeats)):
            t0 = time.perf_counter_ns()
            result = invoke()
            rec["latency_us"].append((time.perf_counter_ns() - t0) / 1000.0)
        for j, (arr, spec) in enumerate(zip(result, case["outputs"])):
            arr = np.ascontiguousarray(np.asarray(arr))
            fname = f"{case['tag']}_{j}.raw"
            arr.astype(arr.dtype.newbyteorder("<"), copy=False).tofile(os.path.join(out_dir, fname))
            rec["outputs"].append({"file": fname, "dtype": str(arr.dtype), "shape": list(arr.shape)})
        if len(result) != len(case["outputs"]):
            rec["status"], rec["reason"] = "error", f"{len(result)} outputs, expected {len(case['outputs'])}"
    except Unsupported as e:
        rec["status"], rec["reason"] = "unsupported", str(e)
    except Exception as e:
        rec["status"], rec["reason"] = "error", f"{type(e).__name__}: {_short(e)}"
    return rec


def run_group(rt, group, ws, out_dir):
    """A merged group: one session, one timed run (no warm-up; the local batched targets do
    the same), each member's outputs and record written. Returns the member tags done, or
    [] when the group cannot run as a whole (its cases then run one by one)."""
    marker = os.path.join(out_dir, group["gtag"] + ".started")
    with open(marker, "w") as f:
        json.dump([m["tag"] for m in group["members"]], f)
    try:
        rt.last_placement = None
        invoke = rt.prepare_group(group, ws)
        t0 = time.perf_counter_ns()
        result = invoke()
        batch_us = [(time.perf_counter_ns() - t0) / 1000.0]
    except Exception as e:   # refused or failed as a whole: fall back to the cases alone
        write_json(os.path.join(out_dir, group["gtag"] + ".json"), {"status": "fallback", "reason": _short(e)})
        return []
    k = 0
    n = len(group["members"])
    for pos, m in enumerate(group["members"]):
        rec = {"tag": m["tag"], "status": "ok", "reason": "", "latency_us": [], "batch_us": batch_us,
               "batch_size": n, "outputs": []}
        if rt.last_placement is not None:
            rec["placement"] = rt.last_placement[pos]
        for j, spec in enumerate(m["outputs"]):
            arr = np.ascontiguousarray(np.asarray(result[k]))
            k += 1
            fname = f"{m['tag']}_{j}.raw"
            arr.astype(arr.dtype.newbyteorder("<"), copy=False).tofile(os.path.join(out_dir, fname))
            rec["outputs"].append({"file": fname, "dtype": str(arr.dtype), "shape": list(arr.shape)})
        write_json(os.path.join(out_dir, m["tag"] + ".json"), rec)
    write_json(os.path.join(out_dir, group["gtag"] + ".json"), {"status": "ok", "cases": n})
    return [m["tag"] for m in group["members"]]


def probe(runtimes):
    """The device facts (``runtimes``: each runtime's own facts) and ``runtime_errors``: each
    runtime that cannot be set up here (imported, its execution provider registered), as a
    batch would set it up."""
    facts = device_facts(None, {})
    facts["runtimes"], errors = {}, {}
    for runtime in runtimes:
        facts["runtimes"][runtime] = {k: v for k, v in device_facts(runtime, {}).items() if k not in facts}
        try:
            RUNTIMES[runtime]({})
        except NoHardware as e:   # set up, no hardware: its cases will be unsupported, not a broken device
            facts["runtimes"][runtime]["no_hardware"] = str(e)
        except KeyError:
            errors[runtime] = "not a runtime of this device runner"
        except Exception as e:
            errors[runtime] = f"{type(e).__name__}: {_short(e)}"
    if errors:
        facts["runtime_errors"] = errors
    return facts


def run_batch(manifest_path):
    ws = os.path.dirname(os.path.abspath(manifest_path))
    with open(manifest_path) as f:
        m = json.load(f)
    if m.get("format") != FORMAT:
        print(f"qconform-runner: {manifest_path}: format must be {FORMAT}", file=sys.stderr)
        return 2
    out_dir = os.path.join(ws, m.get("out", "out"))
    os.makedirs(out_dir, exist_ok=True)
    runtime, options = m["runtime"], m.get("options", {})
    write_json(os.path.join(out_dir, "device.json"), device_facts(runtime, options))
    unsupported = None
    try:
        rt = RUNTIMES[runtime](options)
    except NoHardware as e:
        rt, unsupported = None, str(e)
    except Exception as e:
        # the runtime itself is missing or broken: every case is an error, said once per case
        reason = f"runtime {runtime} unavailable on the device: {type(e).__name__}: {_short(e)}"
        rt = None
    n = 0
    done = set()
    if rt is not None and hasattr(rt, "prepare_group"):
        for group in m.get("groups", []):
            tags = run_group(rt, group, ws, out_dir)
            done.update(tags)
            n += len(tags)
    for case in m["cases"]:
        if case["tag"] in done:
            continue
        with open(os.path.join(out_dir, case["tag"] + ".started"), "w"):
            pass
        if rt is None:
            rec = {"tag": case["tag"], "id": case.get("id"), "status": "unsupported" if unsupported else "error",
                   "reason": unsupported or reason, "latency_us": [], "outputs": []}
        else:
            rec = run_case(rt, case, ws, out_dir, int(m.get("warmup", 1)), int(m.get("repeats", 5)))
        write_json(os.path.join(out_dir, case["tag"] + ".json"), rec)
        n += 1
    write_json(os.path.join(out_dir, "done.json"), {"cases": n})
    print(f"{DONE_MARK} {n}", flush=True)
    return 0


def main(argv=None):
    argv = list(sys.argv[1:] if argv is None else argv)
    if argv[:1] == ["--probe"]:
        print(json.dumps(probe(argv[1:])))
        return 0
    if len(argv) != 1:
        print("usage: device_runner.py MANIFEST.json | --probe [RUNTIME...]", file=sys.stderr)
        return 2
    return run_batch(argv[0])


if __name__ == "__main__":
    sys.exit(main())
