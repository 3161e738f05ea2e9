"""The CI recipes of examples/ci (issue #31): the GitHub Actions workflow and the Kubernetes Jobs
pass their schemas (check-jsonschema: its vendored GitHub workflow schema; a small Kubernetes
subset in tests/data/schemas), and the workflow's shell steps run here in order, job by job, over
four nights: a whole first night (no baseline: it must work), a night with a shard missing, a night
with a shard from the night before (both refused, nothing merged), and a whole night compared with
the first. The `uses:` steps are stood in for by copies (artifacts, cache) in a scratch folder."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

from tests.conftest import ROOT

yaml = pytest.importorskip("yaml")
CI = ROOT / "examples" / "ci"
WORKFLOW = CI / "github" / "qconform-nightly.yml"
K8S = sorted((CI / "kubernetes").glob("*.yaml"))
K8S_SCHEMA = ROOT / "tests" / "data" / "schemas" / "k8s-job.json"
BIN = Path(sys.executable).parent
SLICE = "--target=ref --ops=ADD,MUL --cases-per-op=2"


def _check_jsonschema(*args: str) -> subprocess.CompletedProcess:
    exe = BIN / "check-jsonschema"
    if not exe.exists():
        pytest.skip("check-jsonschema (the dev extra) is not installed")
    return subprocess.run([str(exe), *args], capture_output=True, text=True, timeout=120)


def test_the_recipes_pass_their_schemas_and_a_wrong_field_fails(tmp_path):
    p = _check_jsonschema("--builtin-schema", "vendor.github-workflows", str(WORKFLOW))
    assert p.returncode == 0, p.stdout + p.stderr
    p = _check_jsonschema("--schemafile", str(K8S_SCHEMA), *map(str, K8S))
    assert p.returncode == 0, p.stdout + p.stderr
    assert len(K8S) == 2 and (CI / "kubernetes" / "Dockerfile").is_file()
    # the checks can fail: a misspelt key, an enum value Kubernetes does not know
    bad = tmp_path / "bad.yml"
    bad.write_text(WORKFLOW.read_text().replace("runs-on:", "runs_on:", 1))
    assert _check_jsonschema("--builtin-schema", "vendor.github-workflows", str(bad)).returncode == 1
    job = yaml.safe_load(K8S[1].read_text())
    assert job["spec"]["completionMode"] == "Indexed"
    job["spec"]["completionMode"] = "indexed"
    bad.write_text(yaml.safe_dump(job))
    assert _check_jsonschema("--schemafile", str(K8S_SCHEMA), str(bad)).returncode == 1
    wf = yaml.safe_load(WORKFLOW.read_text())
    assert wf[True]["schedule"][0]["cron"]   # (YAML 1.1 reads the key `on` as True)
    assert wf["jobs"]["shard"]["strategy"]["matrix"]["shard"] == list(range(1, int(wf["env"]["SHARDS"]) + 1))
    install = next(s for s in wf["jobs"]["merge"]["steps"] if s.get("id") == "install")
    assert install["run"].strip() == 'python -m pip install ".[report]"'   # no runtimes in the merge job


class Runner:
    """Runs a workflow job's steps as GitHub Actions would, in a fresh workspace per job."""

    def __init__(self, tmp: Path, workflow: dict):
        self.tmp, self.wf = tmp, workflow
        self.cache = tmp / "actions-cache"            # actions/cache: the report directory between nights
        self.log: list[str] = []

    def env(self, run_id: int, ws: Path) -> dict:
        env = {k: v for k, v in os.environ.items() if not k.startswith(("PYTEST_", "QCONFORM_", "GITHUB_"))}
        env.update({k: str(v) for k, v in self.wf["env"].items()})
        env.update(QCONFORM_ARGS=SLICE, GITHUB_RUN_ID=str(run_id), GITHUB_REPOSITORY="example/kernels",
                   PATH=f"{BIN}:{env.get('PATH', '')}", HOME=str(ws))
        return env

    def job(self, name: str, run_id: int, matrix: dict | None = None) -> dict[str, dict]:
        """Run job ``name``: {step id: {"outcome", "outputs"}} (steps without an id: by index)."""
        ws = self.tmp / f"run{run_id}" / (name + ("-" + "-".join(map(str, matrix.values())) if matrix else ""))
        ws.mkdir(parents=True)
        (ws / ".venv").symlink_to(ROOT / ".venv")   # actions/checkout + scripts/setup.sh: this checkout's
        env = self.env(run_id, ws)
        steps: dict[str, dict] = {}
        ok = True
        for i, step in enumerate(self.wf["jobs"][name]["steps"]):
            sid = step.get("id", str(i))
            if not self._if(step.get("if"), steps, ok):
                steps[sid] = {"outcome": "skipped", "outputs": {}}
                continue
            if "uses" in step:
                self._uses(step, ws, run_id, name, matrix, steps, env)
                steps[sid] = {"outcome": "success", "outputs": {}}
                continue
            if sid in ("setup", "install"):   # installing: this checkout's .venv stands in
                steps[sid] = {"outcome": "success", "outputs": {}}
                continue
            out, summary = ws / f".out-{i}", ws / ".summary"
            out.touch()
            step_env = {**env, **{k: self._sub(str(v), steps, matrix, env) for k, v in (step.get("env") or {}).items()},
                        "GITHUB_OUTPUT": str(out), "GITHUB_STEP_SUMMARY": str(summary)}
            p = subprocess.run(["bash", "--noprofile", "--norc", "-eo", "pipefail", "-c",
                                self._sub(step["run"], steps, matrix, env)],
                               cwd=ws, env=step_env, capture_output=True, text=True, timeout=600)
            self.log.append(f"== {name} {sid} exit {p.returncode}\n{p.stdout[-4000:]}{p.stderr[-4000:]}")
            outputs = dict(ln.split("=", 1) for ln in out.read_text().splitlines() if "=" in ln)
            steps[sid] = {"outcome": "success" if p.returncode == 0 else "failure", "outputs": outputs,
                          "stdout": p.stdout, "stderr": p.stderr, "exit": p.returncode}
            ok = ok and p.returncode == 0
        steps["_ws"] = {"path": ws}
        return steps

    def _sub(self, text: str, steps, matrix, env) -> str:
        def one(m):
            expr = m.group(1).strip()
            if expr.startswith("matrix."):
                return str(matrix[expr[7:]])
            if expr.startswith("env."):
                return env[expr[4:]]
            if expr == "github.run_id":
                return env["GITHUB_RUN_ID"]
            s = re.fullmatch(r"steps\.(\w+)\.outputs\.(\w+)", expr)
            if s:
                return steps.get(s[1], {}).get("outputs", {}).get(s[2], "")
            raise AssertionError(f"expression the runner does not know: {expr}")
        return re.sub(r"\$\{\{(.*?)\}\}", one, text)

    def _if(self, cond, steps, ok: bool) -> bool:
        if cond is None:
            return ok
        text = str(cond)
        text = re.sub(r"steps\.(\w+)\.outputs\.(\w+)",
                      lambda m: repr(steps.get(m[1], {}).get("outputs", {}).get(m[2], "")), text)
        text = re.sub(r"steps\.(\w+)\.outcome", lambda m: repr(steps.get(m[1], {}).get("outcome", "")), text)
        has_status = "always()" in text
        text = text.replace("always()", "True").replace("&&", " and ").replace("||", " or ")
        assert re.fullmatch(r"[\w\s'()=!.]*", text), f"condition the runner does not know: {cond}"
        value = eval(text, {"__builtins__": {}}, {})   # noqa: S307 (our own workflow's condition, checked above)
        return bool(value) and (ok or has_status)

    def _uses(self, step, ws: Path, run_id: int, job: str, matrix, steps, env) -> None:
        action = step["uses"].split("@")[0]
        w = step.get("with") or {}
        arts = self.tmp / f"run{run_id}" / "artifacts"
        if action in ("actions/checkout", "actions/setup-python"):
            return
        if action == "actions/upload-artifact" and job == "shard":
            src = ws / self._sub(w["path"], steps, matrix, env)
            if src.is_dir():
                shutil.copytree(src, arts / self._sub(w["name"], steps, matrix, env), symlinks=True)
        elif action == "actions/download-artifact":
            (ws / w["path"]).mkdir(parents=True, exist_ok=True)
            for a in sorted(arts.glob(w["pattern"])) if arts.is_dir() else ():
                shutil.copytree(a, ws / w["path"] / a.name, symlinks=True)
        elif action == "actions/cache/restore":
            if self.cache.is_dir():
                shutil.copytree(self.cache, ws / w["path"], symlinks=True)
        elif action == "actions/cache/save":
            if (ws / w["path"]).is_dir():
                shutil.rmtree(self.cache, ignore_errors=True)
                shutil.copytree(ws / w["path"], self.cache, symlinks=True)
        elif action == "mikepenz/action-junit-report":
            xml = ws / self._sub(w["report_paths"], steps, matrix, env)
            root = ET.parse(xml).getroot()   # the merged run's one JUnit file
            assert root.find("testsuite") is not None and int(root.find("testsuite").get("tests")) > 0
            self.log.append(f"== published {xml}")
        elif action == "actions/upload-artifact":
            return
        else:
            raise AssertionError(f"action the runner does not stand in for: {action}")


def _dirty() -> bool:
    p = subprocess.run(["git", "status", "--porcelain", "--untracked-files=no"], cwd=ROOT, capture_output=True, text=True)
    return p.returncode == 0 and bool(p.stdout.strip())


def test_the_github_workflow_runs_as_written_over_four_nights(tmp_path):
    if _dirty():
        pytest.skip("the checkout has uncommitted changes: its shards are git.dirty, which merge refuses")
    wf = yaml.safe_load(WORKFLOW.read_text())
    r = Runner(tmp_path, wf)
    where = lambda: "\n".join(r.log)[-12000:]   # noqa: E731

    # night 1: both shards; the first night has no baseline and must work
    for k in (1, 2):
        s = r.job("shard", 101, {"shard": k})
        assert all(v.get("outcome") != "failure" for v in s.values()), where()
    m = r.job("merge", 101)
    assert m["merge"]["outcome"] == "success" and m["merge"]["outputs"]["status"] == "0", where()
    assert m["diff"]["outcome"] == "success" and "first night" in m["diff"]["stdout"], where()
    night1 = m["merge"]["outputs"]["night"]
    assert (r.cache / "runs" / night1 / "junit.xml").is_file() and (r.cache / "latest").is_symlink()

    # night 2: shard 2 did not run: refused, nothing merged, the job fails; history still shows night 1
    r.job("shard", 102, {"shard": 1})
    m = r.job("merge", 102)
    assert m["merge"]["outcome"] == "failure" and m["merge"]["outputs"]["status"] == "2", where()
    assert "shard(s) 2/2 missing" in m["merge"]["stderr"] and m["diff"]["outcome"] == "skipped"
    assert sorted(p.name for p in (r.cache / "runs").iterdir()) == [night1]

    # night 3: shard 2's folder is night 1's (a stale artifact): refused for its run group
    r.job("shard", 103, {"shard": 1})
    shutil.copytree(tmp_path / "run101" / "artifacts" / "shard-2", tmp_path / "run103" / "artifacts" / "shard-2")
    m = r.job("merge", 103)
    assert m["merge"]["outputs"]["status"] == "2" and "options.run_group" in m["merge"]["stderr"], where()
    assert sorted(p.name for p in (r.cache / "runs").iterdir()) == [night1]

    # night 4: whole again: merged and compared with night 1 (the latest merged night)
    for k in (1, 2):
        r.job("shard", 104, {"shard": k})
    m = r.job("merge", 104)
    assert m["merge"]["outputs"]["status"] == "0" and m["diff"]["outcome"] == "success", where()
    assert f"runs/{night1}" in (m["_ws"]["path"] / "diff.md").read_text()
    hist = next(v for k, v in m.items() if k not in ("_ws",) and "qconform history" in (v.get("stdout") or ""))
    assert "2 runs in 1 case set" in hist["stdout"]
    doc = json.loads((r.cache / "runs" / m["merge"]["outputs"]["night"] / "run.json").read_text())
    assert {s["run_group"] for s in doc["shards"]} == {"github-example/kernels-104"}


def test_the_readmes_nightly_recipe_works_on_its_first_night_and_the_second(tmp_path):
    """README.md's nightly recipe as written (its targets swapped for the reference), two nights:
    the first has no baseline and must pass, the second is compared with it."""
    text = (ROOT / "README.md").read_text().split("## Nightly recipe", 1)[1]
    script = text.split("```sh\n", 1)[1].split("```", 1)[0].replace("--target=ort,tflite,htp", SLICE)
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PYTEST_", "QCONFORM_", "GITHUB_"))}
    env.update(PATH=f"{BIN}:{env.get('PATH', '')}", HOME=str(tmp_path))
    for night in (1, 2):
        p = subprocess.run(["bash", "-c", script], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=600)
        assert p.returncode == 0, p.stdout[-3000:] + p.stderr[-3000:]
        assert ("first night" in p.stdout) == (night == 1)
    assert "NO REGRESSION" in (tmp_path / "diff.md").read_text()
    assert (tmp_path / "nightly" / "history" / "history.json").is_file()


def test_the_kubernetes_jobs_scripts_run_and_a_pod_that_did_not_run_tonight_is_refused(tmp_path):
    """The Jobs' container scripts, /reports a scratch folder: night 1 both pods and the merge (the
    first night: no diff); night 2 only pod 0 runs, so shard 2's newest folder is last night's: the
    merge refuses it for its run group (the shard Job's uid) and merges nothing."""
    if _dirty():
        pytest.skip("the checkout has uncommitted changes: its shards are git.dirty, which merge refuses")
    docs = {p.name: yaml.safe_load(p.read_text()) for p in K8S}

    def script(name):
        c = docs[name]["spec"]["template"]["spec"]["containers"][0]
        env = {e["name"]: e.get("value", "") for e in c["env"] if "value" in e}
        return c["args"][0].replace("/reports", str(tmp_path / "pv")), env

    base = {k: v for k, v in os.environ.items() if not k.startswith(("PYTEST_", "QCONFORM_", "GITHUB_"))}
    base.update(PATH=f"{BIN}:{base.get('PATH', '')}", HOME=str(tmp_path))

    def sh(name, **env):
        text, own = script(name)
        full = {**base, **own, **env}
        if "QCONFORM_ARGS" in full:
            full["QCONFORM_ARGS"] = SLICE
        return subprocess.run(["sh", "-c", text], cwd=tmp_path, env=full, capture_output=True, text=True, timeout=600)

    for i in (0, 1):
        p = sh("shards-job.yaml", JOB_COMPLETION_INDEX=str(i), QCONFORM_RUN_GROUP="uid-1")
        assert p.returncode == 0, p.stdout[-3000:] + p.stderr[-3000:]
    p = sh("merge-job.yaml", RUN_GROUP="uid-1")
    assert p.returncode == 0 and "first night" in p.stdout, p.stdout[-3000:] + p.stderr[-3000:]
    nights = sorted((tmp_path / "pv" / "nightly" / "runs").iterdir())
    assert len(nights) == 1 and (nights[0] / "junit.xml").is_file()
    p = sh("shards-job.yaml", JOB_COMPLETION_INDEX="0", QCONFORM_RUN_GROUP="uid-2")
    assert p.returncode == 0
    p = sh("merge-job.yaml", RUN_GROUP="uid-2")
    assert p.returncode == 2 and "options.run_group" in p.stderr, p.stdout[-3000:] + p.stderr[-3000:]
    assert sorted((tmp_path / "pv" / "nightly" / "runs").iterdir()) == nights
