"""``netrun``: qnn-net-run / snpe-net-run style tools on a device, driven by a profile.

``pytest --target=netrun --netrun-profile=htp.toml [--device=adb:SERIAL]`` runs each case
through a vendor's command-line runner. The profile (a TOML file the user writes,
``qconform-netrun/1``) says which model format the tool takes, the command template,
the libraries to push, the environment, and how inputs and outputs are written.
Per batch of cases the target writes, next to the models and raw inputs, one input
list per case in the tools' format (one line per inference, ``name:=path`` for each
input) and one POSIX ``run.sh`` that runs the template for every case (each token
quoted, a device-side timeout per case); then it makes the same single push, run,
pull and cleanup as every remote target (:mod:`targets.remote`, whose reconnect and
retry logic it shares), and reads ``<output_dir>/Result_0/<tensor>.raw`` back, native
(quantized codes) or float32, as the profile says.

Profile fields (see docs/devices.md for a full qnn-net-run example)::

    format = "qconform-netrun/1"          # required
    name = "qnn-htp"                      # label in reports (default: the file name)
    model_format = "onnx"                 # "onnx" (QDQ, as htp/ort build it) | "tflite"
    command = ["{libdir}/qnn-net-run", "--backend", "libQnnHtp.so", "--retrieve_context", "{model}",
               "--input_list", "{input_list}", "--output_dir", "{output_dir}",
               "--use_native_input_files", "--use_native_output_files"]    # required
    device = "adb:SERIAL"                 # default device (--device overrides; default local)
    push = ["/opt/qnn/lib/libQnnHtp.so"]  # files pushed once per session to {libdir}
    env = { LD_LIBRARY_PATH = "{libdir}", ADSP_LIBRARY_PATH = "{libdir}" }
    native_input = true                   # raw inputs are codes (else float32 reals)
    native_output = true                  # raw outputs are codes (else float32 reals)
    int8_as_uint8 = false                 # int8 tensors travel as uint8 (code + 128)
    input_list_names = true               # "name:=path" (else bare paths in input order)
    list_outputs = false                  # first line "#out0 out1" names the outputs
    output_file = "Result_0/{tensor}.raw" # where an output lands, below {output_dir}
    timeout = 120                         # seconds per case
    [prepare]                             # optional: host-side conversion of each model
    commands = [["qnn-onnx-converter", "--input_network", "{model}", "-o", "{stem}.cpp"], ...]
    artifact = "{stem}.bin"               # the file that is pushed as {model}

Placeholders: command ``{model} {input_list} {output_dir} {libdir} {workdir} {python}``;
env ``{libdir} {workdir}``; output_file ``{tensor}``; prepare commands ``{model} {stem}
{dir} {name}`` (the model file, its path without extension, its folder, its base name)
and artifact ``{stem} {dir} {name}``.
A bad profile is one QconformError naming the file, the field and the rule.
"""

from __future__ import annotations

import math
import os
import re
import shlex
import shutil
import string
import subprocess
import tempfile
from pathlib import Path
from typing import Any, Sequence

import numpy as np

from suite.core.dtypes import DTYPES
from suite.core.errors import QconformError, signal_name
from suite.core.userfile import load_toml

from targets import get_target, onnx_model, tflite_model
from targets.base import Outcome, Target, Timing
from targets.remote import RemoteTarget, _le, _Prepared
from targets.transport import REMOTE_TIMEOUT_RCS, DeviceSpec, TransportError


FORMAT = "qconform-netrun/1"
DONE_MARK = "qconform-runner: done"
PLACEHOLDERS = {
    "command": {"model", "input_list", "output_dir", "libdir", "workdir", "python"},
    "env": {"libdir", "workdir"},
    "output_file": {"tensor"},
    "prepare": {"model", "stem", "dir", "name"},
    "artifact": {"stem", "dir", "name"},
}
KEYS = {"format", "name", "model_format", "command", "device", "push", "env", "native_input", "native_output",
        "int8_as_uint8", "input_list_names", "list_outputs", "output_file", "timeout", "prepare"}


def load_profile(path: str | os.PathLike, check_files: bool = True) -> dict[str, Any]:
    """Read and check a netrun profile; QconformError(source, field, rule) on anything wrong.

    ``check_files=False`` skips the existence check of ``push`` (to read a profile written
    for another machine)."""
    src = str(path)
    raw = load_toml(path, "the profile", "--netrun-profile")

    def fail(field, msg, rule=None):
        raise QconformError(msg, source=src, field=field, rule=rule)

    if raw.get("format") != FORMAT:
        fail("format", f'must be "{FORMAT}" (got {raw.get("format")!r})', "format tag")
    extra = set(raw) - KEYS
    if extra:
        fail(sorted(extra)[0], f"unknown key (known: {', '.join(sorted(KEYS))})", "profile keys")
    p: dict[str, Any] = {
        "name": raw.get("name", Path(path).stem), "model_format": raw.get("model_format"),
        "command": raw.get("command"), "device": raw.get("device"), "push": raw.get("push", []),
        "env": raw.get("env", {}), "native_input": raw.get("native_input", True),
        "native_output": raw.get("native_output", True), "int8_as_uint8": raw.get("int8_as_uint8", False),
        "input_list_names": raw.get("input_list_names", True), "list_outputs": raw.get("list_outputs", False),
        "output_file": raw.get("output_file", "Result_0/{tensor}.raw"), "timeout": raw.get("timeout", 120),
        "prepare": raw.get("prepare"), "source": src,
    }
    if p["model_format"] not in ("onnx", "tflite"):
        fail("model_format", f'must be "onnx" or "tflite" (got {p["model_format"]!r})', "model formats")
    if not (isinstance(p["command"], list) and p["command"] and all(isinstance(a, str) for a in p["command"])):
        fail("command", "must be a non-empty list of strings (argv; no shell)", "command template")
    for k, a in enumerate(p["command"]):
        _check_placeholders(a, PLACEHOLDERS["command"], src, f"command[{k}]")
    for k in ("native_input", "native_output", "int8_as_uint8", "input_list_names", "list_outputs"):
        if not isinstance(p[k], bool):
            fail(k, f"must be true or false (got {p[k]!r})")
    if not (isinstance(p["push"], list) and all(isinstance(a, str) for a in p["push"])):
        fail("push", "must be a list of file paths")
    base = Path(path).resolve().parent
    files = []
    for k, f in enumerate(p["push"]):
        fp = Path(f) if os.path.isabs(f) else base / f
        try:
            is_file = fp.is_file()
        except (OSError, ValueError):   # a name too long, a NUL byte
            is_file = False
        if check_files and not is_file:
            fail(f"push[{k}]", f"no such file: {fp}", "files to push must exist on the host")
        files.append(fp)
    p["push"] = files
    if not (isinstance(p["env"], dict) and all(isinstance(v, str) for v in p["env"].values())):
        fail("env", "must be a table of strings")
    for k, v in p["env"].items():
        if not k.replace("_", "a").isalnum() or k[:1].isdigit():
            fail(f"env.{k}", "is not an environment variable name")
        _check_placeholders(v, PLACEHOLDERS["env"], src, f"env.{k}")
    if not isinstance(p["output_file"], str) or "{tensor}" not in p["output_file"]:
        fail("output_file", "must be a string holding {tensor}")
    _check_placeholders(p["output_file"], PLACEHOLDERS["output_file"], src, "output_file")
    if (not isinstance(p["timeout"], (int, float)) or isinstance(p["timeout"], bool) or not p["timeout"] > 0
            or not math.isfinite(p["timeout"])):   # NaN and inf too
        fail("timeout", f"must be a finite number of seconds > 0 (got {p['timeout']!r})")
    if p["device"] is not None and not isinstance(p["device"], str):
        fail("device", "must be a device string such as adb:SERIAL")
    prep = p["prepare"]
    if prep is not None:
        if not isinstance(prep, dict) or set(prep) - {"commands", "artifact"}:
            fail("prepare", "must be a table with commands and artifact")
        cmds, art = prep.get("commands"), prep.get("artifact")
        if not (isinstance(cmds, list) and cmds and all(isinstance(c, list) and c and all(isinstance(a, str) for a in c)
                                                         for c in cmds)):
            fail("prepare.commands", "must be a list of argv lists")
        for i, c in enumerate(cmds):
            for k, a in enumerate(c):
                _check_placeholders(a, PLACEHOLDERS["prepare"], src, f"prepare.commands[{i}][{k}]")
        if not isinstance(art, str):
            fail("prepare.artifact", "must name the file to push, e.g. \"{stem}.bin\"")
        _check_placeholders(art, PLACEHOLDERS["artifact"], src, "prepare.artifact")
    return p


def _check_placeholders(text: str, allowed: set[str], src: str, field: str) -> None:
    try:
        names = {f for _, f, _, _ in string.Formatter().parse(text) if f is not None}
    except ValueError as e:
        raise QconformError(f"bad template {text!r}: {e}", source=src, field=field,
                            rule="{placeholder} templates; write {{ for a brace") from None
    bad = sorted(n for n in names if n not in allowed)
    if bad:
        raise QconformError(f"unknown placeholder {{{bad[0]}}} (allowed here: "
                            f"{', '.join('{' + a + '}' for a in sorted(allowed))})", source=src, field=field,
                            rule="profile placeholders")


class NetrunTarget(RemoteTarget):
    """A net-run tool on a device, per a profile (see the module docstring)."""

    name = "netrun"
    description = "a qnn-net-run / snpe-net-run style tool, driven by a device profile"
    takes_device = True

    def __init__(self, profile: str | None = None, device: DeviceSpec | str | None = None, **options: Any):
        Target.__init__(self, **options)
        self.name = "netrun"
        self.profile_path = profile
        self.profile = load_profile(profile) if profile else None
        self.expected_scheme = None
        if self.profile is not None:
            fmt = self.profile["model_format"]
            self.local = get_target("htp" if fmt == "onnx" else "tflite-ref")   # static checks only
            self.description = f"net-run tool per profile {self.profile['name']} ({fmt} models)"
        self._bind(device or (self.profile or {}).get("device") or "local")
        self._libdir: str | None = None

    # ---- discovery
    def probe_runtime(self) -> str | None:
        return None   # the profile's tool needs no python: the probe checks the connection only

    def host_availability(self):
        if self.profile is None:
            return False, "needs a device profile: --netrun-profile FILE (see docs/devices.md)"
        ok, why = self.transport.available()
        if not ok:
            return False, why
        return True, f"profile {self.profile['name']} on {self.device.label}"

    def versions(self):
        v = {"device": self.device.label}
        if self.profile is not None:
            v["profile"] = str(self.profile["name"])
            v["model_format"] = self.profile["model_format"]
            v["pushed"] = ",".join(f.name for f in self.profile["push"])
        return v

    def device_facts(self):
        return {self.device.label: dict(self._facts or {})}

    def batch_timeout(self, n: int) -> float:
        return self.device.get("timeout") or 60.0 + float(self.profile["timeout"]) * n

    # ---- building
    def prepare(self, case, tag: str) -> _Prepared:
        pr = self.profile
        entry: dict[str, Any] = {"tag": tag, "id": case.id}
        files: dict[str, bytes] = {}
        if pr["model_format"] == "onnx":
            model = onnx_model.build(case)
            content, ext = model.content, "onnx"
            feeds = model.feeds(case)
            ins = [(name, case.inputs[gi.case_index], arr) for (name, arr), gi in zip(feeds.items(), model.inputs)]
            out_names = [go.name for go in model.outputs]
            out_shapes = _onnx_output_shapes(content)
            unpack = model.unpack
        else:
            built = tflite_model.build(case)
            content, ext = built.content, "tflite"
            in_names, out_names = _tflite_io_names(content)
            ins = []
            for name, ci in zip(in_names, built.input_indices):
                t = case.inputs[ci]
                ins.append((name, t, np.asarray(t.data).astype(DTYPES[t.dtype].storage).reshape(t.shape)))
            out_shapes = [list(o.shape) for o in case.outputs]
            unpack = lambda outs: [np.ascontiguousarray(o) for o in outs]   # noqa: E731
        entry["model"] = f"models/{tag}.{ext}"
        if pr["prepare"]:
            content, entry["model"] = self._convert(content, entry["model"])
        files[entry["model"]] = content
        line = []
        for j, (name, t, arr) in enumerate(ins):
            rel = f"inputs/{tag}_{j}.raw"
            files[rel] = self._input_bytes(t, arr)
            line.append(f"{name}:={rel}" if pr["input_list_names"] else rel)
        text = ""
        if pr["list_outputs"]:
            text += "#" + " ".join(out_names) + "\n"
        text += " ".join(line) + "\n"
        files[f"lists/{tag}.txt"] = text.encode()
        entry["input_list"] = f"lists/{tag}.txt"
        entry["outputs"] = [{"name": n, "shape": s, "case_output": j}
                            for j, (n, s) in enumerate(zip(out_names, out_shapes))]
        return _Prepared(tag, entry, files, unpack)

    def _input_bytes(self, t, arr: np.ndarray) -> bytes:
        pr = self.profile
        if not pr["native_input"] and t.quantized:
            s, z = t.broadcast_qparams()
            real = ((arr.astype(np.int64) - z) * s.astype(np.float32)).astype(np.float32)
            return _le(np.ascontiguousarray(real)).tobytes()
        if pr["int8_as_uint8"] and t.dtype == "int8":
            return (arr.astype(np.int16) + 128).astype(np.uint8).tobytes()
        return _le(arr).tobytes()

    def _convert(self, content: bytes, rel: str) -> tuple[bytes, str]:
        """Host-side conversion (profile [prepare]): argv lists run without a shell, in order;
        returns the artifact's bytes and its workspace path."""
        prep = self.profile["prepare"]
        with tempfile.TemporaryDirectory(prefix="qcprep") as d:
            model = Path(d) / rel
            model.parent.mkdir(parents=True)
            model.write_bytes(content)
            stem = str(model.with_suffix(""))
            values = {"model": str(model), "stem": stem, "dir": str(model.parent), "name": model.stem}
            for cmd in prep["commands"]:
                argv = [a.format(**values) for a in cmd]
                try:
                    res = subprocess.run(argv, cwd=model.parent, capture_output=True, text=True, timeout=600)
                except OSError as e:
                    raise RuntimeError(f"prepare step {argv[0]}: {e}") from None
                if res.returncode != 0:
                    raise RuntimeError(f"prepare step {argv[0]} exited {res.returncode}: "
                                       f"{(res.stderr or res.stdout).strip()[-400:]}")
            art = Path(prep["artifact"].format(stem=stem, dir=str(model.parent), name=model.stem))
            if not art.is_file():
                raise RuntimeError(f"the prepare steps made no {art.name}")
            return art.read_bytes(), str(Path(rel).parent / art.name)

    def write_batch(self, folder: Path, prepared: Sequence[_Prepared], timing: Timing) -> None:
        folder.mkdir(parents=True, exist_ok=True)
        for p in prepared:
            for rel, content in p.files.items():
                dst = folder / rel
                dst.parent.mkdir(parents=True, exist_ok=True)
                dst.write_bytes(content)
        (folder / "out").mkdir(exist_ok=True)
        (folder / "run.sh").write_text(self.script(prepared))

    def script(self, prepared: Sequence[_Prepared]) -> str:
        """The batch's POSIX shell script: every token from the profile or a path is quoted.

        The workspace and the library folder are found by the script itself ($QC_WS, $QC_LIBS:
        absolute paths on the device, both under the transport's root).
        """
        pr = self.profile
        q = shlex.quote
        values = {"workdir": "\0QC_WS\0", "libdir": "\0QC_LIBS\0", "python": self.transport.python}
        libs = Path(self._libdir or "qconform-netrun-libs").name
        lines = ["#!/bin/sh", "# qconform netrun batch (generated): one tool run per case",
                 'QC_WS=$(cd "$(dirname "$0")" && pwd) || exit 90', 'cd "$QC_WS" && mkdir -p out || exit 90',
                 f'QC_LIBS=$(cd "$QC_WS/.." && cd {q(libs)} 2>/dev/null && pwd) || QC_LIBS="$QC_WS"']

        def sub(text: str, extra: dict[str, str]) -> str:
            # one shell word: literal parts quoted, $QC_WS / $QC_LIBS spliced in double-quoted
            word = text.format(**{**values, **extra})
            parts = re.split("\0(QC_WS|QC_LIBS)\0", word)
            out = [q(x) if k % 2 == 0 else f'"${x}"' for k, x in enumerate(parts) if x]
            return "".join(out) if out else "''"
        for k, v in pr["env"].items():
            lines.append(f"export {k}={sub(v, {})}")
        lines.append("{ uname -srm; getprop ro.soc.model; getprop ro.build.version.release; } "
                     "> out/facts.txt 2>/dev/null")
        per_case = max(1, int(round(float(pr["timeout"]))))   # `timeout 0` would mean no limit
        for p in prepared:
            tag = p.tag
            extra = {"model": p.entry["model"], "input_list": p.entry["input_list"], "output_dir": f"out/{tag}"}
            argv = " ".join(sub(a, extra) for a in pr["command"])
            lines += [f": > out/{tag}.started",
                      f"timeout -k 5 {per_case} {argv} > out/{tag}.log 2>&1",
                      f"echo $? > out/{tag}.rc.tmp && mv out/{tag}.rc.tmp out/{tag}.rc"]
        lines.append(f"echo {q(DONE_MARK)} {len(prepared)}")
        return "\n".join(lines) + "\n"

    # ---- device side
    def before_first_batch(self) -> None:
        """Push the profile's libraries once per session to {libdir}."""
        t = self.transport
        self._libdir = t.workspace(f"qconform-netrun-libs-{self._uid}")
        if not self.profile["push"]:
            return
        stage = Path(tempfile.mkdtemp(prefix="qclibs"))
        try:
            for f in self.profile["push"]:
                shutil.copy(f, stage / f.name)
            t.push(stage, self._libdir)
        finally:
            shutil.rmtree(stage, ignore_errors=True)

    def runner_argv(self, ws: str) -> list[str]:
        return ["sh", f"{ws}/run.sh"]

    def case_done(self, out: Path, p: _Prepared) -> bool:
        return (out / f"{p.tag}.rc").exists()

    def read_facts(self, out: Path) -> dict[str, Any] | None:
        f = out / "facts.txt"
        if not f.exists():
            return None
        lines = [ln.strip() for ln in f.read_text(errors="replace").splitlines() if ln.strip()]
        facts = {"profile": str(self.profile["name"])}
        if lines:
            facts["os"] = lines[0]
        if len(lines) > 1:
            facts["soc"] = lines[1]
        return facts

    def collect(self, p: _Prepared, out: Path) -> Outcome:
        rc = int((out / f"{p.tag}.rc").read_text().strip() or "-1")
        log = out / f"{p.tag}.log"
        tail = log.read_text(errors="replace").strip()[-600:] if log.exists() else ""
        tool = Path(self.profile["command"][0]).name
        if rc in REMOTE_TIMEOUT_RCS:
            return Outcome.error(f"{tool} killed at its timeout ({self.profile['timeout']} s per case): {tail}",
                                 status="timeout")
        if 128 < rc < 128 + 65:   # the shell's 128 + n: the tool died of signal n (timeout passes it on)
            return Outcome.error(f"{tool} killed by {signal_name(rc - 128)} (exit {rc}) on {self.device.label}: "
                                 f"{tail}",
                                 status="crash")
        if rc != 0:
            return Outcome.error(f"{tool} exited {rc} on {self.device.label}: {tail}")
        outs = []
        for o in p.entry["outputs"]:
            spec = self._case_outputs[p.tag][o["case_output"]]
            f = out / p.tag / self.profile["output_file"].format(tensor=_file_name(o["name"]))
            if not f.exists():
                return Outcome.error(f"{tool} wrote no {f.relative_to(out)} (log: {tail})")
            outs.append(self._read_output(f, spec, o["shape"]))
        return Outcome.ok(p.unpack(outs), [], device=self.device.label, profile=str(self.profile["name"]))

    def _read_output(self, f: Path, spec, shape) -> np.ndarray:
        storage = np.dtype(DTYPES[spec.dtype].storage)
        if not self.profile["native_output"] and spec.quantized:
            real = np.fromfile(f, dtype="<f4").astype(np.float64)
            s, z = float(np.float32(spec.scale[0])), int(spec.zero_point[0])
            info = DTYPES[spec.dtype]
            codes = np.clip(np.rint(real / s) + z, info.qmin, info.qmax)
            return codes.astype(storage).reshape(shape)
        if self.profile["int8_as_uint8"] and spec.dtype == "int8":
            return (np.fromfile(f, dtype=np.uint8).astype(np.int16) - 128).astype(np.int8).reshape(shape)
        return np.fromfile(f, dtype=storage.newbyteorder("<")).astype(storage).reshape(shape)

    def run(self, cases, timing):
        self._case_outputs = {f"c{i:04d}": c.outputs for i, c in enumerate(cases)}
        return super().run(cases, timing)

    def close(self) -> None:
        if self._transport is not None and self._libdir and self._batches:
            try:
                self._transport.cleanup(self._libdir)
            except TransportError:
                pass
        super().close()


def _file_name(tensor: str) -> str:
    """The file name net-run tools give a tensor: characters outside [A-Za-z0-9_.-] become '_'."""
    return "".join(ch if ch.isalnum() or ch in "_.-" else "_" for ch in tensor)


def _onnx_output_shapes(content: bytes) -> list[list[int]]:
    m = onnx_model.load_onnx().load_from_string(content)
    return [[d.dim_value for d in o.type.tensor_type.shape.dim] for o in m.graph.output]


def _tflite_io_names(content: bytes) -> tuple[list[str], list[str]]:
    m = tflite_model.schema().Model.GetRootAs(content, 0)
    sg = m.Subgraphs(0)
    name = lambda i: sg.Tensors(i).Name().decode()   # noqa: E731
    return ([name(sg.Inputs(k)) for k in range(sg.InputsLength())],
            [name(sg.Outputs(k)) for k in range(sg.OutputsLength())])
