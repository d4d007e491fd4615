"""Demangling (checked against binutils c++filt), string ABI, signature parsing and comparison."""

from __future__ import annotations

import os
import random
import re
import shutil
import subprocess
from collections.abc import Iterator, Sequence
from pathlib import Path

import pytest

from abifit.formats import demangle as demangle_module
from abifit.formats.demangle import (
    ParameterChange,
    Signature,
    StringAbi,
    compare_signatures,
    demangle,
    demangle_many,
    demangler_available,
    nearest,
    parse_signature,
    string_abi,
)
from fixtures.build import compile_c

LIBSTDCXX = Path("/usr/lib/x86_64-linux-gnu/libstdc++.so.6")
CXXFILT_TOKEN = re.compile(r"[A-Za-z0-9_$.]+")  # what c++filt reading stdin takes as one name

needs_demangler = pytest.mark.skipif(
    not demangler_available(), reason="libstdc++'s __cxa_demangle cannot be loaded here"
)
needs_cxxfilt = pytest.mark.skipif(
    shutil.which("c++filt") is None, reason="binutils c++filt is not installed"
)
needs_nm = pytest.mark.skipif(shutil.which("nm") is None, reason="binutils nm is not installed")
needs_gxx = pytest.mark.skipif(shutil.which("g++") is None, reason="g++ is not installed")

pytestmark = needs_demangler


# ---------------------------------------------------------------------------------------------
# helpers and fixtures


def cxxfilt(names: Sequence[str]) -> list[str]:
    """c++filt's text for each name: one run over stdin, or one per name it would split there."""
    on_stdin = [name for name in names if CXXFILT_TOKEN.fullmatch(name)]
    text = subprocess.run(
        ["c++filt"],
        input="".join(f"{name}\n" for name in on_stdin),
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    from_stdin = iter(text.split("\n"))
    out: list[str] = []
    for name in names:
        if CXXFILT_TOKEN.fullmatch(name):
            out.append(next(from_stdin))
        else:
            argv = subprocess.run(["c++filt", "--", name], capture_output=True, text=True)
            out.append(argv.stdout.rstrip("\n"))
    return out


def dynamic_symbol_names(library: Path) -> list[str]:
    """Every dynamic symbol name (defined and undefined) of `library`, without @VERSION."""
    listing = subprocess.run(
        ["nm", "-D", str(library)], capture_output=True, text=True, check=True
    ).stdout
    names = (line.split()[-1].split("@")[0] for line in listing.splitlines() if line.strip())
    return list(dict.fromkeys(names))


def assert_same_texts(names: Sequence[str], ours: Sequence[str], theirs: Sequence[str]) -> None:
    """Full equality of two demangled lists, showing the first few differences on failure."""
    assert len(ours) == len(theirs) == len(names)
    mismatches = [(n, o, t) for n, o, t in zip(names, ours, theirs, strict=True) if o != t]
    shown = "\n".join(f"  {n}\n    ours:    {o}\n    c++filt: {t}" for n, o, t in mismatches[:5])
    assert not mismatches, f"{len(mismatches)} of {len(names)} differ from c++filt:\n{shown}"


def rejoined(signature: Signature) -> str:
    """The brief's formula: [return type + " "] + name + (parameters) + [" " + qualifiers] +
    clone suffix, after the special prefix; the bare name for non-functions."""
    if signature.parameters is None:
        return signature.special + signature.qualified_name + signature.clone_suffix
    text = signature.qualified_name + "(" + ", ".join(signature.parameters) + ")"
    if signature.return_type is not None:
        text = signature.return_type + " " + text
    if signature.qualifiers:
        text += " " + signature.qualifiers
    return signature.special + text + signature.clone_suffix


def _cached_torch_dir() -> Path:
    cache = Path(os.environ.get("ABIFIT_TEST_CACHE", Path.home() / ".cache" / "abifit-tests"))
    venv = cache / "torch-2.13.0"
    found = sorted(venv.glob("lib/python3*/site-packages/torch"))
    if not (venv / ".abifit-ready").exists() or not found:
        pytest.skip(f"the torch 2.13.0 test venv is not ready at {venv}")
    return found[0]


@pytest.fixture(scope="module")
def libtorch_cpu(request: pytest.FixtureRequest) -> Path:
    """libtorch_cpu.so of the torch test environment (from conftest's `torch_dir` when there)."""
    try:
        torch_dir: Path = request.getfixturevalue("torch_dir")
    except pytest.FixtureLookupError:
        torch_dir = _cached_torch_dir()
    library = torch_dir / "lib" / "libtorch_cpu.so"
    if not library.exists():
        pytest.skip(f"{library} does not exist")
    return library


@pytest.fixture(scope="module")
def torch_names(libtorch_cpu: Path) -> list[str]:
    """The dynamic symbol names of libtorch_cpu.so."""
    if shutil.which("nm") is None:
        pytest.skip("binutils nm is not installed")
    return dynamic_symbol_names(libtorch_cpu)


@pytest.fixture(scope="module")
def torch_texts(torch_names: list[str]) -> list[str]:
    """Our demangled text of each libtorch_cpu.so symbol name."""
    return demangle_many(torch_names)


def function_signatures(names: Sequence[str], texts: Sequence[str]) -> Iterator[Signature]:
    """parse_signature of every demangled name that is a function."""
    for name, text in zip(names, texts, strict=True):
        if text != name:
            signature = parse_signature(name)
            assert signature is not None and signature.text == text
            if signature.is_function:
                yield signature


# ---------------------------------------------------------------------------------------------
# demangle: differential against c++filt


@pytest.mark.slow
@needs_cxxfilt
def test_every_libtorch_cpu_symbol_demangles_like_cxxfilt(
    torch_names: list[str], torch_texts: list[str]
) -> None:
    """demangle() equals c++filt for every dynamic symbol name of libtorch_cpu.so."""
    assert len(torch_names) > 50_000
    assert_same_texts(torch_names, torch_texts, cxxfilt(torch_names))


@needs_cxxfilt
@needs_nm
def test_every_libstdcxx_symbol_demangles_like_cxxfilt() -> None:
    """demangle() equals c++filt for every dynamic symbol name of the system libstdc++.so.6."""
    if not LIBSTDCXX.exists():
        pytest.skip(f"{LIBSTDCXX} does not exist")
    names = dynamic_symbol_names(LIBSTDCXX)
    assert len(names) > 1_000
    assert_same_texts(names, demangle_many(names), cxxfilt(names))


EDGE_NAMES = {
    "static-init-sub": "_GLOBAL__sub_I_foo.cpp",
    "static-init-sub-mangled": "_GLOBAL__sub_I__Z3foov",
    "global-ctors-keyed": "_GLOBAL__I__Z3foov",
    "global-dtors-keyed-plain": "_GLOBAL__D_foo",
    "global-dot-form": "_GLOBAL_.I._Z3foov",
    "guard-variable": "_ZGVZ3foovE1x",
    "vtable": "_ZTV3Foo",
    "typeinfo-name": "_ZTS3Foo",
    "non-virtual-thunk": "_ZThn8_N3Foo3barEv",
    "virtual-thunk": "_ZTv0_n24_N3Foo3barEv",
    "covariant-thunk": "_ZTch0_h0_N3Foo3barEv",
    "TLS-wrapper": "_ZTW3foo",
    "clone-cold": "_Z3foov.cold",
    "clone-isra": "_Z3fooi.isra.0",
    "clone-constprop-isra": "_Z3fooi.constprop.0.isra.0",
    "clone-part-numbered": "_Z3fooi.cold.123",
    "leading-dot": "._Z3foov",
    "leading-dollar": "$_Z3foov",
    "leading-dot-dollar": ".$_Z3foov",
    "bare-type-int": "i",
    "bare-type-vector": "St6vectorIiSaIiEE",
    "double-underscore": "__Z3foov",
    "Ss-argument": "_Z3fooSs",
    "Si-So-Sd-arguments": "_Z3fooSiSoSd",
    "Ss-member": "_ZNSs4swapERSs",
    "Ss-ctor": "_ZNSsC1Ev",
    "Ss-last-template-argument": "_Z1f3FooISsE",
    "Ss-in-vector": "_Z1fSt6vectorISsSaISsEE",
    "Ss-abi-tag": "_Z1fSsB5cxx11",
    "So-abi-tag-ctor": "_ZNSoB5cxx11C1Ev",
    "cxx11-string": "_ZNSt7__cxx1112basic_stringIcSt11char_traitsIcESaIcEEC1Ev",
    "rust-legacy-plain": "_ZN4core3fmt9Formatter3pad17h8a7b9d1e5c4f3a2bE",
    "rust-legacy-escapes": (
        "_ZN4core3ptr85drop_in_place$LT$std..rt..lang_start$LT$$LP$$RP$$GT$"
        "..$u7b$$u7b$closure$u7d$$u7d$$GT$17h1a2b3c4d5e6f7a8bE"
    ),
    "rust-legacy-suffix": "_ZN3foo3bar17h05af221e174051e9E.llvm.123",
    "rust-legacy-bad-escape": "_ZN6$u80$x3bar17h05af221e174051e9E",
    "rust-legacy-few-hash-digits": "_ZN3foo17h0000000000000000E",
    "rust-legacy-dot": "_ZN3a.b3bar17h05af221e174051e9E",
    "over-1024-chars": "_Z3fooIJ" + "i" * 1100 + "EEvv",
    "just-under-1024": "_Z3fooIJ" + "i" * 500 + "EEvv",
    "empty": "",
}


@needs_cxxfilt
@pytest.mark.parametrize("name", EDGE_NAMES.values(), ids=EDGE_NAMES.keys())
def test_edge_case_names_demangle_like_cxxfilt(name: str) -> None:
    """Special names, clone suffixes, prefixes, abbreviations and Rust names match c++filt."""
    assert demangle(name) == cxxfilt([name])[0]


@needs_cxxfilt
def test_random_mangled_looking_garbage_matches_cxxfilt() -> None:
    """Random "_Z..." strings come back exactly as c++filt prints them, without crashing."""
    rng = random.Random(20260)
    alphabet = "0123456789_SNEIJvicsbPRKTZLXdfjlmt"
    names = ["_Z" + "".join(rng.choices(alphabet, k=rng.randint(0, 60))) for _ in range(500)]
    assert_same_texts(names, demangle_many(names), cxxfilt(names))


@pytest.mark.parametrize(
    "name",
    ["", "_Z", "_Zfoo", "_R", "printf", "main", "_init", "foo@GLIBC_2.2.5", "Ss", "i", "\x00_Z1fv"],
    ids=["empty", "_Z", "_Zfoo", "_R", "printf", "main", "_init", "at-version", "Ss", "i", "NUL"],
)
def test_unmangled_and_garbage_names_come_back_unchanged(name: str) -> None:
    """Names that are not demangleable C++ are returned as they are."""
    assert demangle(name) == name
    assert parse_signature(name) is None
    assert string_abi(name) is StringAbi.NONE


def test_very_long_random_strings_come_back_unchanged() -> None:
    """Long random strings, mangled-looking or not, come back unchanged."""
    rng = random.Random(7)
    for prefix in ("", "_Z", "_ZN", "_GLOBAL__I_"):
        for _ in range(20):
            body = "".join(rng.choices("abcXYZ0123456789_$.E", k=rng.randint(2_000, 100_000)))
            assert demangle(prefix + body) == prefix + body


def test_demangle_many_is_demangle_in_order() -> None:
    """demangle_many gives demangle() of each name, in the given order, from any iterable."""
    names = ["_Z3foov", "plain", "_ZTV3Foo", "_Z3foov", "_Z3barSs"]
    assert demangle_many(iter(names)) == [demangle(name) for name in names]
    assert demangle_many(names)[:3] == ["foo()", "plain", "vtable for Foo"]


def test_demangle_many_grows_its_buffer_as_demangle_does() -> None:
    """demangle_many demangles into one buffer that __cxa_demangle replaces when a text does
    not fit (64 KiB at first): texts longer than that, before and after short ones, invalid
    names (which leave the buffer as it was), Rust's legacy names and a NUL give what
    demangle() gives each name alone."""
    def repeated(function: str, parameters: int) -> str:  # f(x...x, x...x, ...): a short name
        return f"_Z1{function}300{'x' * 300}{'S_' * (parameters - 1)}"

    long_name, longer_name = repeated("f", 220), repeated("g", 350)  # under 1,024 chars
    names = ["_Z3foov", long_name, "_Z3barSs", "_Zinvalid", longer_name, "_Z3bazi",
             "_ZN4core3fmt5Write9write_fmt17h0123456789abcdefE", "_Z3f\0v", "plain",
             ".L_Z3foov", "_Z3quxv"]
    texts = demangle_many(names)
    assert texts == [demangle(name) for name in names]
    assert texts[1].startswith("f(xxx") and len(texts[1]) > 65_536 > len(long_name)
    assert texts[4].startswith("g(xxx") and len(texts[4]) > len(texts[1]) + 30_000
    assert texts[5] == "baz(int)" and texts[3] == "_Zinvalid" and texts[-1] == "qux()"


def test_without_the_system_demangler_names_come_back_unchanged(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """When libstdc++ cannot be loaded, demangling is the identity and says it is unavailable."""
    monkeypatch.setattr(demangle_module, "_system_demangler", lambda: None)
    assert not demangler_available()
    assert demangle("_Z3foov") == "_Z3foov"
    assert demangle_many(["_Z3foov", "x"]) == ["_Z3foov", "x"]
    assert parse_signature("_Z3foov") is None


# ---------------------------------------------------------------------------------------------
# string ABI

ABI_SOURCE = """
#include <list>
#include <sstream>
#include <string>
struct SsXY {};
std::string takes_string(const std::string& s) { return s; }
void takes_istringstream(std::istringstream&) {}
void takes_list(std::list<int>&) {}
void takes_wstring(std::wstring) {}
void takes_ident(SsXY) {}
void Ss(int) {}
void plain(int, char const*) {}
std::string returns_string() { return {}; }
"""

# function name -> (string ABI with -D_GLIBCXX_USE_CXX11_ABI=0, with =1)
ABI_EXPECTED = {
    "takes_string": (StringAbi.OLD, StringAbi.CXX11),
    "takes_istringstream": (StringAbi.OLD, StringAbi.CXX11),
    "takes_list": (StringAbi.OLD, StringAbi.CXX11),
    "takes_wstring": (StringAbi.OLD, StringAbi.CXX11),
    "takes_ident": (StringAbi.NONE, StringAbi.NONE),
    "Ss": (StringAbi.NONE, StringAbi.NONE),
    "plain": (StringAbi.NONE, StringAbi.NONE),
    # the return type is not mangled: only the [abi:cxx11] tag tells
    "returns_string": (StringAbi.NONE, StringAbi.CXX11),
}


@needs_gxx
@needs_nm
@pytest.mark.parametrize("cxx11_abi", [0, 1], ids=["old-abi", "cxx11-abi"])
def test_string_abi_of_symbols_compiled_by_gxx(tmp_path: Path, cxx11_abi: int) -> None:
    """Symbols g++ emits with _GLIBCXX_USE_CXX11_ABI=0 read as OLD and with =1 as CXX11."""
    source = tmp_path / "abi.cpp"
    source.write_text(ABI_SOURCE)
    library = compile_c(source, tmp_path / "libabi.so", cxx=True, optimize=None,
                        flags=["-std=c++17", f"-D_GLIBCXX_USE_CXX11_ABI={cxx11_abi}"])
    listing = subprocess.run(
        ["nm", "-D", "--defined-only", str(library)], capture_output=True, text=True, check=True
    ).stdout
    found: dict[str, StringAbi] = {}
    for line in listing.splitlines():
        name = line.split()[-1].split("@")[0]
        signature = parse_signature(name)
        function = signature.qualified_name.split("[")[0] if signature else ""  # no [abi:cxx11]
        if function in ABI_EXPECTED:
            found[function] = string_abi(name)
    expected = {function: abis[cxx11_abi] for function, abis in ABI_EXPECTED.items()}
    assert found == expected


@pytest.mark.parametrize(
    ("mangled", "expected"),
    [
        pytest.param("_Z1fSs", StringAbi.OLD, id="Ss-parameter"),
        pytest.param("_ZNKSs4sizeEv", StringAbi.OLD, id="old-string-member"),
        pytest.param(
            "_Z1fRSt18basic_stringstreamIcSt11char_traitsIcESaIcEE",
            StringAbi.OLD,
            id="old-stringstream",
        ),
        pytest.param(
            "_Z1fNSt7__cxx1112basic_stringIcSt11char_traitsIcESaIcEEE",
            StringAbi.CXX11,
            id="cxx11-string-parameter",
        ),
        pytest.param("_Z1fB5cxx11v", StringAbi.CXX11, id="abi-tag-only"),
        pytest.param("_Z1fSsNSt7__cxx114listIiSaIiEEE", StringAbi.CXX11, id="mixed-is-cxx11"),
        pytest.param("_Z5FooSsv", StringAbi.NONE, id="Ss-inside-identifier"),
        pytest.param("_ZN4SsXY3fooEv", StringAbi.NONE, id="Ss-starting-identifier"),
        pytest.param("_ZN5mystd6stringE", StringAbi.NONE, id="mystd-string"),
        pytest.param("_ZN3foo3std6stringE", StringAbi.NONE, id="nested-std-string"),
        pytest.param(
            "_Z1fSt17basic_string_viewIcSt11char_traitsIcEE", StringAbi.NONE, id="string-view"
        ),
        pytest.param("_Z1fSt6vectorIiSaIiEE", StringAbi.NONE, id="vector"),
        pytest.param(
            "_Z3fooIJ" + "i" * 1100 + "EEvB5cxx11v",
            StringAbi.CXX11,
            id="too-long-to-demangle-with-tag",
        ),
        pytest.param(
            "_Z3fooIJ" + "i" * 1100 + "EEvSs", StringAbi.NONE, id="too-long-to-demangle-old"
        ),
    ],
)
def test_string_abi_of_hand_written_names(mangled: str, expected: StringAbi) -> None:
    """The string ABI is read from the demangled text, so identifiers cannot fool it."""
    assert string_abi(mangled) is expected


# ---------------------------------------------------------------------------------------------
# parse_signature


def _sig(
    special: str = "",
    return_type: str | None = None,
    name: str = "",
    parameters: tuple[str, ...] | None = (),
    qualifiers: str = "",
    clone: str = "",
) -> tuple[str, str | None, str, tuple[str, ...] | None, str, str]:
    return (special, return_type, name, parameters, qualifiers, clone)


PARSE_CASES = {
    "plain-function": ("_Z3fooic", _sig(name="foo", parameters=("int", "char"))),
    "void-parameter-list": ("_Z1fv", _sig(name="f")),
    "variadic": ("_Z1fiz", _sig(name="f", parameters=("int", "..."))),
    "const-member": ("_ZNK3Foo3barEv", _sig(name="Foo::bar", qualifiers="const")),
    "const-lvalue-ref-member": ("_ZNKR1A1fEv", _sig(name="A::f", qualifiers="const &")),
    "rvalue-ref-member": ("_ZNO1A1gEv", _sig(name="A::g", qualifiers="&&")),
    "const-volatile-member": ("_ZNVK1A1fEv", _sig(name="A::f", qualifiers="const volatile")),
    "template-with-return-type": (
        "_Z1fIiEvT_",
        _sig(return_type="void", name="f<int>", parameters=("int",)),
    ),
    "template-char-literal-argument": (
        "_Z3fooILc1EEvv",
        _sig(return_type="void", name="foo<(char)1>"),
    ),
    "decltype-return": (
        "_Z2dtIiEDTltfp_fp0_ET_S1_",
        _sig(return_type="decltype ({parm#1}<{parm#2})", name="dt<int>", parameters=("int", "int")),
    ),
    "template-expression-argument": (
        "_Z3nt2ILi3EEv1SIXrsT_Li1EEE",
        _sig(return_type="void", name="nt2<3>", parameters=("S<(3)>>(1)>",)),
    ),
    "function-pointer-parameters": (
        "_Z2fpPFvicERA3_iM1AKFvvE",
        _sig(name="fp", parameters=("void (*)(int, char)", "int (&) [3]", "void (A::*)() const")),
    ),
    "pointer-to-function-returning-pointer": (
        "_Z1fPFPFivEvE",
        _sig(name="f", parameters=("int (*(*)())()",)),
    ),
    "returns-function-pointer": (
        "_Z5retfpIiEPFvcET_",
        _sig(return_type="void (*)(char)", name="retfp<int>", parameters=("int",)),
    ),
    "returns-array-reference": (
        "_Z6retarrIiERA10_iT_",
        _sig(return_type="int (&) [10]", name="retarr<int>", parameters=("int",)),
    ),
    "operator-call": (
        "_ZNK1AclEi",
        _sig(name="A::operator()", parameters=("int",), qualifiers="const"),
    ),
    "operator-less": (
        "_ZNK1AltERKS_",
        _sig(name="A::operator<", parameters=("A const&",), qualifiers="const"),
    ),
    "operator-less-equal": ("_ZN1AleERKS_", _sig(name="A::operator<=", parameters=("A const&",))),
    "operator-greater": ("_ZN1AgtERKS_", _sig(name="A::operator>", parameters=("A const&",))),
    "operator-greater-equal": (
        "_ZN1AgeERKS_",
        _sig(name="A::operator>=", parameters=("A const&",)),
    ),
    "operator-shift-left": ("_ZN1AlsEi", _sig(name="A::operator<<", parameters=("int",))),
    "operator-shift-right": ("_ZN1ArsEi", _sig(name="A::operator>>", parameters=("int",))),
    "operator-spaceship": ("_ZN1AssERKS_", _sig(name="A::operator<=>", parameters=("A const&",))),
    "operator-arrow": ("_ZN1AptEv", _sig(name="A::operator->")),
    "operator-arrow-star": ("_ZN1ApmEv", _sig(name="A::operator->*")),
    "operator-comma": ("_ZN1AcmERKS_", _sig(name="A::operator,", parameters=("A const&",))),
    "operator-subscript": (
        "_ZNSt6vectorIiSaIiEEixEm",
        _sig(
            name="std::vector<int, std::allocator<int> >::operator[]", parameters=("unsigned long",)
        ),
    ),
    "operator-less-template": (
        "_ZltI1AEbRKT_S3_",
        _sig(return_type="bool", name="operator< <A>", parameters=("A const&", "A const&")),
    ),
    "operator-shift-template-std": (
        "_ZStlsISt11char_traitsIcEERSt13basic_ostreamIcT_ES5_PKc",
        _sig(
            return_type="std::basic_ostream<char, std::char_traits<char> >&",
            name="std::operator<< <std::char_traits<char> >",
            parameters=("std::basic_ostream<char, std::char_traits<char> >&", "char const*"),
        ),
    ),
    "operator-conversion": ("_ZN1AcviEv", _sig(name="A::operator int")),
    "operator-conversion-template": ("_ZN1AcvPT_IiEEv", _sig(name="A::operator int*<int>")),
    "operator-new": ("_ZN1AnwEm", _sig(name="A::operator new", parameters=("unsigned long",))),
    "operator-delete-array": (
        "_ZN1AdaEPv",
        _sig(name="A::operator delete[]", parameters=("void*",)),
    ),
    "operator-literal": ("_Zli2_xPKc", _sig(name='operator"" _x', parameters=("char const*",))),
    "lambda-call-operator": (
        "_ZZ5outerIiEiT_ENKUliE_clEi",
        _sig(
            name="outer<int>(int)::{lambda(int)#1}::operator()",
            parameters=("int",),
            qualifiers="const",
        ),
    ),
    "unnamed-type-member": (
        "_ZZ5outerIiEiT_ENKUt_1mEi",
        _sig(name="outer<int>(int)::{unnamed type#1}::m", parameters=("int",), qualifiers="const"),
    ),
    "local-class-in-const-member": (
        "_ZZNK1A1fEvEN3Bar3bazEc",
        _sig(name="A::f() const::Bar::baz", parameters=("char",)),
    ),
    "anonymous-namespace": ("_ZN12_GLOBAL__N_13fooEv", _sig(name="(anonymous namespace)::foo")),
    "abi-tag": ("_ZN3foo3barB5cxx11Ev", _sig(name="foo::bar[abi:cxx11]")),
    "constructor": ("_ZN1AC2Ev", _sig(name="A::A")),
    "destructor": ("_ZN1AD2Ev", _sig(name="A::~A")),
    "clone-cold": ("_Z3foov.cold", _sig(name="foo", clone=" [clone .cold]")),
    "clone-constprop-isra": (
        "_Z3fooi.constprop.0.isra.0",
        _sig(name="foo", parameters=("int",), clone=" [clone .constprop.0] [clone .isra.0]"),
    ),
    "non-virtual-thunk": (
        "_ZThn8_N3Foo3barEv",
        _sig(special="non-virtual thunk to ", name="Foo::bar"),
    ),
    "global-constructors-keyed-to-function": (
        "_GLOBAL__I__Z3foov",
        _sig(special="global constructors keyed to ", name="foo"),
    ),
    "vtable": ("_ZTV3Foo", _sig(special="vtable for ", name="Foo", parameters=None)),
    "typeinfo-of-function-pointer": (
        "_ZTIPFviE",
        _sig(special="typeinfo for ", name="void (*)(int)", parameters=None),
    ),
    "construction-vtable": (
        "_ZTCN3foo3BarE0_NS_3BazE",
        _sig(special="construction vtable for ", name="foo::Baz-in-foo::Bar", parameters=None),
    ),
    "guard-variable": (
        "_ZGVZ3foovE1x",
        _sig(special="guard variable for ", name="foo()::x", parameters=None),
    ),
    "data-member": ("_ZN1A1xE", _sig(name="A::x", parameters=None)),
    "function-local-static": ("_ZZ3foovE1x", _sig(name="foo()::x", parameters=None)),
    "static-in-lambda": (
        "_ZZZ5outerIiEiT_ENKUliE_clEiE1q",
        _sig(name="outer<int>(int)::{lambda(int)#1}::operator()(int) const::q", parameters=None),
    ),
}


@pytest.mark.parametrize(("mangled", "expected"), PARSE_CASES.values(), ids=PARSE_CASES.keys())
def test_parse_signature_splits_the_demangled_text(
    mangled: str, expected: tuple[str, str | None, str, tuple[str, ...] | None, str, str]
) -> None:
    """parse_signature splits special prefix, return type, name, parameters, qualifiers, clone."""
    signature = parse_signature(mangled)
    assert signature is not None
    assert signature.mangled == mangled
    assert signature.text == demangle(mangled)
    parts = (
        signature.special,
        signature.return_type,
        signature.qualified_name,
        signature.parameters,
        signature.qualifiers,
        signature.clone_suffix,
    )
    assert parts == expected
    assert signature.render() == signature.text
    assert signature.is_function == (expected[3] is not None)


def test_the_brief_formula_rebuilds_text_except_nested_declarators() -> None:
    """The rejoin formula reproduces the text; a function-pointer return needs render()."""
    simple = parse_signature("_Z1fIiEvT_")
    nested = parse_signature("_Z5retfpIiEPFvcET_")
    assert simple is not None and nested is not None
    assert rejoined(simple) == simple.text == "void f<int>(int)"
    assert nested.text == "void (*retfp<int>(int))(char)"
    assert rejoined(nested) != nested.text
    assert nested.render() == nested.text


def nests_name_in_return_type(signature: Signature) -> bool:
    """Whether the text nests the name in a declarator: ``void (*f<int>(int))(char)``."""
    nested = r"\((?:\*|&&|&|[^()]*::\*) ?" + re.escape(signature.qualified_name) + r"\("
    return re.search(nested, signature.text) is not None


def round_trip_failures(signatures: Sequence[Signature]) -> list[str]:
    """Signatures whose render() is not the text, or whose brief formula is not the text
    although the name is not nested in a declarator."""
    failures = []
    for signature in signatures:
        formula_ok = rejoined(signature) == signature.text
        if signature.render() != signature.text or not (
            formula_ok or nests_name_in_return_type(signature)
        ):
            failures.append(f"{signature.mangled}\n    {signature.text}\n    {signature!r}")
    return failures


@pytest.mark.slow
def test_every_libtorch_cpu_function_signature_rebuilds_its_text(
    torch_names: list[str], torch_texts: list[str]
) -> None:
    """For every function symbol of libtorch_cpu.so the parts rejoin to the exact text."""
    signatures = list(function_signatures(torch_names, torch_texts))
    assert len(signatures) > 30_000
    failures = round_trip_failures(signatures)
    assert not failures, f"{len(failures)} do not round-trip:\n" + "\n".join(failures[:5])
    nested = [s for s in signatures if rejoined(s) != s.text]
    assert len(nested) < 100  # function-pointer returns are rare (11 in torch 2.13.0)


@needs_nm
def test_every_libstdcxx_function_signature_rebuilds_its_text() -> None:
    """For every function symbol of libstdc++.so.6 the parts rejoin to the exact text."""
    if not LIBSTDCXX.exists():
        pytest.skip(f"{LIBSTDCXX} does not exist")
    names = dynamic_symbol_names(LIBSTDCXX)
    signatures = list(function_signatures(names, demangle_many(names)))
    assert len(signatures) > 1_000
    failures = round_trip_failures(signatures)
    assert not failures, f"{len(failures)} do not round-trip:\n" + "\n".join(failures[:5])


# ---------------------------------------------------------------------------------------------
# compare_signatures and nearest

CHECK = "_ZN3c104cuda29c10_cuda_check_implementationEiPKcS2_ib"
CHECK_UNSIGNED = "_ZN3c104cuda29c10_cuda_check_implementationEiPKcS2_jb"


def test_compare_finds_the_one_changed_parameter() -> None:
    """int -> unsigned int in parameter 4 of the same function is exactly one change."""
    diff = compare_signatures(CHECK, CHECK_UNSIGNED)
    assert diff is not None
    assert diff.same_function
    assert diff.parameter_changes == (ParameterChange(4, "int", "unsigned int"),)
    assert not diff.qualifiers_changed
    assert not diff.return_type_changed
    assert not diff.string_abi_changed
    text = diff.describe()
    assert "c10::cuda::c10_cuda_check_implementation" in text
    assert "parameter 4" in text
    assert "`int`" in text and "`unsigned int`" in text


def test_compare_reports_a_string_abi_change() -> None:
    """std::string (old ABI) vs std::__cxx11::basic_string in the same function is flagged."""
    old = "_ZN3c106detail23torchInternalAssertFailEPKcS2_jS2_RKSs"
    new = (
        "_ZN3c106detail23torchInternalAssertFailEPKcS2_jS2_"
        "RKNSt7__cxx1112basic_stringIcSt11char_traitsIcESaIcEEE"
    )
    diff = compare_signatures(old, new)
    assert diff is not None
    assert diff.same_function
    assert diff.string_abi_changed
    assert [change.position for change in diff.parameter_changes] == [5]
    assert "std::string ABI: old → cxx11" in diff.describe()


def test_compare_different_functions() -> None:
    """Two different qualified names are not the same function, even with equal parameters."""
    diff = compare_signatures("_ZN2ns1fEic", "_ZN2ns1gEic")
    assert diff is not None
    assert not diff.same_function
    assert diff.parameter_changes == ()
    assert diff.describe() == "different function ns::g (not ns::f); same parameters"


@pytest.mark.parametrize(
    ("old", "new", "changes"),
    [
        pytest.param("_Z1fic", "_Z1fibc", (ParameterChange(2, None, "bool"),), id="added"),
        pytest.param("_Z1fibc", "_Z1fic", (ParameterChange(2, "bool", None),), id="removed"),
        pytest.param("_Z1fic", "_Z1fic", (), id="identical"),
        pytest.param("_Z1fv", "_Z1fi", (ParameterChange(1, None, "int"),), id="from-empty"),
        pytest.param(
            "_Z1fiii",
            "_Z1fjij",
            (ParameterChange(1, "int", "unsigned int"), ParameterChange(3, "int", "unsigned int")),
            id="two-positional",
        ),
    ],
)
def test_compare_parameter_changes(
    old: str, new: str, changes: tuple[ParameterChange, ...]
) -> None:
    """Inserted and removed parameters read as one change each; equal lengths compare by
    position."""
    diff = compare_signatures(old, new)
    assert diff is not None
    assert diff.parameter_changes == changes


def test_compare_qualifiers_and_return_type() -> None:
    """A dropped const and a changed template return type are both reported."""
    quals = compare_signatures("_ZNK1A1fEv", "_ZN1A1fEv")
    assert quals is not None and quals.qualifiers_changed
    assert "qualifiers: `const` → ``" in quals.describe()
    returns = compare_signatures("_Z1fIiEvT_", "_Z1fIiEiT_")
    assert returns is not None and returns.return_type_changed
    assert "return type: `void` → `int`" in returns.describe()


def test_compare_needs_two_cxx_names() -> None:
    """compare_signatures is None when either name is not a mangled C++ name."""
    assert compare_signatures("printf", CHECK) is None
    assert compare_signatures(CHECK, "_Zfoo") is None


NEAREST_CANDIDATES = [
    "_ZN3c104cuda29c10_cuda_check_implementationEiPKcS2_jb",  # unsigned line: 1 change
    "_ZN3c104cuda29c10_cuda_check_implementationEiPKcS2_b",  # line removed: 1 change
    "_ZN3c104cuda29c10_cuda_check_implementationElPKcS2_jb",  # 2 changes
    "_ZN3c103hip29c10_cuda_check_implementationEiPKcS2_ib",  # other namespace, same parameters
    "_ZN5other29c10_cuda_check_implementationEv",  # shares only the last component
    "_ZN3c104cuda30c10_cuda_check_implementation2Eiv",  # other name: filtered out
    "_ZN3c104cuda9somethingEi",  # unrelated
    "printf",
    "_ZTVN3c104cuda29c10_cuda_check_implementationE",  # a vtable: another kind
]


def test_nearest_orders_same_function_first_then_fewest_changes() -> None:
    """Same qualified name first (fewest changes, then name), then other scopes."""
    found = nearest(CHECK, NEAREST_CANDIDATES, limit=10)
    assert [diff.new.mangled for diff in found] == [NEAREST_CANDIDATES[i] for i in (1, 0, 2, 3, 4)]
    assert all(diff.old.mangled == CHECK for diff in found)
    assert [diff.same_function for diff in found] == [True, True, True, False, False]


def test_nearest_limit_and_exact_match_first() -> None:
    """An identical symbol ranks first; `limit` caps the list; duplicates count once."""
    found = nearest(CHECK, [*NEAREST_CANDIDATES, CHECK, CHECK], limit=2)
    assert [diff.new.mangled for diff in found] == [CHECK, NEAREST_CANDIDATES[1]]
    assert nearest(CHECK, NEAREST_CANDIDATES, limit=0) == []
    assert nearest("printf", NEAREST_CANDIDATES) == []


def test_nearest_prefers_a_string_abi_variant() -> None:
    """The same function with only the other std::string ABI ranks before a real change."""
    target = "_ZN3c106detail23torchInternalAssertFailEPKcS2_jS2_RKSs"
    cxx11 = (
        "_ZN3c106detail23torchInternalAssertFailEPKcS2_jS2_"
        "RKNSt7__cxx1112basic_stringIcSt11char_traitsIcESaIcEEE"
    )
    char_pointer = "_ZN3c106detail23torchInternalAssertFailEPKcS2_jS2_S2_"
    found = nearest(target, [char_pointer, cxx11])
    assert [diff.new.mangled for diff in found] == [cxx11, char_pointer]
    assert found[0].string_abi_changed


def test_nearest_finds_operators_without_an_identifier_prefilter() -> None:
    """Operators have no source identifier; candidates still filter by the operator name."""
    found = nearest("_ZN1AlsEi", ["_ZN1AlsEl", "_ZN1BlsEi", "_ZN1ArsEi", "_ZN1AplEi"], limit=5)
    assert [diff.new.mangled for diff in found] == ["_ZN1AlsEl", "_ZN1BlsEi"]


@pytest.mark.slow
def test_nearest_over_libtorch_cpu_is_quick(torch_names: list[str]) -> None:
    """nearest() over all libtorch_cpu.so names finds the overloads of at::native::add."""
    target = "_ZN2at6native3addERKNS_6TensorES3_RKN3c106ScalarE"
    found = nearest(target, torch_names, limit=3)
    assert found and found[0].same_function
    assert found[0].new.qualified_name == "at::native::add"


def test_names_find_what_a_scan_of_each_name_finds() -> None:
    """`Names.containing` gives the names a test of each name gives, in name order; `nearest`
    over `Names` gives what it gives over a plain list."""
    import random

    from abifit.formats.demangle import Names, nearest

    rng = random.Random("names")
    parts = ["3foo", "3bar", "c10", "4cuda", "29c10_cuda_check_implementation", "Ei", "PKc"]
    names = {"_ZN" + "".join(rng.choice(parts) for _ in range(rng.randrange(1, 5))) + "E"
             for _ in range(3000)}
    index = Names(names)
    for token in [*parts, "3foo3bar", "x", "E", "_ZN3foo"]:
        assert index.containing(token) == sorted(n for n in names if token in n)
    # asked again (a found text is kept): the same, and a caller's change to it is its own
    again = index.containing("3foo")
    assert again == sorted(n for n in names if "3foo" in n)
    again.clear()
    assert index.containing("3foo") == sorted(n for n in names if "3foo" in n)
    assert len(index) == len(names) and set(index) == names
    assert all(name in index for name in names) and "_ZN3bazE" not in index
    symbol = "_ZN3c104cuda29c10_cuda_check_implementationEiPKcS2_ib"
    exports = ["_ZN3c104cuda29c10_cuda_check_implementationEiPKcS2_jb",
               "_ZN3c104cuda29c10_cuda_check_implementationEiPKcS2_lb", "_ZN3c106detail4failEv"]
    assert ([d.new.mangled for d in nearest(symbol, Names(exports))]
            == [d.new.mangled for d in nearest(symbol, exports)])
    assert nearest(symbol, Names(exports))
