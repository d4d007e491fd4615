"""The verdict rule (abifit.sim.verdict): what a file that does not load costs, by cause; the
variant sets a package picks one file from; the verdict of a set of findings.

The simulations that feed it are tested against real loads and imports elsewhere
(tests/commands/test_import_verdicts.py: a guarded module whose library is nowhere is a
prerequisite, one loaded on use that misses a symbol degrades its package;
tests/commands/test_check_live.py: real wheels)."""

from __future__ import annotations

import pytest

from abifit.report.derivation import derivation_text
from abifit.sim.derivation import (
    IndexFix,
    NeedsLibrary,
    NoFileFound,
    NotWhereLoaderLooks,
    OtherRelease,
    Outcome,
)
from abifit.sim.findings import Effect, Finding, FindingKind, Severity, Verdict
from abifit.sim.loader import LoadProblem, ProblemKind
from abifit.sim.verdict import (
    Member,
    Stack,
    VariantRule,
    costs,
    picked,
    prerequisite_of,
    problem_cause,
    soname_stem,
    stack_cuda,
    unused,
    variant_sets,
    verdict,
)

# a stack: torch with CUDA 13 libraries, xformers (declares torch), torchcodec (declares nothing)
STACK = Stack.of(
    files={"libc10.so": frozenset({"torch"}), "libcudart.so.13": frozenset({"nvidia-cuda-runtime"}),
           "libtorchcodec_core7.so": frozenset({"torchcodec"}),
           "libnvrtc.so.13": frozenset({"nvidia-cuda-nvrtc"})},
    declared=lambda key: {"xformers": ("torch", "numpy"),
                          "cupy": ("nvidia-cuda-nvrtc-cu12",)}.get(key, ()),
    packages={"libnvrtc.so.12": "nvidia-cuda-nvrtc-cu12", "libcudart.so.12":
              "nvidia-cuda-runtime-cu12"},
    installed=("torch", "xformers", "torchcodec", "nvidia-cuda-runtime", "nvidia-cuda-nvrtc"),
)


def missing(soname: str) -> LoadProblem:
    return LoadProblem(ProblemKind.MISSING_LIBRARY, "/x.so",
                       f"{soname}: cannot open shared object file", library=soname)


@pytest.mark.parametrize(("soname", "distribution", "effect", "prerequisite"), [
    pytest.param("libcudart.so.12", "xformers", Effect.DEGRADES, None,
                 id="another-major-in-the-stack"),
    pytest.param("libnvrtc.so.12", "cupy", Effect.DEGRADES, None,
                 id="declared-dependency-should-provide"),
    pytest.param("libc10_cuda.so", "torchcodec", Effect.DEGRADES, None,
                 id="another-build-of-a-stack-package"),
    pytest.param("libavutil.so.59", "torchcodec", Effect.PREREQUISITE, "FFmpeg", id="ffmpeg"),
    pytest.param("libtbb.so.12", "numba", Effect.PREREQUISITE, "TBB", id="tbb"),
    pytest.param("libibverbs.so.1", "nvidia-cufile", Effect.PREREQUISITE, "RDMA (rdma-core)",
                 id="rdma"),
    pytest.param("libcuda.so.1", "xformers", Effect.PREREQUISITE, "the NVIDIA driver",
                 id="driver"),
    pytest.param("libmadeup.so.3", "xformers", Effect.PREREQUISITE, "libmadeup.so.3",
                 id="unknown-library-named-by-itself"),
])
def test_a_missing_library_is_judged_by_who_should_provide_it(
        soname: str, distribution: str, effect: Effect, prerequisite: str | None) -> None:
    """A library the stack has in another major, that a declared dependency should provide,
    or that another build of a stack package ships degrades; one nothing in the stack or its
    metadata provides is a prerequisite, named as a user knows it."""
    cause = problem_cause(missing(soname), distribution, STACK)
    assert cause.effect is effect, cause.reason
    assert (cause.prerequisite.name if cause.prerequisite else None) == prerequisite


def test_a_library_of_its_own_passes_its_effect_on() -> None:
    """A file missing a library its own distribution ships points at that file."""
    cause = problem_cause(missing("libtorchcodec_core7.so"), "torchcodec", STACK)
    assert (cause.effect, cause.sibling) == (Effect.DEGRADES, "libtorchcodec_core7.so")


def test_a_library_the_stack_has_elsewhere_degrades() -> None:
    """The stack holds the very soname, but the loader does not find it: the stack's layout,
    not something to install."""
    cause = problem_cause(missing("libnvrtc.so.13"), "sgl-kernel", STACK)
    assert cause.effect is Effect.DEGRADES
    assert isinstance(cause.reason, NotWhereLoaderLooks)
    assert cause.reason.soname == "libnvrtc.so.13"


@pytest.mark.parametrize("kind", [ProblemKind.UNDEFINED_SYMBOL, ProblemKind.MISSING_VERSION,
                                  ProblemKind.UNREADABLE_OBJECT, ProblemKind.WRONG_ELF_CLASS])
def test_abi_breaks_and_damaged_files_degrade(kind: ProblemKind) -> None:
    """An undefined symbol, a missing version node, a damaged or foreign file: the stack or
    the host breaks the module."""
    problem = LoadProblem(kind, "/x.so", "...", symbol="_ZN3c104cuda9SetDeviceEi",
                          version="GLIBC_2.35", library="libc.so.6")
    assert problem_cause(problem, "xformers", STACK).effect is Effect.DEGRADES


def test_a_symbol_an_outside_library_defines_is_a_prerequisite() -> None:
    """NVSHMEM's PMIx bootstrap leaves pmix_* undefined for the launcher's PMIx to define: a
    prerequisite, named; a symbol no table names stays an ABI break."""
    def undefined(symbol: str) -> LoadProblem:
        return LoadProblem(ProblemKind.UNDEFINED_SYMBOL, "/x.so", "...", symbol=symbol)

    cause = problem_cause(undefined("pmix_value_load"), "nvidia-nvshmem-cu13", STACK)
    assert cause.effect is Effect.PREREQUISITE
    assert cause.prerequisite is not None and cause.prerequisite.name == "PMIx"
    assert problem_cause(undefined("aoti_torch_dtype_float32"), "cuda-core",
                         STACK).effect is Effect.DEGRADES


def test_soname_stem() -> None:
    assert [soname_stem(s) for s in ("libcudart.so.12", "libc10.so", "libfoo.so.1.2.3")] == [
        "libcudart.so", "libc10.so", "libfoo.so"]


def test_prerequisite_table_matches_whole_names() -> None:
    """A soname matches an entry whole: libavutil.so.59 is FFmpeg, libavutilx.so.1 is not."""
    assert prerequisite_of("libavutil.so.59").name == "FFmpeg"
    assert prerequisite_of("libavutilx.so.1").name == "libavutilx.so.1"


def member(rel: str, loads: bool, counts: bool = False, dist: str = "pkg") -> Member:
    return Member(rel, dist, loads, counts)


def test_files_differing_in_numbers_are_a_variant_set() -> None:
    """torchcodec's core4..core9 and custom_ops4..9 are two sets; a set with a member whose
    failure fails an import is not one; a lone file is not one."""
    members = [member(f"tc/libtorchcodec_core{n}.so", n == 7) for n in range(4, 10)]
    members += [member(f"tc/libtorchcodec_custom_ops{n}.so", n == 7) for n in range(4, 10)]
    members += [member("tc/libtorchcodec_image.so", True)]
    members += [member("other/_x1.so", False, counts=True), member("other/_x2.so", True)]
    sets = variant_sets(members, {})
    assert sorted(sorted(m.rel for m in group) for group in sets) == [
        [f"tc/libtorchcodec_core{n}.so" for n in range(4, 10)],
        [f"tc/libtorchcodec_custom_ops{n}.so" for n in range(4, 10)]]


def test_one_loading_variant_makes_the_others_unused() -> None:
    """Without a pick to read, the set needs one member that loads; then the others cost
    nothing. When none loads, none is unused (each keeps its own effect)."""
    some = [member("libv1.so", False), member("libv2.so", True), member("libv3.so", False)]
    assert unused(some, None) == {"libv1.so", "libv3.so"}
    none = [member("libv1.so", False), member("libv2.so", False)]
    assert unused(none, None) == set()


BNB = VariantRule("bnb/libbitsandbytes_*.so", "bnb/libbitsandbytes_cuda{cuda}.so",
                  "bnb/libbitsandbytes_cpu.so")
BNB_SET = [member("bnb/libbitsandbytes_cpu.so", True),
           member("bnb/libbitsandbytes_cuda124.so", False),
           member("bnb/libbitsandbytes_cuda126.so", True)]


@pytest.mark.parametrize(("cuda", "gpu", "chosen"), [
    ("124", True, "bnb/libbitsandbytes_cuda124.so"),
    ("130", True, "bnb/libbitsandbytes_cpu.so"),  # no cuda130 library: the CPU one
    ("124", False, "bnb/libbitsandbytes_cpu.so"),  # no GPU: the CPU one
    (None, True, "bnb/libbitsandbytes_cpu.so"),
])
def test_a_rule_reads_the_pick(cuda: str | None, gpu: bool, chosen: str) -> None:
    """bitsandbytes picks its library by torch's CUDA release when a GPU is there, else (or
    when that library is not shipped) the CPU one."""
    got = picked(BNB_SET, BNB, cuda, gpu)
    assert got is not None and got.rel == chosen


@pytest.mark.parametrize(("versions", "chosen"), [
    ({"cuda-bindings": "13.0.3"}, "cuda/core/cu13/_tensor_bridge.so"),
    ({"cuda-bindings": "12.9.4"}, "cuda/core/cu12/_tensor_bridge.so"),
    ({}, None),  # cuda-bindings not installed: no pick, one of them must load
])
def test_a_pick_by_a_distributions_major_version(versions: dict[str, str],
                                                 chosen: str | None) -> None:
    """cuda-core imports cu12 or cu13 by cuda-bindings' major version, GPU or not; the pick
    is a glob."""
    rule = VariantRule("cuda/core/cu1[0-9]/_tensor_bridge.*",
                       "cuda/core/cu{major:cuda-bindings}/_tensor_bridge.*")
    group = [member("cuda/core/cu12/_tensor_bridge.so", False),
             member("cuda/core/cu13/_tensor_bridge.so", True)]
    got = picked(group, rule, None, False, versions)
    assert (got.rel if got else None) == chosen
    if chosen == "cuda/core/cu13/_tensor_bridge.so":
        assert unused(group, got) == {"cuda/core/cu12/_tensor_bridge.so"}


def test_the_picked_variant_decides() -> None:
    """With a pick, the others are unused whatever they do, and the picked one's failure
    stands."""
    chosen = picked(BNB_SET, BNB, "124", True)
    assert unused(BNB_SET, chosen) == set()  # the only failing member is the one picked
    cpu = picked(BNB_SET, BNB, None, False)
    assert unused(BNB_SET, cpu) == {"bnb/libbitsandbytes_cuda124.so"}


def test_the_rule_names_its_files_as_one_set() -> None:
    members = [*BNB_SET, member("bnb/other.so", True)]
    sets = variant_sets(members, {"pkg": (BNB,)})
    assert [sorted(m.rel for m in g) for g in sets] == [sorted(m.rel for m in BNB_SET)]


@pytest.mark.parametrize(("versions", "cuda"), [
    ({"torch": "2.9.1+cu128"}, "128"),
    ({"torch": "2.5.1", "nvidia-cuda-runtime-cu12": "12.4.127"}, "124"),
    ({"torch": "2.11.0", "nvidia-cuda-runtime": "13.0.96"}, "130"),
    ({"torch": "2.13.0+cpu"}, None),
])
def test_stack_cuda(versions: dict[str, str], cuda: str | None) -> None:
    assert stack_cuda(versions) == cuda


def finding(effect: Effect | None, severity: Severity = Severity.INFO) -> Finding:
    return Finding(FindingKind.MISSING_LIBRARY, "/x.so", "m", (NoFileFound(),),
                   severity=severity, effect=effect)


def test_the_verdict_is_the_worst_effect() -> None:
    """fails over degraded over fits; a prerequisite or an unused variant fits."""
    assert verdict([]) is Verdict.FITS
    assert verdict([finding(Effect.PREREQUISITE), finding(Effect.UNUSED)]) is Verdict.FITS
    assert verdict([finding(Effect.PREREQUISITE),
                    finding(Effect.DEGRADES, Severity.WARNING)]) is Verdict.DEGRADED
    assert verdict([finding(Effect.DEGRADES, Severity.WARNING),
                    finding(Effect.FAILS, Severity.ERROR)]) is Verdict.FAILS
    assert [costs(finding(e)) for e in (Effect.PREREQUISITE, Effect.UNUSED, Effect.DEGRADES)] \
        == [False, False, True]


def test_a_library_of_another_release_is_fixed_by_a_build_not_by_its_wheel() -> None:
    """libcudart.so.12 beside a CUDA 13 stack: the fix is a CUDA 13 build of the package; the
    index's CUDA 12 runtime wheel, which would put two CUDA releases in one process, is not
    offered, and the explanation says why the file does not load."""
    from abifit.sim.process import _explained

    cause = problem_cause(missing("libcudart.so.12"), "xformers", STACK)
    assert cause.hint is not None and "CUDA 13 build of xformers" in cause.hint
    needs = NeedsLibrary("/x.so", None, "libcudart.so.12", 3, Outcome.DOES_NOT_LOAD)
    finding = Finding(FindingKind.MISSING_LIBRARY, "/x.so", "libcudart.so.12: cannot open",
                      (needs, NoFileFound(), IndexFix("pip install 'nvidia-cuda-runtime-cu12'\n"
                                                      "The loader looks there when ...")),
                      library="libcudart.so.12")
    assert _explained(finding, cause) == (
        needs, NoFileFound(), OtherRelease("libcudart.so.12", ("libcudart.so.13",)))
    assert derivation_text(_explained(finding, cause)).splitlines()[-1] == (
        "It needs libcudart.so.12, the stack has libcudart.so.13: it was built for another "
        "release.")
    plain = problem_cause(missing("libavutil.so.59"), "torchcodec", STACK)
    assert _explained(finding, plain) == finding.derivation


def test_a_library_of_another_build_is_fixed_by_the_matching_build() -> None:
    """torchvision built for CUDA beside a CPU torch: libc10_cuda.so is in torch's other
    build; the fix names both ways to match the builds."""
    cause = problem_cause(missing("libc10_cuda.so"), "torchcodec", STACK)
    assert cause.effect is Effect.DEGRADES
    assert cause.hint == ("use the build of torchcodec made for the installed build of torch, "
                          "or the build of torch that ships libc10_cuda.so")
