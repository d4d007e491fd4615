"""The reports for CI systems from real runs of the command line, all from one run each:
`--github` workflow commands after the report, `--sarif`, `--junit` and `--markdown` files,
written whatever the verdict, with the exit status still the verdict's.

The world: a loopback index serving hostpkg 1.0 and 2.0 (2.0 changes a parameter of
`hostlib::check_impl` from `int` to `unsigned int`) and extfree, whose module was built
against 1.0 and which declares no requirement, so that a lock can pin it beside 2.0. A uv
project locks extfree with hostpkg 2.0 (`uv lock`, exported by uv as requirements.txt with
hashes and as pylock.toml); venvs with the same wheels installed by pip are checked by
`doctor` and compared by `diff`.
"""

from __future__ import annotations

import json
import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest
from junitparser import Failure, JUnitXml

from abifit.cli import main
from helpers import lock_world, uv_project, validate_sarif, with_record
from httpserver import LoopbackIndex, LoopbackServer, publish_index
from venvs import venv_with_wheels

TARGET = ["--python-version", "3.11", "--platform", "linux_x86_64"]
REPORTS = ["--sarif", "out.sarif", "--junit", "junit.xml", "--markdown", "summary.md"]
SYMBOL = "_ZN7hostlib10check_implEiPKcS1_ib"
DEMANGLED = "hostlib::check_impl(int, char const*, char const*, int, bool)"

pytestmark = [pytest.mark.skipif(shutil.which("g++") is None, reason="needs g++"),
              pytest.mark.usefixtures("pip_alone")]


@pytest.fixture(scope="module")
def wheel_files(binaries: dict[str, bytes]) -> dict[str, tuple[str, bytes]]:
    """hostpkg 1.0 and 2.0, and extfree 1.0 (built against 1.0, requiring nothing), by
    `NAME-VERSION` (`helpers.lock_world`)."""
    world = lock_world(binaries)
    return {"-".join(filename.split("-")[:2]): (filename, data)
            for wheels in world.values() for filename, data in wheels}


@pytest.fixture(scope="module")
def index(wheel_files: dict[str, tuple[str, bytes]]) -> Iterator[LoopbackIndex]:
    """A loopback index serving the three wheels."""
    projects = {"hostpkg": [wheel_files["hostpkg-1.0"], wheel_files["hostpkg-2.0"]],
                "extfree": [wheel_files["extfree-1.0"]]}
    with LoopbackServer() as server:
        yield publish_index(server, projects)


@pytest.fixture(scope="module")
def project(index: LoopbackIndex, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A uv project that pins extfree 1.0 beside hostpkg 2.0, locked by uv, its lock exported
    as requirements.txt (with hashes: each requirement continued over lines) and
    pylock.toml."""
    return uv_project(tmp_path_factory.mktemp("ciproject"), index.url,
                      '"extfree==1.0", "hostpkg==2.0"')


def run(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    capsys.readouterr()
    code = main(list(args))
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def line_of(path: Path, start: str) -> int:
    """The number of the first line of `path` that starts with `start`."""
    lines = path.read_text().splitlines()
    return next(n for n, line in enumerate(lines, 1) if line.startswith(start))


def commands(out: str) -> list[str]:
    """The workflow commands among the lines of stdout."""
    return [line for line in out.splitlines() if line.startswith("::")]


def junit(path: Path) -> JUnitXml:
    return JUnitXml.fromfile(str(path))


@pytest.mark.parametrize(("lock", "entry"), [
    ("requirements.txt", "extfree==1.0"),
    ("uv.lock", 'name = "extfree"'),
    ("pylock.toml", 'name = "extfree"'),
])
def test_check_of_a_lock_points_at_the_line_that_pins_the_broken_package(
        lock: str, entry: str, project: Path, index: LoopbackIndex, tmp_path: Path,
        capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    """One run: the text report, then `::error file=LOCK,line=N` at the line that pins
    extfree; the SARIF log valid and located there, the JUnit file with the failing module
    and its message, the Markdown summary; exit 1, as without them."""
    monkeypatch.chdir(project)
    code, out, _err = run(capsys, "check", "-r", lock, *TARGET, "--index-url", index.url,
                          "--cache-dir", str(tmp_path / "cache"), "--github", *REPORTS)
    assert code == 1
    line = line_of(project / lock, entry)
    text, _, commands = out.partition("\n::")
    assert text.splitlines()[-1].startswith("fails: 2 extension module(s) checked, 1 fail")
    assert ("::" + commands).splitlines() == [
        f"::error file={lock},line={line},title=undefined-symbol%3A extpkg._ops::"
        f"/abifit-wheels/site-packages/extpkg/_ops.abi3.so: undefined symbol: {SYMBOL}%0A"
        "Because /abifit-wheels/site-packages/extpkg/_ops.abi3.so (extfree 1.0) needs "
        f"`{DEMANGLED}` and none of the 9 objects in its lookup scope defines it, the import "
        "fails.%0ANearest definition, in /abifit-wheels/site-packages/hostpkg/lib/libhost.so "
        "(hostpkg 2.0): `hostlib::check_impl(int, char const*, char const*, unsigned int, "
        "bool)` — same function hostlib::check_impl; parameter 4: `int` → `unsigned int`.%0A"
        "hint: extfree 1.0 was built against another hostpkg than the installed hostpkg 2.0: "
        "install the hostpkg release it was built for, or a extfree release built for hostpkg "
        "2.0"]
    log = json.loads((project / "out.sarif").read_text())
    validate_sarif(log)
    [result] = log["runs"][0]["results"]
    assert result["level"] == "error" and result["ruleId"] == "undefined-symbol"
    assert result["locations"][0]["physicalLocation"] == {
        "artifactLocation": {"uri": lock}, "region": {"startLine": line}}
    xml = junit(project / "junit.xml")
    assert (xml.tests, xml.failures, xml.skipped) == (2, 1, 0)
    [case] = next(s for s in xml if s.name == "extfree")
    [failure] = case.result
    assert isinstance(failure, Failure) and failure.type == "undefined-symbol"
    assert failure.message == (f"/abifit-wheels/site-packages/extpkg/_ops.abi3.so: undefined "
                               f"symbol: {SYMBOL}")
    assert (project / "summary.md").read_text() == f"""\
### abifit check: fails

fails: 2 extension module(s) checked, 1 fail (1 symbol and 0 library problem(s))

| package | module | effect | what fails |
| --- | --- | --- | --- |
| extfree | `extpkg._ops` | fails | needs `{DEMANGLED}` |
"""


def test_a_stack_that_fits_writes_empty_reports(
        index: LoopbackIndex, tmp_path: Path, capsys: pytest.CaptureFixture[str],
        monkeypatch: pytest.MonkeyPatch) -> None:
    """No problem: no workflow command, a SARIF log without results, JUnit without
    failures, a summary that says so; exit 0."""
    monkeypatch.chdir(tmp_path)
    Path("requirements.txt").write_text("extfree==1.0\nhostpkg==1.0\n")
    code, out, _err = run(capsys, "check", "-r", "requirements.txt", *TARGET, "--index-url",
                          index.url, "--cache-dir", str(tmp_path / "cache"), "--github",
                          *REPORTS)
    assert code == 0 and not commands(out)
    log = json.loads(Path("out.sarif").read_text())
    validate_sarif(log)
    assert log["runs"][0]["results"] == []
    xml = junit(tmp_path / "junit.xml")
    assert (xml.tests, xml.failures, xml.skipped) == (2, 0, 0)
    assert Path("summary.md").read_text().endswith("all load\n\nNo problems found.\n")


def test_quiet_prints_the_verdict_line_then_the_workflow_commands(
        index: LoopbackIndex, tmp_path: Path, capsys: pytest.CaptureFixture[str],
        monkeypatch: pytest.MonkeyPatch) -> None:
    """`-q --github`: the verdict line, and each command after it (never taken for it)."""
    monkeypatch.chdir(tmp_path)
    Path("requirements.txt").write_text("hostpkg==2.0\n\nextfree==1.0\n")
    code, out, _err = run(capsys, "check", "-q", "-r", "requirements.txt", *TARGET,
                          "--index-url", index.url, "--cache-dir", str(tmp_path / "cache"),
                          "--github")
    lines = out.splitlines()
    assert code == 1 and len(lines) == 2
    assert lines[0].startswith("fails: 2 extension module(s) checked")
    assert lines[1].startswith("::error file=requirements.txt,line=3,title=")


def test_github_and_json_together_are_a_usage_error(
        capsys: pytest.CaptureFixture[str]) -> None:
    """Both would print on stdout: exit 2 before any work."""
    code, _out, err = run(capsys, "check", "hostpkg==2.0", "--github", "--json",
                          "--index-url", "http://127.0.0.1:9/simple")
    assert code == 2
    assert err.startswith("error: --github prints workflow commands on stdout, where --json")


@pytest.mark.parametrize("option", ["--sarif", "--junit", "--markdown"])
def test_a_report_file_that_cannot_be_written_is_refused_first(
        option: str, capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    """Checked before the index is asked (this one does not answer)."""
    target = tmp_path / "missing" / "report"
    code, _out, err = run(capsys, "check", "hostpkg==2.0", option, str(target),
                          "--index-url", "http://127.0.0.1:9/simple")
    assert code == 2
    assert err == (f"error: {option} {target}: the directory {target.parent} does not "
                   "exist\n")


def _venv(root: Path, wheel_files: dict[str, tuple[str, bytes]], *names: str) -> str:
    paths = []
    for name in names:
        filename, data = wheel_files[name]
        path = root / filename
        path.write_bytes(with_record(data))
        paths.append(path)
    return venv_with_wheels(root / "venv", paths)


@pytest.fixture(scope="module")
def broken_venv(wheel_files: dict[str, tuple[str, bytes]],
                tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A checkout holding a venv with extfree 1.0 and hostpkg 2.0 installed by pip."""
    root = tmp_path_factory.mktemp("checkout")
    _venv(root, wheel_files, "extfree-1.0", "hostpkg-2.0")
    return root


def test_doctor_points_at_a_module_of_the_checkout(
        broken_venv: Path, capsys: pytest.CaptureFixture[str],
        monkeypatch: pytest.MonkeyPatch) -> None:
    """In the checkout, the failing module's file relative to it (no line); elsewhere no
    file; both runs write the JUnit file with a suite per distribution."""
    monkeypatch.chdir(broken_venv)
    args = ("doctor", "--python", str(broken_venv / "venv" / "bin" / "python"),
            "--no-index", "--no-cache", "--github", "--junit", "junit.xml")
    code, out, _err = run(capsys, *args)
    ops = next(broken_venv.glob("venv/lib/python3*/site-packages/extpkg/_ops.abi3.so"))
    [command] = commands(out)
    assert code == 1
    assert command.startswith(f"::error file={ops.relative_to(broken_venv)},"
                              "title=undefined-symbol%3A extpkg._ops::")
    xml = junit(broken_venv / "junit.xml")
    assert (xml.tests, xml.failures) == (1, 1)
    assert [s.name for s in xml] == ["extfree"]
    elsewhere = broken_venv / "elsewhere"
    elsewhere.mkdir(exist_ok=True)
    monkeypatch.chdir(elsewhere)
    code, out, _err = run(capsys, *args)
    [command] = commands(out)
    assert code == 1
    assert command.startswith("::error title=undefined-symbol%3A extpkg._ops::")


def test_resolve_points_at_the_requirements_in_conflict(
        index: LoopbackIndex, tmp_path: Path, capsys: pytest.CaptureFixture[str],
        monkeypatch: pytest.MonkeyPatch) -> None:
    """No set of extfree and hostpkg>=2 loads together: one error at the line that pins the
    package the conflict names, the derivation as its message; with hostpkg free, the set
    found has a suite per pin and no failure."""
    monkeypatch.chdir(tmp_path)
    Path("requirements.in").write_text("# the app\nextfree\nhostpkg>=2\n")
    code, out, _err = run(capsys, "resolve", "-r", "requirements.in", *TARGET, "--index-url",
                          index.url, "--cache-dir", str(tmp_path / "cache"), "--github",
                          *REPORTS)
    assert code == 1
    [command] = commands(out)
    head, _, message = command.partition("::")[2].partition("::")
    assert head == "error file=requirements.in,line=3,title=conflict%3A hostpkg"
    assert message.startswith("Because ") and message.endswith("loads together.")
    validate_sarif(json.loads(Path("out.sarif").read_text()))
    xml = junit(tmp_path / "junit.xml")
    assert (xml.tests, xml.failures) == (1, 1)
    assert Path("summary.md").read_text().startswith("### abifit resolve: no set fits\n")
    Path("requirements.in").write_text("extfree\nhostpkg\n")
    code, out, _err = run(capsys, "resolve", "-r", "requirements.in", *TARGET, "--index-url",
                          index.url, "--cache-dir", str(tmp_path / "cache"), "--github",
                          *REPORTS)
    assert code == 0 and not commands(out)
    xml = junit(tmp_path / "junit.xml")
    assert (xml.tests, xml.failures) == (1, 0)  # extpkg._ops; hostpkg's suite has no module
    versions = {s.name: {p.name: p.value for p in s.properties()}["version"] for s in xml}
    assert versions == {"extfree": "1.0", "hostpkg": "1.0"}


def test_diff_comments_on_what_a_new_lock_breaks(
        wheel_files: dict[str, tuple[str, bytes]], tmp_path: Path,
        capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    """Two snapshots, the second with hostpkg 2.0: an error at the line of the new snapshot
    that pins extfree, and a Markdown comment with the module broken and the versions; a
    check of that snapshot points at the same line."""
    monkeypatch.chdir(tmp_path)
    for side, host in (("a", "hostpkg-1.0"), ("b", "hostpkg-2.0")):
        (tmp_path / side).mkdir()
        python = _venv(tmp_path / side, wheel_files, "extfree-1.0", host)
        code, _out, _err = run(capsys, "snapshot", "--python", python, "--no-index",
                               "--no-cache", "-o", f"pylock.{side}.toml")
        assert code == 0
    code, out, _err = run(capsys, "diff", "pylock.a.toml", "pylock.b.toml", "--no-cache",
                          "--github", *REPORTS)
    assert code == 1
    line = line_of(tmp_path / "pylock.b.toml", 'name = "extfree"')
    [command] = commands(out)
    assert command.startswith(f"::error file=pylock.b.toml,line={line},"
                              "title=stops-loading%3A extpkg._ops::extpkg._ops: ")
    validate_sarif(json.loads(Path("out.sarif").read_text()))
    xml = junit(tmp_path / "junit.xml")
    assert (xml.tests, xml.failures) == (1, 1)
    summary = Path("summary.md").read_text()
    assert summary.startswith("### abifit diff: breaks\n\nA: `pylock.a.toml` → B: "
                              "`pylock.b.toml`\n\nB breaks 1 module(s) that A loaded\n\n"
                              "#### Breaks: modules that load on A and not on B\n\n"
                              "| package | module | what fails on B |\n| --- | --- | --- |\n"
                              "| extfree | `extpkg._ops` | ")
    assert summary.endswith("| hostpkg | 1.0 | 2.0 |\n\n</details>\n")
    code, out, _err = run(capsys, "check", "--snapshot", "pylock.b.toml", "--no-index",
                          "--cache-dir", str(tmp_path / "cache"), "--github")
    assert code == 1
    assert commands(out)[0].startswith(f"::error file=pylock.b.toml,line={line},"
                                       "title=undefined-symbol%3A extpkg._ops::")
