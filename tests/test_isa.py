"""The ISA the runtimes dispatch on (issue #24): the host's and each device's ISA flags, the
``qemu-x86:`` device (this host's runtimes under QEMU user mode as another x86-64 CPU), the
ort-avx2-u8s8 scheme (MLAS's int16 pair saturation without VNNI) and findings with an ISA condition.

The tests that run QEMU need qemu-x86_64 (scripts/setup-arm64.sh keeps trixie's beside the ARM64
board) and skip, saying so, where it is not."""

from __future__ import annotations

import json
import platform
import shutil
from pathlib import Path

import numpy as np
import pytest

from reference import golden
from reports.runinfo import machines
from suite.cases.hunt.params import case_params
from suite.core.case import Case, Tensor, load_case
from suite.core.errors import QconformError
from suite.core.findings import Finding, findings, match
from targets import device_runner, get_target
from targets.base import Timing
from targets.remote import RemoteTarget
from targets.transport import make_transport, parse_device
from targets.transport.base import ARM64_BOARD
from tests.conftest import ROOT, rows_written

X86 = platform.machine().lower() in ("x86_64", "amd64")
QEMU_X86 = next((p for p in (str(Path(ARM64_BOARD) / "qemu-x86_64-static"), shutil.which("qemu-x86_64-static"),
                             shutil.which("qemu-x86_64")) if p and Path(p).is_file()), None)
needs_qemu_x86 = pytest.mark.skipif(
    not X86 or QEMU_X86 is None,
    reason="needs an x86-64 host and qemu-x86_64: `bash scripts/setup-arm64.sh` keeps Debian trixie's (QEMU 10) "
           "beside the ARM64 board" if X86 else "qemu-x86: an x86-64 host runs its own programs as another x86 CPU")


# ----------------------------------------------------------------------------- ISA facts

def test_host_isa_is_the_listed_flags_the_cpu_reports():
    isa = device_runner.isa_flags()
    assert isa == sorted(isa) and set(isa) <= set(device_runner.X86_ISA) | set(device_runner.ARM_ISA)
    if X86:   # CPUID agrees with the kernel's view of this (unemulated) CPU
        flags = next(ln for ln in Path("/proc/cpuinfo").read_text().splitlines() if ln.startswith("flags"))
        assert isa == sorted(set(flags.split(":", 1)[1].split()) & set(device_runner.X86_ISA))
        assert "sse4_1" in isa   # (every x86-64 CPU the runtimes' wheels support)


def test_probe_and_run_json_carry_the_isa():
    assert device_runner.device_facts()["isa"] == device_runner.isa_flags()
    doc = {"host": {"hostname": "h", "cpu_model": "CPU", "cpu_count": 2, "machine": "x86_64", "isa": ["avx2", "fma"]},
           "targets": {"ort": {"devices": {"qemu-x86:Nehalem": {"soc": "x86-64 Nehalem", "isa": ["sse4_1"]}}}},
           "devices_isa": {"local": ["avx2"], "qemu-x86:Nehalem": ["sse4_1"]}}
    assert machines(doc) == ["host h: CPU x 2 (x86_64), ISA avx2 fma", "device local: ISA avx2",
                             "device qemu-x86:Nehalem: x86-64 Nehalem, ISA sse4_1"]


# ----------------------------------------------------------------------------- the device string

def test_qemu_x86_device_string(tmp_path):
    q = tmp_path / "qemu-x86_64"
    q.write_text("")
    spec = parse_device(f"qemu-x86:?cpu=Nehalem&qemu={q}")
    assert spec.kind == "qemu-x86" and spec.get("cpu") == "Nehalem" and spec.label == "qemu-x86:Nehalem"
    assert parse_device(f"qemu-x86:?qemu={q}").get("cpu") == "Haswell"
    assert make_transport(spec).facts()["emulated"] == "yes"
    with pytest.raises(QconformError, match="names an address"):
        parse_device(f"qemu-x86:/some/rootfs?qemu={q}")
    with pytest.raises(QconformError, match="site_packages"):
        parse_device(f"qemu-x86:?qemu={q}&site_packages={tmp_path}")


# ----------------------------------------------------------------------------- the golden

def _fc(x, zx, w, wdtype="int8", xdtype="uint8") -> Case:
    x, w = np.asarray(x), np.asarray(w)
    return Case(op="FULLY_CONNECTED", attrs={}, id="fc", spec="qnn", inputs=[
        Tensor(xdtype, x.shape, x, [1.0], [zx]), Tensor(wdtype, w.shape, w, [1.0], [0])],
        outputs=[Tensor("uint8", (x.shape[0], w.shape[0]), None, [256.0], [128])])


def test_ort_avx2_u8s8_saturates_each_pair_to_int16():
    """Pairs (0, 1), (2, 3), (4, zero): 255*127*2 = 64770 -> 32767; -32640 and 70 as they are. With
    z_in = 5 (sum w = 138): 32767 - 32640 + 70 - 690 = -493 -> round(-1.93) = -2, + 128 = 126; the exact
    32200 - 690 = 31510 -> round(123.09) + 128 = 251."""
    case = _fc([[255, 255, 255, 0, 10]], 5, [[127, 127, -128, 5, 7]])
    assert int(golden(case, "ort-avx2-u8s8")[0][0, 0]) == 126
    assert int(golden(case, "ort-fp32-rne")[0][0, 0]) == 251
    # not uint8 x int8: the sums are exact (vpmaddubsw is not on that path)
    s8 = _fc([[127, 127, 127, 0, 10]], 5, [[127, 127, -128, 5, 7]], xdtype="int8")
    assert np.array_equal(golden(s8, "ort-avx2-u8s8")[0], golden(s8, "ort-fp32-rne")[0])


def test_openvino_pairs_shift_int8_activations_of_fc_and_of_conv_at_zero_point_0():
    """openvino-u8s8-pairs: FULLY_CONNECTED's int8 codes x become x + 128 before the pairs, z_in alike:
    x = 127, 127 (255, 255) x w = 127, 127 -> 32767 - (0 + 128) * 254 = 255 -> round(255 / 256) = 1; the exact
    32258 -> 126. A pair below 32767 is exact: x = 1, 1 (129 * 127 * 2 = 32766) -> 254 -> 1, as 254 / 256.
    uint8 activations as ort-avx2-u8s8; CONV_2D's int8 activations are shifted alike when their zero point
    is 0 (openvino-conv-s8-int16-pairs), and summed exactly with any other."""
    x = np.array([[127, 127], [1, 1]], np.int8)
    fc = Case(op="FULLY_CONNECTED", attrs={}, id="fc", spec="litert-int8", inputs=[
        Tensor("int8", (2, 2), x, [1.0], [0]), Tensor("int8", (1, 2), np.array([[127, 127]], np.int8), [1.0], [0])],
        outputs=[Tensor("int8", (2, 1), None, [256.0], [0])])
    assert golden(fc, "openvino-u8s8-pairs")[0].ravel().tolist() == [1, 1]
    assert golden(fc, "ort-avx2-u8s8")[0].ravel().tolist() == [126, 1]
    u8 = _fc([[255, 255, 255, 0, 10]], 5, [[127, 127, -128, 5, 7]])
    assert np.array_equal(golden(u8, "openvino-u8s8-pairs")[0], golden(u8, "ort-avx2-u8s8")[0])
    conv = Case(op="CONV_2D", attrs={"padding": "VALID", "stride_w": 1, "stride_h": 1, "dilation_w_factor": 1,
                                     "dilation_h_factor": 1, "fused_activation_function": "NONE"}, id="c", spec="litert-int8",
                inputs=[Tensor("int8", (1, 1, 1, 2), np.array([127, 127], np.int8).reshape(1, 1, 1, 2), [1.0], [0]),
                        Tensor("int8", (1, 1, 1, 2), np.array([127, 127], np.int8).reshape(1, 1, 1, 2), [1.0], [0])],
                outputs=[Tensor("int8", (1, 1, 1, 1), None, [256.0], [0])])
    assert int(golden(conv, "openvino-u8s8-pairs")[0].ravel()[0]) == 1
    conv.inputs[0].data = np.array([126, 126], np.int8).reshape(1, 1, 1, 2)
    conv.inputs[0].zero_point = [-1]                                       # the same x - z_in: exact
    assert int(golden(conv, "openvino-u8s8-pairs")[0].ravel()[0]) == 126 == int(golden(conv)[0].ravel()[0])


CONV_S8 = "tests/data/isa/openvino-conv-s8-pairs.json"


def _other_zero_point(case: Case, z: int) -> Case:
    import copy
    c = copy.deepcopy(case)
    c.inputs[0].zero_point = [z]
    return c


def test_conv_s8_case_saturates_its_shifted_pairs_under_the_scheme():
    """tests/data/isa/openvino-conv-s8-pairs.json (efficientnet_lite0's op 7 made small): output [0, 0, 0, 0]
    sums x = 127, 127 | 100, 120 | -128, -100 | 90, 127 by channel 0's weights, all 127: shifted to uint8
    (x + 128), three of the four pair sums (64770, 60452, 3556, 60071) saturate at 32767, so the sum is
    101857 - 128 * 1016 = -28191 where the exact one is 127 * 463 = 58801; 7 of the 16 outputs move, by up to
    119 LSB, and the same codes at zero point -128 (not shifted) give the golden under the scheme."""
    c = load_case(ROOT / CONV_S8)
    assert (c.op, c.inputs[0].dtype, c.inputs[0].zero_point, int(np.abs(c.inputs[1].data).max())) == \
        ("CONV_2D", "int8", [0], 127)
    x = np.asarray(c.inputs[0].data, np.int64).reshape(-1, 8)[0] + 128
    pairs = np.clip(x.reshape(4, 2).sum(axis=1) * 127, -32768, 32767)
    assert pairs.tolist() == [32767, 32767, 3556, 32767]                  # three pairs saturated
    want, scheme = golden(c)[0].ravel(), golden(c, "openvino-u8s8-pairs")[0].ravel()
    assert (want != scheme).sum() == 7 and int(np.abs(want.astype(int) - scheme).max()) == 119
    assert case_params(c)["zp_in"] == 0
    other = _other_zero_point(c, -128)
    assert np.array_equal(golden(other, "openvino-u8s8-pairs")[0], golden(other)[0])


HOST_ISA = frozenset(device_runner.isa_flags())


def test_openvino_conv_s8_pairs_element_for_element_on_this_cpu():
    """On a CPU where openvino-conv-s8-int16-pairs holds (this project's AVX2 host, no VNNI): OpenVINO gives
    the scheme openvino-u8s8-pairs's value on every element of the case, not the golden's, and the finding
    explains it there (the case's region, the host's ISA) and nowhere else (a VNNI CPU, SSE4.1 alone, another
    zero point); the same codes at zero point -128 are not shifted: the golden. Each case alone."""
    f = next(f for f in findings() if f.id == "openvino-conv-s8-int16-pairs")
    assert f.case == CONV_S8
    if not f.holds_on(HOST_ISA):
        pytest.skip(f"this CPU ({' '.join(sorted(HOST_ISA))}) is not where {f.id} holds: nothing expected here")
    t = get_target("openvino")
    ok, why = t.availability()
    if not ok:
        pytest.skip(f"openvino: {why}")
    c = load_case(ROOT / CONV_S8)
    other = _other_zero_point(c, -128)
    outs = [t.run([x], Timing(0, 1))[0] for x in (c, other)]
    assert [o.status for o in outs] == ["ok", "ok"], [o.reason for o in outs]
    got = np.asarray(outs[0].outputs[0]).ravel().tolist()
    assert got == golden(c, "openvino-u8s8-pairs")[0].ravel().tolist()
    assert got != golden(c)[0].ravel().tolist()
    assert np.asarray(outs[1].outputs[0]).ravel().tolist() == golden(other)[0].ravel().tolist()
    params = case_params(c)
    assert match(c.op, "openvino", c.variant, params=params, isa=HOST_ISA).id == f.id
    for isa in (HOST_ISA | {"avx512_vnni"}, HOST_ISA | {"avx_vnni"}, frozenset({"sse4_1"}), None):
        assert match(c.op, "openvino", c.variant, params=params, isa=isa) is None
    assert match(c.op, "openvino", c.variant, params=case_params(other), isa=HOST_ISA) is None


def test_conv_and_batch_matmul_pairs_run_along_the_reduced_axis():
    """CONV_2D pairs im2col's (ky, kx, c) with c fastest; BATCH_MATMUL pairs along K."""
    x = np.array([255, 255, 255, 255], np.uint8).reshape(1, 1, 2, 2)       # 1x1x2x2 NHWC
    w = np.array([127, 127, 127, 127], np.int8).reshape(1, 1, 2, 2)        # OHWI, a 1x2 kernel
    conv = Case(op="CONV_2D", attrs={"padding": "VALID", "stride_w": 1, "stride_h": 1, "dilation_w_factor": 1,
                                     "dilation_h_factor": 1, "fused_activation_function": "NONE"}, id="c", spec="qnn",
                inputs=[Tensor("uint8", (1, 1, 2, 2), x, [1.0], [0]), Tensor("int8", (1, 1, 2, 2), w, [1.0], [0])],
                outputs=[Tensor("uint8", (1, 1, 1, 1), None, [1024.0], [0])])
    # two pairs of 64770 -> 2 x 32767 = 65534 -> 63.998 -> 64 where the exact 129540 gives 126.504 -> 127
    assert int(golden(conv, "ort-avx2-u8s8")[0].ravel()[0]) == 64
    assert int(golden(conv, "ort-fp32-rne")[0].ravel()[0]) == 127
    a = np.array([255, 255, 255], np.uint8).reshape(1, 1, 3)
    b = np.array([127, 127, 127], np.int8).reshape(1, 3, 1)
    bmm = Case(op="BATCH_MATMUL", attrs={}, id="b", spec="qnn",
               inputs=[Tensor("uint8", (1, 1, 3), a, [1.0], [0]), Tensor("int8", (1, 3, 1), b, [1.0], [0])],
               outputs=[Tensor("uint8", (1, 1, 1), None, [512.0], [0])])
    # 32767 + 32385 = 65152 -> 127.25 -> 127; exact 97155 -> 189.76 -> 190 -> 255 clamped
    assert int(golden(bmm, "ort-avx2-u8s8")[0].ravel()[0]) == 127
    assert int(golden(bmm, "ort-fp32-rne")[0].ravel()[0]) == 190


# ----------------------------------------------------------------------------- findings

def test_a_finding_with_an_isa_condition_needs_the_isa_known_and_holding():
    f = Finding(id="x", op=("FULLY_CONNECTED",), target=("ort",), reason="r", isa_has=("avx2",),
                isa_lacks=("avx512_vnni", "avx_vnni"))
    assert f.matches("FULLY_CONNECTED", "ort", "qnn_u8", isa=frozenset({"avx2", "fma", "sse4_1"}))
    assert not f.matches("FULLY_CONNECTED", "ort", "qnn_u8", isa=frozenset({"avx2", "avx512_vnni"}))
    assert not f.matches("FULLY_CONNECTED", "ort", "qnn_u8", isa=frozenset({"sse4_1"}))
    assert not f.matches("FULLY_CONNECTED", "ort", "qnn_u8", isa=None)   # a device that did not say: new
    assert match("FULLY_CONNECTED", "ort", "qnn_u8", isa=frozenset({"avx2"})).id == "ort-avx2-u8s8-int16-pairs"
    assert match("FULLY_CONNECTED", "ort", "qnn_u8", isa=frozenset({"avx2", "avx_vnni"})) is None


def test_the_htp_cases_fall_in_their_findings_regions(tmp_path):
    dw = case_params(load_case(ROOT / "tests" / "data" / "htp-dw-clip-one-end.json"))
    assert dw["act"] == "RELU_N1_TO_1" and dw["act_inside"] is False    # bounds -136 -> -128 and 64
    bmm = case_params(load_case(ROOT / "tests" / "data" / "htp-bmm-rank5-batch.json"))
    assert bmm["rank"] == 5 and bmm["batch_last2_gt1"] is True
    inside = json.loads((ROOT / "tests" / "data" / "htp-dw-clip-one-end.json").read_text())
    inside["outputs"][0]["zero_point"] = [0]                            # bounds -100 and 100: applied
    (tmp_path / "inside.json").write_text(json.dumps(inside))
    assert case_params(load_case(tmp_path / "inside.json"))["act_inside"] is True


# ----------------------------------------------------------------------------- under QEMU

@needs_qemu_x86
def test_the_emulated_cpu_s_isa_is_cpuid_s_not_the_host_s():
    """Under qemu-x86_64 /proc/cpuinfo is this host's; the device runner reads CPUID, which QEMU emulates
    (Haswell's: the smoke below)."""
    t = make_transport(parse_device(f"qemu-x86:?cpu=Nehalem&qemu={QEMU_X86}"))
    res = t.run([t.python, str(Path(device_runner.__file__)), "--probe"], timeout=120)
    assert res.rc == 0, res.tail()
    facts = json.loads(res.stdout.strip().splitlines()[-1])
    assert facts["isa"] == ["sse4_1"], facts


@needs_qemu_x86
def test_cross_device_smoke_local_and_haswell(run_suite):
    """ort's FULLY_CONNECTED-qnn_u8-000 on this host and as on Haswell (AVX2, no VNNI): the Haswell rows
    are the finding with its ISA condition, and the table compares the two devices (they differ where this
    host has VNNI)."""
    proc, rd = run_suite("--target=ort", "--device=local", f"--device=qemu-x86:?cpu=Haswell&qemu={QEMU_X86}",
                         "--ops", "FULLY_CONNECTED", "--case-id=FULLY_CONNECTED-qnn_u8-000", "-k", "not test_group",
                         timeout=400)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-2000:]
    rows = {r["device"]: r for r in rows_written(rd)}
    hw = rows["qemu-x86:Haswell"]
    assert hw["device_isa"] == "avx2 fma sse4_1" and hw["device_emulated"] == "yes"
    assert hw["status"] == "fail" and hw["finding"] == "ort-avx2-u8s8-int16-pairs", hw
    assert "cross-device: 1 (op, target)s compared between local, qemu-x86:Haswell" in proc.stdout
    md = (rd / "summary.md").read_text()
    assert "| FULLY_CONNECTED | ort | local, qemu-x86:Haswell | 1 |" in md and "device qemu-x86:Haswell: " in md
    doc = json.loads((rd / "run.json").read_text())
    assert doc["host"]["isa"] == device_runner.isa_flags()
    assert doc["devices_isa"]["qemu-x86:Haswell"] == ["avx2", "fma", "sse4_1"]
    if "avx512_vnni" in device_runner.isa_flags():
        assert rows["local"]["status"] == "pass" and "| FULLY_CONNECTED | ort | local, qemu-x86:Haswell | 1 | 1 |" in md


def test_a_group_s_bias_finding_holds_on_the_isa_of_every_row():
    from reports.causes import BiasTally
    t = BiasTally()
    for isa in ("sse4_1", "sse4_1"):
        t.add({"status": "pass", "isa": isa})
    assert t.isa == frozenset({"sse4_1"})
    assert match("ADD", "ort", "*", "bias-", isa=t.isa).id == "ort-sse41-add-bias-low"
    assert match("ADD", "ort", "*", "bias-", isa=frozenset({"avx2", "sse4_1"})) is None
    t.add({"status": "pass"})   # a row whose CPU is not recorded: the group's ISA is unknown
    assert t.isa is None and match("ADD", "ort", "*", "bias-", isa=t.isa) is None


@needs_qemu_x86
def test_openvino_isa_findings_reproduce_under_haswell():
    """Each openvino finding of tests/data/isa, its minimal case under qemu-x86_64 -cpu Haswell (AVX2, no VNNI;
    Nehalem's SSE4.2 gives the same): OpenVINO gives the scheme openvino-u8s8-pairs's value, not the golden's,
    and the finding explains it there (the device's ISA, the case's region), not on a CPU with VNNI nor
    on aarch64. Each case alone: OpenVINO optimizes a merged model as a whole."""
    ok, why = get_target("openvino").availability()
    if not ok:
        pytest.skip(f"openvino: {why}")
    mine = [f for f in findings() if f.target == ("openvino",) and f.case.startswith("tests/data/isa/")]
    assert {f.id for f in mine} == {"openvino-fc-int16-pairs", "openvino-conv-u8-int16-pairs",
                                    "openvino-conv-s8-int16-pairs"}
    cases = [load_case(ROOT / f.case) for f in mine]
    r = RemoteTarget("openvino", f"qemu-x86:?cpu=Haswell&qemu={QEMU_X86}&merge=0")
    try:
        outs = r.run(cases, Timing(0, 1))
        isa = frozenset(r.device_facts()["qemu-x86:Haswell"]["isa"])
    finally:
        r.close()
    assert isa == {"avx2", "fma", "sse4_1"}
    for f, c, o in zip(mine, cases, outs):
        assert o.status == "ok", f"{f.id}: {o.status}: {o.reason}"
        got = [np.asarray(g).ravel().tolist() for g in o.outputs]
        assert got == [w.ravel().tolist() for w in golden(c, "openvino-u8s8-pairs")], f.id
        assert got != [w.ravel().tolist() for w in golden(c)], f"{f.id}: now gives the golden's value"
        params = case_params(c)
        assert match(c.op, "openvino", c.variant, params=params, isa=isa).id == f.id
        if f.holds_on(frozenset({"sse4_1"})):   # Nehalem (openvino-conv-s8-int16-pairs: measured with AVX2 only)
            assert match(c.op, "openvino", c.variant, params=params, isa=frozenset({"sse4_1"})).id == f.id
        for other in (isa | {"avx512_vnni"}, isa | {"avx_vnni"}, frozenset({"asimd", "asimddp"})):
            assert match(c.op, "openvino", c.variant, params=params, isa=other) is None
