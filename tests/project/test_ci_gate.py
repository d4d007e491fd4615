"""abifit as the gate in CI: the GitHub Action (action.yml), the pre-commit hook
(.pre-commit-hooks.yaml) and the snippets of docs/ci.md, run on a fixture repository.

The repository pins, in requirements.txt, an extension (extfree, whose module was built against
hostpkg 1.0's library) beside hostpkg: 2.0 (which dropped a symbol the module needs) in the
broken lock, 1.0 in the good one; a loopback index serves the wheels. The action's steps run as
GitHub's runner runs a composite action's `run` steps (bash, with the step's `env`, `inputs` put
in, `GITHUB_OUTPUT`, `GITHUB_STEP_SUMMARY`, `RUNNER_TEMP`, `GITHUB_ACTION_PATH`); its `uses`
steps (setup-python, the SARIF upload) are recorded, not run. Without `install: false` the
action installs abifit from its own revision: tests/project/test_ci_install.py runs that step.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import shlex
import subprocess
import sys
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path

import pytest
import yaml

from helpers import REPO, lock_world
from httpserver import LoopbackIndex, LoopbackServer, publish_index

ACTION = REPO / "action.yml"
HOOKS = REPO / ".pre-commit-hooks.yaml"
DOCS = REPO / "docs" / "ci.md"
BIN = Path(sys.executable).parent  # where this venv's `abifit` is

BROKEN = "# the stack of the service\nhostpkg==2.0\nextfree==1.0\n"
GOOD = "# the stack of the service\nhostpkg==1.0\nextfree==1.0\n"
EXTFREE_LINE = 3


@pytest.fixture(scope="module")
def index(binaries: dict[str, bytes]) -> Iterator[LoopbackIndex]:
    with LoopbackServer() as server:
        yield publish_index(server, lock_world(binaries))


def repository(root: Path, requirements: str) -> Path:
    root.mkdir()
    (root / "requirements.txt").write_text(requirements)
    return root


def environment(index: LoopbackIndex, home: Path) -> dict[str, str]:
    """A CI job's environment: this venv's abifit on PATH, the loopback index, a cache of its
    own, no pip configuration of this machine's."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PIP_", "ABIFIT_", "UV_"))}
    env.update(PATH=f"{BIN}{os.pathsep}{env.get('PATH', '/usr/bin:/bin')}", HOME=str(home),
               XDG_CACHE_HOME=str(home / ".cache"), PIP_CONFIG_FILE="/dev/null",
               PIP_INDEX_URL=index.url, NO_COLOR="1")
    return env


# ---------------------------------------------------------------------------------------------
# The action's steps, run as the runner runs a composite action


_EXPRESSION = re.compile(r"\$\{\{\s*(.*?)\s*\}\}")


@dataclass
class Job:
    """What running the action left: each step's exit code and output, the step outputs, the
    job summary, and the `uses` steps that would have run."""

    codes: dict[str, int] = field(default_factory=dict)
    output: dict[str, str] = field(default_factory=dict)
    outputs: dict[str, dict[str, str]] = field(default_factory=dict)
    summary: str = ""
    used: list[str] = field(default_factory=list)

    @property
    def failed(self) -> bool:
        return any(self.codes.values())


def _value(expression: str, inputs: Mapping[str, str], job: Job) -> str:
    parts = expression.split(".")
    if parts[0] == "inputs" and len(parts) == 2:
        return inputs[parts[1]]
    if parts[0] == "steps" and len(parts) == 4 and parts[2] == "outputs":
        return job.outputs.get(parts[1], {}).get(parts[3], "")
    raise AssertionError(f"an expression this harness does not know: {expression}")


def _put_in(text: str, inputs: Mapping[str, str], job: Job) -> str:
    return _EXPRESSION.sub(lambda m: _value(m.group(1), inputs, job), text)


def _holds(condition: str, inputs: Mapping[str, str], job: Job) -> bool:
    """A step's `if:` of the forms the action uses: terms joined by `&&`, each `always()` or
    `X == 'v'` / `X != 'v'` over inputs and step outputs."""
    for term in (t.strip() for t in condition.split("&&")):
        if term == "always()":
            continue
        m = re.fullmatch(r"([\w.-]+)\s*(==|!=)\s*'([^']*)'", term)
        assert m is not None, f"a condition this harness does not know: {term}"
        equal = _value(m.group(1), inputs, job) == m.group(3)
        if equal != (m.group(2) == "=="):
            return False
    return True


def run_action(inputs: Mapping[str, str], cwd: Path, env: Mapping[str, str],
               tmp: Path) -> Job:
    action = yaml.safe_load(ACTION.read_text())
    declared = action["inputs"]
    unknown = set(inputs) - set(declared)
    assert not unknown, f"inputs the action does not declare: {unknown}"
    given = {name: str(inputs.get(name, spec.get("default", ""))) for name, spec in
             declared.items()}
    job = Job()
    summary = tmp / "summary.md"
    summary.write_text("")
    for number, step in enumerate(action["runs"]["steps"]):
        name = step.get("id", f"step{number}")
        failed_before = job.failed
        condition = step.get("if", "success()")
        if condition == "success()":
            if failed_before:
                continue
        elif not _holds(condition, given, job) or (failed_before and "always()" not in
                                                        condition):
            continue
        if "uses" in step:
            job.used.append(step["uses"])
            continue
        outputs = tmp / f"{name}.out"
        outputs.write_text("")
        script = tmp / f"{name}.sh"
        script.write_text(_put_in(step["run"], given, job))
        step_env = {**env, "GITHUB_ACTION_PATH": str(REPO), "GITHUB_OUTPUT": str(outputs),
                    "GITHUB_STEP_SUMMARY": str(summary), "RUNNER_TEMP": str(tmp),
                    **{k: _put_in(str(v), given, job) for k, v in step.get("env", {}).items()}}
        assert step["shell"] == "bash"
        done = subprocess.run(["bash", "--noprofile", "--norc", "-eo", "pipefail", str(script)],
                              cwd=cwd, env=step_env, capture_output=True, text=True,
                              timeout=300, check=False)
        job.codes[name] = done.returncode
        job.output[name] = done.stdout + done.stderr
        job.outputs[name] = dict(line.split("=", 1) for line in
                                 outputs.read_text().splitlines() if "=" in line)
    job.summary = summary.read_text()
    return job


def annotations(text: str) -> list[str]:
    return [line for line in text.splitlines() if line.startswith("::")]


def test_the_action_fails_a_broken_lock_on_its_line(
        index: LoopbackIndex, tmp_path: Path) -> None:
    """The broken lock fails the job, with one error annotation on the line that pins extfree,
    a SARIF file with that result, a job summary naming the module; the upload is asked for."""
    repo = repository(tmp_path / "repo", BROKEN)
    job = run_action({"requirements": "requirements.txt", "install": "false", "sarif": "true",
                      "python-version": "3.11"},
                     repo, environment(index, tmp_path), tmp_path)
    assert job.codes["check"] == 0  # the check step itself goes on, for the upload
    assert job.outputs["check"]["exit-code"] == "1"
    assert job.failed  # the last step ends the job with abifit's code
    errors = [a for a in annotations(job.output["check"]) if a.startswith("::error")]
    assert len(errors) == 1, job.output["check"]
    assert errors[0].startswith(f"::error file=requirements.txt,line={EXTFREE_LINE},")
    assert "extpkg._ops" in errors[0]
    sarif = json.loads(Path(job.outputs["check"]["sarif-file"]).read_text())
    (result,) = sarif["runs"][0]["results"]
    location = result["locations"][0]["physicalLocation"]
    assert location["artifactLocation"]["uri"] == "requirements.txt"
    assert location["region"]["startLine"] == EXTFREE_LINE
    assert job.used == ["github/codeql-action/upload-sarif@v3"]
    assert "extpkg._ops" in job.summary and "|" in job.summary


def test_the_action_passes_a_good_lock(index: LoopbackIndex, tmp_path: Path) -> None:
    repo = repository(tmp_path / "repo", GOOD)
    job = run_action({"requirements": "requirements.txt", "install": "false",
                      "python-version": "3.11"},
                     repo, environment(index, tmp_path), tmp_path)
    assert not job.failed, job.output
    assert job.outputs["check"]["exit-code"] == "0"
    assert annotations(job.output["check"]) == []
    sarif = json.loads(Path(job.outputs["check"]["sarif-file"]).read_text())
    assert sarif["runs"][0]["results"] == []
    assert job.used == []  # no SARIF upload unless asked
    assert "fits" in job.summary


def test_the_action_runs_setup_and_install_unless_told_not_to() -> None:
    """With the defaults, the action sets up Python and installs abifit from its own revision
    before checking (tests/project/test_ci_install.py runs that install)."""
    steps = yaml.safe_load(ACTION.read_text())["runs"]["steps"]
    job = Job()
    inputs = {"install": "true", "sarif": "false"}
    running = [s.get("uses") or s["run"] for s in steps
               if _holds(s.get("if", "always()"), inputs, job)]
    assert running[0] == "actions/setup-python@v5"
    assert '"$GITHUB_ACTION_PATH"' in running[1] and "pip install" in running[1]


# ---------------------------------------------------------------------------------------------
# The pre-commit hook


def hook() -> dict[str, object]:
    (only,) = yaml.safe_load(HOOKS.read_text())
    assert isinstance(only, dict)
    return only


@pytest.mark.parametrize(("path", "checked"), [
    ("requirements.txt", True), ("requirements-dev.txt", True), ("ci/requirements/gpu.txt", False),
    ("deploy/requirements-cuda.txt", True), ("uv.lock", True), ("svc/uv.lock", True),
    ("pylock.toml", True), ("pylock.gpu.toml", True), ("pyproject.toml", False),
    ("notes.txt", False), ("uv.lock.bak", False), ("requirements.in", True),
])
def test_the_hook_runs_on_locks_and_requirements_files(path: str, checked: bool) -> None:
    assert bool(re.search(str(hook()["files"]), path)) is checked


@pytest.mark.parametrize(("requirements", "code"), [(BROKEN, 1), (GOOD, 0)])
def test_the_hook_gates_a_commit(index: LoopbackIndex, tmp_path: Path, requirements: str,
                                 code: int) -> None:
    """The hook's entry with the changed files, as pre-commit runs it (`pass_filenames`)."""
    spec = hook()
    assert spec["pass_filenames"] is True and spec["language"] == "python"
    repo = repository(tmp_path / "repo", requirements)
    env = environment(index, tmp_path)
    command = [*shlex.split(str(spec["entry"])), "--python-version", "3.11", "requirements.txt"]
    done = subprocess.run(command, cwd=repo, env=env, capture_output=True, text=True,
                          timeout=300, check=False)
    assert done.returncode == code, done.stdout + done.stderr
    assert ("extpkg._ops" in done.stdout) is (code == 1)


# ---------------------------------------------------------------------------------------------
# The snippets of docs/ci.md


def snippet(first_line: str) -> object:
    """The YAML block of docs/ci.md whose first line is `first_line` (a comment naming it)."""
    blocks = re.findall(r"```yaml\n(.*?)```", DOCS.read_text(), re.S)
    found = [b for b in blocks if b.splitlines()[0] == first_line]
    assert len(found) == 1, f"docs/ci.md has no one block beginning {first_line!r}"
    return yaml.safe_load(found[0])


def test_the_workflow_snippet_runs_the_action(index: LoopbackIndex, tmp_path: Path) -> None:
    """The workflow of docs/ci.md uses the action with inputs it declares; run with them (the
    fixture's own file and target in place of the snippet's), the broken lock fails the job."""
    workflow = snippet("# .github/workflows/abifit.yml")
    assert isinstance(workflow, dict)
    steps = workflow["jobs"]["stack"]["steps"]
    (step,) = [s for s in steps if str(s.get("uses", "")).startswith("abifit/abifit@")]
    inputs = {k: str(v).lower() if isinstance(v, bool) else str(v)
              for k, v in step["with"].items()}
    assert inputs["sarif"] == "true"
    inputs.update(requirements="requirements.txt", host="", install="false")
    inputs["python-version"] = "3.11"
    repo = repository(tmp_path / "repo", BROKEN)
    job = run_action(inputs, repo, environment(index, tmp_path), tmp_path)  # inputs checked
    assert job.failed and job.outputs["check"]["exit-code"] == "1"
    assert job.used == ["github/codeql-action/upload-sarif@v3"]


@pytest.mark.parametrize(("requirements", "code", "failures"), [(BROKEN, 1, 1), (GOOD, 0, 0)])
def test_the_gitlab_snippet(index: LoopbackIndex, tmp_path: Path, requirements: str,
                            code: int, failures: int) -> None:
    """The GitLab job's script (abifit already installed; the fixture's file and Python in
    place of uv.lock and 3.12) exits with the verdict and writes the JUnit report it names."""
    from junitparser import JUnitXml

    job = snippet("# .gitlab-ci.yml")
    assert isinstance(job, dict)
    spec = job["abifit"]
    script = [line for line in spec["script"] if not line.startswith("pip install")]
    assert spec["script"][0] == "pip install abifit"
    repo = repository(tmp_path / "repo", requirements)
    env = environment(index, tmp_path)
    for line in script:
        command = line.replace("uv.lock", "requirements.txt").replace("3.12", "3.11")
        done = subprocess.run(["bash", "-c", command], cwd=repo, env=env, capture_output=True,
                              text=True, timeout=300, check=False)
        assert done.returncode == code, done.stdout + done.stderr
    report = JUnitXml.fromfile(str(repo / spec["artifacts"]["reports"]["junit"]))
    assert sum(suite.failures for suite in report) == failures
    assert (repo / spec["artifacts"]["paths"][0]).read_text().startswith("###")


def test_the_precommit_snippet_names_the_hook(index: LoopbackIndex, tmp_path: Path) -> None:
    """The configuration of docs/ci.md names this repository's hook, and the hook with its
    arguments fails a commit of the broken lock."""
    config = snippet("# .pre-commit-config.yaml")
    assert isinstance(config, dict)
    (repo_spec,) = config["repos"]
    (used,) = repo_spec["hooks"]
    assert used["id"] == hook()["id"]
    repo = repository(tmp_path / "repo", BROKEN)
    args = [a.replace("3.12", "3.11") for a in used["args"]]
    command = [*shlex.split(str(hook()["entry"])), *args, "requirements.txt"]
    done = subprocess.run(command, cwd=repo, env=environment(index, tmp_path),
                          capture_output=True, text=True, timeout=300, check=False)
    assert done.returncode == 1 and "extpkg._ops" in done.stdout, done.stdout + done.stderr


def pylock(path: Path, pins: dict[str, str], url: Callable[[str], str],
           digest: Callable[[str], str]) -> None:
    """A PEP 751 lock of another tool pinning `pins` (name -> version), each with its wheel:
    the file named `NAME-VERSION-...whl`, at `url(filename)`, its sha256 `digest(filename)`."""
    text = 'lock-version = "1.0"\ncreated-by = "uv"\n'
    for name, version in pins.items():
        tag = "cp310-abi3-linux_x86_64" if name == "extfree" else "py3-none-linux_x86_64"
        filename = f"{name}-{version}-{tag}.whl"
        text += (f'\n[[packages]]\nname = "{name}"\nversion = "{version}"\nwheels = [{{ '
                 f'name = "{filename}", url = "{url(filename)}", hashes = {{ sha256 = '
                 f'"{digest(filename)}" }} }}]\n')
    path.write_text(text)


def comment_line() -> str:
    """The `abifit diff` line of the pull request step of docs/ci.md."""
    block = re.search(r"```yaml\n# a step of a pull request's job.*?```", DOCS.read_text(), re.S)
    assert block is not None
    (line,) = [x.strip() for x in block.group(0).splitlines() if "abifit diff" in x]
    return line


def test_the_comment_snippet_says_what_a_new_lock_breaks(index: LoopbackIndex,
                                                          tmp_path: Path) -> None:
    """The pull request comment's `abifit diff` line (the fixture's Python in place of 3.12)
    on the base lock and a new one with hostpkg 2.0: the step goes on (exit 1 is a verdict)
    and the comment names the module the new lock breaks, and the version change."""
    files = index.files
    for name, host in (("pylock.base.toml", "1.0"), ("pylock.toml", "2.0")):
        pylock(tmp_path / name, {"hostpkg": host, "extfree": "1.0"},
               lambda f: index.server.url(f"/files/{f}"),
               lambda f: hashlib.sha256(files[f]).hexdigest())
    line = comment_line().replace("3.12", "3.11")
    done = subprocess.run(["bash", "-c", line], cwd=tmp_path, env=environment(index, tmp_path),
                          capture_output=True, text=True, timeout=300, check=False)
    assert done.returncode == 0, done.stderr
    comment = (tmp_path / "comment.md").read_text()
    assert comment.startswith("### abifit diff: breaks\n\nA: `pylock.base.toml` → B: "
                              "`pylock.toml`\n\nB breaks 1 module(s) that A loaded\n")
    assert "| extfree | `extpkg._ops` | " in comment
    assert "| hostpkg | 1.0 | 2.0 |" in comment


def test_the_comment_snippet_says_what_two_locks_can_tell(index: LoopbackIndex,
                                                          tmp_path: Path) -> None:
    """The same line on two locks whose wheels are nowhere to be had: an error that fails the
    step (no comment), with the hint; with --versions-only, the version change, and that
    loading was not compared (never `fits`)."""
    for name, version in (("pylock.base.toml", "1.0"), ("pylock.toml", "2.0")):
        pylock(tmp_path / name, {"hostpkg": version},
               lambda f: f"https://files.example/{f}", lambda _f: "0" * 64)
    env = {**environment(index, tmp_path), "PIP_INDEX_URL": "https://index.example/simple"}
    line = comment_line()
    done = subprocess.run(["bash", "-c", line], cwd=tmp_path, env={**env, "PIP_RETRIES": "0"},
                          capture_output=True, text=True, timeout=300, check=False)
    assert done.returncode == 1 and not (tmp_path / "comment.md").exists()
    assert "hint: --versions-only" in done.stderr, done.stderr
    versions_only = line.replace(" --markdown", " --versions-only --markdown")
    done = subprocess.run(["bash", "-c", versions_only], cwd=tmp_path, env=env,
                          capture_output=True, text=True, timeout=120, check=False)
    assert done.returncode == 0, done.stderr
    comment = (tmp_path / "comment.md").read_text()
    assert comment.startswith("### abifit diff: versions only")
    assert "| hostpkg | 1.0 | 2.0 |" in comment
