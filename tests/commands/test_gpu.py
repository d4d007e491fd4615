"""GPU code against a GPU, end to end: `inspect --gpu`, `doctor --gpu`, `cuda`, `check --gpu`.

The objects are the nvcc-built fixtures of tests/fixtures/cuda (listing and coverage rules are
tested against cuobjdump in tests/formats/test_fatbin.py); here they are put where users meet
them: a file, an installed package in a fresh venv, a local wheel and a wheel on a loopback
index.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

import abifit.engines.doctor as doctor_command
from abifit import workers
from abifit.cli import main
from abifit.errors import FormatError
from abifit.formats import fatbin
from abifit.formats.elf import ElfImage, parse_elf
from abifit.formats.fatbin import GpuCode, ptx_has_kernels, read_fatbins, read_gpu_code
from abifit.formats.sources import ByteSource, BytesSource, FileSource
from abifit.report.gpu import coverage_reason
from abifit.sim.gpu import (
    check_gpu_code,
    object_coverage,
    summarize,
)
from abifit.sim.gputarget import ComputeCapability, GpuTarget, parse_gpu_option
from fixtures.cuda import build as cuda_build
from helpers import make_wheel, schema, validate
from httpserver import LoopbackIndex, Projects

INSPECT_SCHEMA = schema("inspect")
DOCTOR_SCHEMA = schema("doctor")
CUDA_SCHEMA = schema("cuda")
CHECK_SCHEMA = schema("check")
TARGET = ["--python-version", "3.11", "--platform", "linux_x86_64"]

Json = dict[str, object]


@pytest.fixture(scope="module")
def cuda() -> dict[str, Path]:
    built = cuda_build.cached_build()
    if built is None:
        pytest.skip("needs nvcc")
    return built[1]


def code_of(path: Path):  # type: ignore[no-untyped-def]
    with FileSource(path) as source:
        return read_fatbins(source, parse_elf(source))


def target(text: str) -> GpuTarget:
    return parse_gpu_option(text)


# --- the pure layer ------------------------------------------------------------------------------


def test_parse_gpu_option_forms() -> None:
    """--gpu takes sm_NN, X.Y and X.Y@CUDA; anything else is a ValueError."""
    assert target("sm_120").capability == ComputeCapability(12, 0)
    assert target("9.0").arch == "sm_90"
    assert target("8.6@12.4").driver_cuda == (12, 4)
    with pytest.raises(ValueError):
        target("hopper")


def test_summary_groups_fat_binaries_by_architectures(cuda: dict[str, Path]) -> None:
    """Two translation units built for different archs are two groups: partial coverage shows."""
    summary = summarize(code_of(cuda["two_units"]))
    assert summary.sass == ("sm_80", "sm_90", "sm_90a")
    assert summary.ptx == ()
    assert {(g.count, g.sass) for g in summary.groups} == {(1, ("sm_80", "sm_90")),
                                                          (1, ("sm_90a",))}


def test_ptx_is_named_as_a_virtual_architecture(cuda: dict[str, Path]) -> None:
    """PTX-only code lists compute_80, and its verdict on 8.6 says compute_80."""
    code = code_of(cuda["ptx_only"])
    assert summarize(code).ptx == ("compute_80",)
    result = object_coverage(code, target("8.6"))
    assert result.verdict == "runs-ptx-jit"
    reason = coverage_reason(result.reason)
    assert "PTX compute_80" in reason and "sm_80" not in reason


@pytest.mark.parametrize(("fixture", "gpu", "kinds"), [
    ("sass_mix", "9.0", []),
    ("sass_mix", "10.0", ["no-kernel-image"]),
    ("two_units", "8.0", ["partial-kernel-image"]),
    ("two_units", "9.0", []),
    ("ptx_only", "12.0", []),
    ("ptx_only", "7.5", ["no-kernel-image"]),
], ids=lambda v: str(v))
def test_findings_and_warnings(cuda: dict[str, Path], fixture: str, gpu: str,
                               kinds: list[str]) -> None:
    """No kernel image is a finding; a GPU that only some fat binaries cover is a warning."""
    checked = check_gpu_code([(fixture, str(cuda[fixture]), code_of(cuda[fixture]))], target(gpu))
    assert [f.kind for f in (*checked.findings, *checked.warnings)] == kinds
    assert all(f.kind == "no-kernel-image" for f in checked.findings)


def test_ptx_newer_than_the_driver_is_no_kernel_image(cuda: dict[str, Path]) -> None:
    """PTX ISA 9.0 (CUDA 13) is not JIT-compiled by a CUDA 12.4 driver."""
    result = object_coverage(code_of(cuda["ptx_only"]), target("9.0@12.4"))
    assert result.verdict == "no-kernel-image"
    assert result.error == "the provided PTX was compiled with an unsupported toolchain"


def test_corrupt_fat_binary_is_a_warning_not_a_crash(cuda: dict[str, Path]) -> None:
    """A fat binary whose size runs past its section is reported as unreadable GPU code."""
    data = bytearray(cuda["sass_mix"].read_bytes())
    at = data.index(bytes.fromhex("50ed55ba"))
    data[at + 8:at + 16] = (1 << 40).to_bytes(8, "little")
    source = BytesSource(bytes(data), "corrupt.so")
    with pytest.raises(FormatError) as raised:
        read_fatbins(source, parse_elf(source))
    checked = check_gpu_code([("corrupt", "corrupt.so", raised.value)], target("9.0"))
    assert [w.kind for w in checked.warnings] == ["unreadable-gpu-code"]
    assert checked.findings == ()


def test_containers_without_kernels_are_found(cuda: dict[str, Path]) -> None:
    """nvcc's link step adds a fat binary whose cubin has no .text section: kernels False."""
    code = code_of(cuda["two_units_cudart"])
    assert [(sorted(map(str, c.sass_archs)), c.kernels) for c in code.containers] == [
        (["sm_75"], False), (["sm_80", "sm_90"], True), (["sm_90a"], True)]
    summary = summarize(code)
    assert summary.without_kernels == 1 and len(summary.groups) == 2


def test_ptx_has_kernels() -> None:
    """An .entry directive (visible or not) is a kernel; a .func alone is not."""
    assert ptx_has_kernels(b".version 9.0\n.visible .entry _Z4fillPii(\n")
    assert ptx_has_kernels(b"  .entry k()\n{\n}")
    assert not ptx_has_kernels(b".version 9.0\n.target sm_75\n.visible .func f()\n")


def test_fat_binaries_embedded_in_data_are_read_when_needed(cuda: dict[str, Path]) -> None:
    """A library whose .nv_fatbin holds no kernels is searched for fat binaries in its data."""
    path = cuda["embedded"]
    assert code_of(path).embedded == ()  # a plain read leaves the data sections alone
    with FileSource(path) as source:
        code = read_gpu_code(source, parse_elf(source))
    assert code is not None
    assert all(c.kernels is False for c in code.containers)
    ((section, sass, ptx),) = [(c.section, sorted(map(str, c.sass_archs)),
                                sorted(map(str, c.ptx_archs))) for c in code.embedded]
    assert (section, sass, ptx) == (".rodata", ["sm_80"], ["sm_90"])
    assert object_coverage(code, target("8.0")).verdict == "runs-sass"
    assert object_coverage(code, target("9.0")).verdict == "runs-ptx-jit"
    missing = object_coverage(code, target("7.5"))
    assert missing.verdict == "no-kernel-image" and not missing.partial


def test_embedded_coverage_is_not_partial(cuda: dict[str, Path]) -> None:
    """A library chooses among its embedded fat binaries: some missing a GPU is no warning."""
    with FileSource(cuda["embedded"]) as source:
        code = read_gpu_code(source, parse_elf(source))
    assert code is not None
    checked = check_gpu_code([("embedded", "x.so", code)], target("9.0"))
    assert checked.findings == () and checked.warnings == ()


# --- inspect --------------------------------------------------------------------------------------


def run(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    code = main(list(args))
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def test_inspect_shows_gpu_code_without_gpu(cuda: dict[str, Path],
                                            capsys: pytest.CaptureFixture[str]) -> None:
    """Plain inspect lists the fat binaries' architectures, in text and in JSON."""
    code, out, _ = run(capsys, "inspect", str(cuda["two_units"]))
    assert code == 0
    assert "gpu code   2 fat binaries, 3 image(s): SASS sm_80 sm_90 sm_90a; PTX -" in out
    assert "1 x SASS sm_90a; PTX -" in out
    code, out, _ = run(capsys, "inspect", str(cuda["two_units"]), "--json")
    doc = json.loads(out)
    validate(doc, INSPECT_SCHEMA)
    obj = doc["objects"][0]
    assert obj["gpu_code"]["sass"] == ["sm_80", "sm_90", "sm_90a"]
    assert obj["gpu"] is None and doc["gpu"] is None


def test_inspect_gpu_verdicts_and_exit_codes(cuda: dict[str, Path],
                                             capsys: pytest.CaptureFixture[str]) -> None:
    """--gpu gives a verdict per object; exit 1 when an object has no kernel image for it."""
    code, out, _ = run(capsys, "inspect", str(cuda["sass_mix"]), str(cuda["ptx_only"]),
                       "--gpu", "sm_90", "--json")
    assert code == 0
    doc = json.loads(out)
    validate(doc, INSPECT_SCHEMA)
    assert [o["gpu"]["verdict"] for o in doc["objects"]] == ["runs-sass", "runs-ptx-jit"]
    assert doc["gpu"]["arch"] == "sm_90"
    code, out, _ = run(capsys, "inspect", str(cuda["sass_mix"]), "--gpu", "10.0")
    assert code == 1
    assert "no-kernel-image" in out and "no kernel image is available" in out


def test_inspect_gpu_without_gpu_code_says_so(capsys: pytest.CaptureFixture[str]) -> None:
    """--gpu on an object without fat binaries does not claim that everything runs."""
    code, out, _ = run(capsys, "inspect", sys.executable, "--gpu", "9.0")
    assert code == 0
    assert out.rstrip().endswith("; no GPU code to check on sm_90"), out[-200:]


def test_inspect_bad_gpu_is_a_usage_error(cuda: dict[str, Path],
                                          capsys: pytest.CaptureFixture[str]) -> None:
    """A --gpu that names no GPU exits 2 with one error line."""
    code, _, err = run(capsys, "inspect", str(cuda["sass_mix"]), "--gpu", "volta")
    assert code == 2
    assert err.startswith("error: --gpu volta: invalid compute capability")


# --- an installed package: doctor and cuda ----------------------------------------------------


@pytest.fixture(scope="module")
def gpu_venv(cuda: dict[str, Path], tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A venv holding `gpupkg`, whose plugin library carries two fat binaries: SASS sm_80 and
    sm_90, and SASS sm_90a."""
    root = tmp_path_factory.mktemp("gpuvenv")
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(root)], check=True)
    site = next(root.glob("lib/python3*/site-packages"))
    pkg = site / "gpupkg"
    pkg.mkdir()
    (pkg / "__init__.py").write_text("")
    shutil.copy(cuda["two_units_cudart"], pkg / "libkernels.so")
    info = site / "gpupkg-1.0.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: gpupkg\nVersion: 1.0\n")
    (info / "top_level.txt").write_text("gpupkg\n")
    (info / "RECORD").write_text("gpupkg/__init__.py,,\ngpupkg/libkernels.so,,\n"
                                 "gpupkg-1.0.dist-info/METADATA,,\n")
    return root / "bin" / "python"


def test_doctor_gpu_no_kernel_image(gpu_venv: Path, capsys: pytest.CaptureFixture[str],
                                    tmp_path: Path) -> None:
    """doctor --gpu 10.0: the plugin loads but none of its kernels runs there: exit 1."""
    code, out, _ = run(capsys, "doctor", "--python", str(gpu_venv), "--gpu", "10.0", "--json",
                       "--cache-dir", str(tmp_path))
    doc = json.loads(out)
    validate(doc, DOCTOR_SCHEMA)
    assert code == 1
    assert [f["kind"] for f in doc["findings"]] == ["no-kernel-image"]
    assert doc["findings"][0]["object"].endswith("gpupkg/libkernels.so")
    (checked,) = doc["gpu"]["checked"]
    assert checked["target"]["arch"] == "sm_100"
    assert checked["objects"][0]["coverage"]["verdict"] == "no-kernel-image"


def test_doctor_gpu_partial_is_a_warning(gpu_venv: Path, capsys: pytest.CaptureFixture[str],
                                         tmp_path: Path) -> None:
    """doctor --gpu 8.0: fat binaries without sm_80 code are one summary note by default (the
    library may never launch those kernels here), exit 0; -v shows the warning in full."""
    code, out, _ = run(capsys, "doctor", "--python", str(gpu_venv), "--gpu", "8.0",
                       "--cache-dir", str(tmp_path))
    assert code == 0
    assert "warning: partial-kernel-image" not in out
    assert ("note: 1 library carries some kernels for other GPUs only (gpupkg/libkernels.so)"
            in out)
    code, out, _ = run(capsys, "doctor", "-v", "--python", str(gpu_venv), "--gpu", "8.0",
                       "--cache-dir", str(tmp_path))
    assert code == 0
    assert "warning: partial-kernel-image: gpupkg/libkernels.so" in out
    # nvcc's link step adds a third fat binary (SASS sm_75) without kernels: it does not count
    assert "1 of 2 fat binaries of gpupkg/libkernels.so carry no code for the GPU sm_80" in out


def test_cuda_command_reports_environment_gpu_code(gpu_venv: Path,
                                                   capsys: pytest.CaptureFixture[str],
                                                   tmp_path: Path) -> None:
    """abifit cuda --gpu: the stack sections and the GPU check of the environment, in JSON."""
    code, out, _ = run(capsys, "cuda", "--python", str(gpu_venv), "--gpu", "12.0", "--json",
                       "--cache-dir", str(tmp_path))
    doc = json.loads(out)
    validate(doc, CUDA_SCHEMA)
    assert code == 1
    assert doc["command"] == "cuda"
    assert {"toolkits", "driver", "gpus", "runtime_sonames", "findings"} <= set(doc)
    assert [f["kind"] for f in doc["findings"]] == ["no-kernel-image"]
    code, out, _ = run(capsys, "cuda", "--python", str(gpu_venv), "--gpu", "9.0",
                       "--cache-dir", str(tmp_path))
    assert code == 0
    assert "GPU 9.0 (sm_90, --gpu): 1 object(s) with GPU code: 1 runs-sass" in out


def test_gpu_verdicts_are_cached_until_the_file_changes(
        gpu_venv: Path, capsys: pytest.CaptureFixture[str], tmp_path: Path,
        monkeypatch: pytest.MonkeyPatch) -> None:
    """A second doctor --gpu reads no fat binary and says the same; another GPU, a changed
    file or another zstd decoder availability reads them again."""
    reads: list[str] = []
    read = doctor_command.read_gpu_code

    def counting(source: ByteSource, image: ElfImage) -> GpuCode | None:
        reads.append(source.name)
        return read(source, image)

    monkeypatch.setattr(doctor_command, "read_gpu_code", counting)
    monkeypatch.setattr(workers, "parallel", lambda: False)  # every read in this process
    args = ("doctor", "--python", str(gpu_venv), "--json", "--cache-dir", str(tmp_path))
    first = run(capsys, *args, "--gpu", "10.0")
    assert len(reads) == 1
    assert run(capsys, *args, "--gpu", "10.0") == first
    assert len(reads) == 1
    run(capsys, *args, "--gpu", "9.0")
    assert len(reads) == 2
    library = Path(reads[0])
    stat = library.stat()
    os.utime(library, ns=(stat.st_atime_ns, stat.st_mtime_ns + 1_000_000_000))
    assert run(capsys, *args, "--gpu", "10.0") == first
    assert len(reads) == 3
    monkeypatch.setattr(fatbin, "_zstd_codec", lambda: None)
    run(capsys, *args, "--gpu", "10.0")
    assert len(reads) == 4


_SHARED_CHECKS = '''
import sys
from abifit import cli, workers
from abifit.engines import doctor

events, fork_call, start = [], workers.fork_call, doctor.GpuReads.start


def forking(function):
    fork = fork_call(function)
    events.append("fork" if fork is not None else "no fork")
    return fork


def starting(self, *args):
    events.append("reads")
    return start(self, *args)


workers.fork_call, doctor.GpuReads.start = forking, starting
workers.usable_cores = lambda: 4  # as on a machine of four cores
doctor.MIN_SHARED = 1  # the venv has fewer modules than that
workers.fork_workers()
code = cli.main(sys.argv[1:])
sys.stderr.write(f"events: {events}\\n")
sys.exit(code)
'''


def test_doctor_shares_checks_with_forks_then_reads_gpu_code(
        cuda: dict[str, Path], tmp_path: Path) -> None:
    """With the checks shared (three distributions, four cores: two forks), the forks are made
    first and the GPU code read after, from the process that has one thread again; the report
    is the one a process without workers makes, byte for byte."""
    root = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(root)], check=True)
    site = next(root.glob("lib/python3*/site-packages"))
    for name, fixture in (("gpua", "two_units_cudart"), ("gpub", "sass_mix"),
                          ("gpuc", "two_units_cudart")):
        (site / name).mkdir()
        (site / name / "__init__.py").write_text("")
        shutil.copy(cuda[fixture], site / name / "libkernels.so")
        info = site / f"{name}-1.0.dist-info"
        info.mkdir()
        (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {name}\nVersion: 1.0\n")
        (info / "RECORD").write_text(f"{name}/__init__.py,,\n{name}/libkernels.so,,\n")
    script = tmp_path / "shared.py"
    script.write_text(_SHARED_CHECKS)
    args = ["doctor", "--python", str(root / "bin" / "python"), "--gpu", "10.0", "--json",
            "--no-cache"]
    shared = subprocess.run([sys.executable, str(script), *args], capture_output=True,
                            text=True, timeout=300, check=False,
                            env={**os.environ, "ABIFIT_WORKERS": "4"})
    alone = subprocess.run([sys.executable, "-m", "abifit", *args], capture_output=True,
                           text=True, timeout=300, check=False,
                           env={**os.environ, "ABIFIT_WORKERS": "0"})
    assert "events: ['fork', 'fork', 'reads']" in shared.stderr, shared.stderr[-2000:]
    assert shared.returncode == alone.returncode == 1, alone.stderr
    assert shared.stdout == alone.stdout
    doc = json.loads(shared.stdout)
    assert len(doc["modules"]) == 3
    assert {f["kind"] for f in doc["findings"]} == {"no-kernel-image"}


# --- wheels: check --gpu -------------------------------------------------------------------------


def gpu_wheel(cuda: dict[str, Path]) -> tuple[str, bytes]:
    return make_wheel("gpupkg", "1.0", {"gpupkg/__init__.py": b"",
                                        "gpupkg/libkernels.so": cuda["sass_mix"].read_bytes()})


@pytest.fixture(scope="module")
def index_projects(cuda: dict[str, Path]) -> Projects:
    """What `loopback_index` (conftest.py) serves to this module: gpupkg 1.0."""
    return {"gpupkg": [gpu_wheel(cuda)]}


def test_check_gpu_local_wheel(cuda: dict[str, Path], tmp_path: Path,
                               capsys: pytest.CaptureFixture[str]) -> None:
    """check WHEEL --gpu: the wheel's kernels against sm_120 (present) and sm_100 (absent)."""
    filename, data = gpu_wheel(cuda)
    wheel = tmp_path / filename
    wheel.write_bytes(data)
    code, out, _ = run(capsys, "check", str(wheel), "--gpu", "sm_120", "--json",
                       "--cache-dir", str(tmp_path / "c"), *TARGET)
    doc = json.loads(out)
    validate(doc, CHECK_SCHEMA)
    assert code == 0 and doc["verdict"] == "fits"
    assert doc["gpu"]["objects"][0]["coverage"]["verdict"] == "runs-sass"
    code, out, _ = run(capsys, "check", str(wheel), "--gpu", "sm_100",
                       "--cache-dir", str(tmp_path / "c"), *TARGET)
    assert code == 1
    assert "no-kernel-image: gpupkg gpupkg/libkernels.so" in out
    assert "1 object(s) without a kernel image for sm_100" in out


def test_check_gpu_remote_wheel_reads_member_once(
        loopback_index: LoopbackIndex, tmp_path: Path,
        capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    """check REQ --gpu over a loopback index: the member is fetched (once), its verdict cached."""
    monkeypatch.setenv("PIP_CONFIG_FILE", "/dev/null")
    server, index = loopback_index.server, loopback_index.url
    args = ["check", "gpupkg==1.0", "--gpu", "10.0", "--json", "--index-url", index,
            "--cache-dir", str(tmp_path), *TARGET]
    code, out, _ = run(capsys, *args)
    doc = json.loads(out)
    validate(doc, CHECK_SCHEMA)
    assert code == 1 and doc["verdict"] == "fails"
    assert [f["kind"] for f in doc["findings"]] == ["no-kernel-image"]
    # the loader's view (a prefix and a tail of the member), then the whole member once
    assert doc["transfer"]["bytes_fetched"] <= doc["transfer"]["wheel_bytes"] * 3
    sent = server.bytes_sent
    code, out, _ = run(capsys, *args)
    assert code == 1 and json.loads(out)["findings"][0]["kind"] == "no-kernel-image"
    assert server.bytes_sent == sent  # the second run reads the cache only


def test_inspect_requirement_gpu_reads_fat_binaries(
        loopback_index: LoopbackIndex, tmp_path: Path,
        capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    """inspect REQ --gpu lists the remote member's fat binaries like a local read does."""
    monkeypatch.setenv("PIP_CONFIG_FILE", "/dev/null")
    index = loopback_index.url
    code, out, _ = run(capsys, "inspect", "gpupkg==1.0", "--gpu", "9.0", "--json",
                       "--index-url", index, "--cache-dir", str(tmp_path), *TARGET)
    assert code == 0
    (obj,) = json.loads(out)["objects"]
    assert obj["gpu_code"]["sass"] == ["sm_80", "sm_90", "sm_90a", "sm_120"]
    assert obj["gpu"]["verdict"] == "runs-sass"



@pytest.mark.skipif(shutil.which("nvcc") is None, reason="needs nvcc")
def test_cuda_command_finds_the_nvcc_toolkit(gpu_venv: Path, capsys: pytest.CaptureFixture[str],
                                             tmp_path: Path) -> None:
    """The toolkit the nvcc on PATH compiles with is reported, with the version nvcc prints."""
    said = subprocess.run(["nvcc", "--version"], capture_output=True, text=True, check=True)
    version = said.stdout.rsplit("V", 1)[-1].split()[0]
    code, out, _ = run(capsys, "cuda", "--python", str(gpu_venv), "--gpu", "9.0", "--json",
                       "--cache-dir", str(tmp_path))
    doc = json.loads(out)
    validate(doc, CUDA_SCHEMA)
    assert code == 0
    assert doc["nvcc"]["version"] == version
    toolkit = next(t for t in doc["toolkits"] if t["root"] == doc["nvcc"]["root"])
    assert toolkit["version"] == version
    assert toolkit["lib_dirs"], toolkit


def test_runtime_sonames_by_cuda_major() -> None:
    """CUDA runtime sonames are grouped by major with who needs and ships them; others drop."""
    from abifit.engines.cuda import runtime_sonames

    needed = {"libcudart.so.12": {"sgl_kernel.common_ops"}, "libc.so.6": {"x"},
              "libcublas.so.13": {"torch/lib/libtorch_cuda.so"}}
    provided = {"libcudart.so.13": {"nvidia-cuda-runtime"}, "libcublas.so.13": {"nvidia-cublas"}}
    uses = runtime_sonames(needed, provided)
    assert [(u.soname, u.major, u.needed_by, u.provided_by) for u in uses] == [
        ("libcudart.so.12", 12, ("sgl_kernel.common_ops",), ()),
        ("libcublas.so.13", 13, ("torch/lib/libtorch_cuda.so",), ("nvidia-cublas",)),
        ("libcudart.so.13", 13, (), ("nvidia-cuda-runtime",)),
    ]
