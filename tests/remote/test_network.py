"""Reaching an index as pip does: credentials (in the index URL, in a netrc file; never shown),
the environment's proxies and `no_proxy`, a proxy that wants credentials, pip's retries.

Each test runs `abifit check extpkg==1.0` (its module needs hostpkg 1.0's library, which
it requires: `fits`) against a real index on 127.0.0.1 that wants a password or is reached
through a real forward proxy on 127.0.0.1.
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Mapping
from pathlib import Path

import pytest

from abifit.cli import main
from abifit.remote.network import bypassed, environment_proxies, redact, split_credentials
from helpers import wheels
from httpserver import ForwardProxy, LoopbackServer, publish_index

USER, PASSWORD = "alice", "s3cret-pa55"
PROXY_ENV = ("http_proxy", "https_proxy", "all_proxy", "no_proxy", "HTTP_PROXY",
             "HTTPS_PROXY", "ALL_PROXY", "NO_PROXY", "NETRC")


@pytest.fixture
def clean_env(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Iterator[None]:
    """No pip configuration, proxy or netrc from the machine."""
    monkeypatch.setenv("PIP_CONFIG_FILE", "/dev/null")
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    for var in (*PROXY_ENV, "PIP_INDEX_URL", "PIP_EXTRA_INDEX_URL", "PIP_FIND_LINKS",
                "PIP_RETRIES", "PIP_TIMEOUT", "PIP_PROXY"):
        monkeypatch.delenv(var, raising=False)
    yield


def check(index_url: str, cache: Path, capsys: pytest.CaptureFixture[str],
          env: Mapping[str, str] = {}, monkeypatch: pytest.MonkeyPatch | None = None,
          ) -> tuple[int, str, str]:
    """`abifit check extpkg==1.0 --json` against `index_url`: exit code, stdout, stderr."""
    for key, value in env.items():
        assert monkeypatch is not None
        monkeypatch.setenv(key, value)
    code = main(["check", "extpkg==1.0", "--python-version", "3.11", "--platform",
                 "linux_x86_64", "--index-url", index_url, "--cache-dir", str(cache),
                 "--json"])
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def with_credentials(url: str, user: str = USER, password: str = PASSWORD) -> str:
    scheme, rest = url.split("://", 1)
    return f"{scheme}://{user}:{password}@{rest}"


def cached_text(cache: Path) -> bytes:
    return b"".join(p.read_bytes() for p in cache.rglob("*") if p.is_file())


def test_credentials_in_the_index_url_are_sent_and_never_kept(
        binaries: dict[str, bytes], clean_env: None, tmp_path: Path,
        capsys: pytest.CaptureFixture[str]) -> None:
    """An index that wants a password, given in the URL: every request (pages and wheel
    ranges) carries it, the check fits, and neither the output nor the cache holds it."""
    with LoopbackServer(auth=(USER, PASSWORD)) as server:
        index = publish_index(server, wheels(binaries))
        code, out, err = check(with_credentials(index.url), tmp_path / "cache", capsys)
        assert code == 0, err
        assert json.loads(out)["verdict"] == "fits"
        assert server.requests > 2 and all(s.path != "" for s in server.log)
    assert PASSWORD not in out + err
    assert PASSWORD.encode() not in cached_text(tmp_path / "cache")


def test_a_refused_password_is_said_and_never_shown(
        binaries: dict[str, bytes], clean_env: None, tmp_path: Path,
        capsys: pytest.CaptureFixture[str]) -> None:
    """A wrong password: exit 2, an error that says the credentials were refused, and the
    password nowhere in what is printed."""
    wrong = "wr0ng-pa55word"
    with LoopbackServer(auth=(USER, PASSWORD)) as server:
        index = publish_index(server, wheels(binaries))
        code, out, err = check(with_credentials(index.url, password=wrong),
                               tmp_path / "cache", capsys)
    assert code == 2
    assert "HTTP 401" in out + err and "credentials given were refused" in out + err
    assert wrong not in out + err


def test_a_netrc_gives_the_password(
        binaries: dict[str, bytes], clean_env: None, tmp_path: Path,
        capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    """No credentials in the URL: those of the netrc file's entry for the host are sent."""
    netrc = tmp_path / "netrc"
    netrc.write_text(f"machine 127.0.0.1 login {USER} password {PASSWORD}\n")
    netrc.chmod(0o600)
    with LoopbackServer(auth=(USER, PASSWORD)) as server:
        index = publish_index(server, wheels(binaries))
        code, _out, err = check(index.url, tmp_path / "cache", capsys, {"NETRC": str(netrc)},
                                monkeypatch)
    assert code == 0, err


def test_requests_go_through_the_proxy_of_the_environment(
        binaries: dict[str, bytes], clean_env: None, tmp_path: Path,
        capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    """HTTP_PROXY set: the index page and the wheels' ranges are asked of the proxy, which
    asks the index; the verdict is the same."""
    with LoopbackServer() as server, ForwardProxy() as proxy:
        index = publish_index(server, wheels(binaries))
        code, _out, err = check(index.url, tmp_path / "cache", capsys,
                                {"HTTP_PROXY": proxy.url}, monkeypatch)
        assert code == 0, err
        assert any("/simple/extpkg/" in url for url in proxy.seen)
        assert any("/files/extpkg-1.0" in url for url in proxy.seen)
        assert len(proxy.seen) == server.requests


def test_no_proxy_sends_requests_directly(
        binaries: dict[str, bytes], clean_env: None, tmp_path: Path,
        capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    """The index's host in NO_PROXY: nothing goes through the proxy."""
    with LoopbackServer() as server, ForwardProxy() as proxy:
        index = publish_index(server, wheels(binaries))
        code, _out, err = check(index.url, tmp_path / "cache", capsys,
                                {"HTTP_PROXY": proxy.url, "NO_PROXY": "localhost,127.0.0.1"},
                                monkeypatch)
        assert code == 0, err
        assert proxy.seen == [] and server.requests > 0


def test_a_proxy_that_wants_credentials(
        binaries: dict[str, bytes], clean_env: None, tmp_path: Path,
        capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    """The proxy's credentials in HTTP_PROXY are sent to it as Proxy-Authorization; without
    them the proxy's 407 is said (exit 2), with no secret shown."""
    with LoopbackServer() as server, ForwardProxy(auth=("bob", PASSWORD)) as proxy:
        index = publish_index(server, wheels(binaries))
        code, _out, err = check(index.url, tmp_path / "one", capsys,
                                {"HTTP_PROXY": with_credentials(proxy.url, "bob")},
                                monkeypatch)
        assert code == 0, err
        code, out, err = check(index.url, tmp_path / "two", capsys,
                               {"HTTP_PROXY": proxy.url}, monkeypatch)
        assert code == 2 and "HTTP 407" in out + err and "proxy wants credentials" in out + err
    assert PASSWORD not in out + err


def test_pips_retries_setting_is_followed(
        binaries: dict[str, bytes], clean_env: None, tmp_path: Path,
        capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    """A wheel answered once with 503: retried by default (fits); with PIP_RETRIES=0, the
    503 is the error, as pip would give up."""
    with LoopbackServer() as server:
        index = publish_index(server, wheels(binaries))
        wheel = next(f"/files/{name}" for name in index.files if name.startswith("extpkg"))
        server.inject("503", path=wheel)
        code, _out, err = check(index.url, tmp_path / "one", capsys)
        assert code == 0, err
        server.inject("503", path=wheel)
        code, out, err = check(index.url, tmp_path / "two", capsys, {"PIP_RETRIES": "0"},
                               monkeypatch)
        assert code == 2 and "HTTP 503" in out + err and "no retries" in out + err


def test_the_network_settings_read_as_pip_reads_them() -> None:
    """Proxies (lower case first, pip's proxy over both), no_proxy forms, redaction, the
    credentials taken out of a URL."""
    proxies, no_proxy = environment_proxies(
        {"https_proxy": "http://lower:1", "HTTPS_PROXY": "http://upper:2",
         "HTTP_PROXY": "proxy.corp:3128", "NO_PROXY": "localhost, .internal ,10.0.0.1:8080"})
    assert proxies == {"https": "http://lower:1", "http": "http://proxy.corp:3128"}
    assert no_proxy == ("localhost", ".internal", "10.0.0.1:8080")
    assert environment_proxies({"HTTP_PROXY": "a:1"}, "http://pip:9")[0] == {
        "http": "http://pip:9", "https": "http://pip:9"}
    assert bypassed("pypi.internal", 443, no_proxy) and bypassed("a.b.internal", None, no_proxy)
    assert bypassed("10.0.0.1", 8080, no_proxy) and not bypassed("10.0.0.1", 443, no_proxy)
    assert not bypassed("internal.example", None, no_proxy) and bypassed("x", 1, ("*",))
    assert redact("see https://u:p%40ss@h/simple and https://tok@h/") == (
        "see https://u:****@h/simple and https://****@h/")
    assert split_credentials("https://u:p%40ss@h:8/simple/") == ("https://h:8/simple/",
                                                                 ("u", "p@ss"))


@pytest.fixture(scope="module")
def certificates(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """A certificate authority and a server certificate for 127.0.0.1 it signed, and a
    client certificate (key and certificate in one PEM), made by openssl."""
    import shutil
    import subprocess

    if shutil.which("openssl") is None:
        pytest.skip("needs openssl")
    root = tmp_path_factory.mktemp("tls")

    def run(*args: str) -> None:
        subprocess.run(["openssl", *args], cwd=root, check=True, capture_output=True)

    run("req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", "ca.key", "-out", "ca.pem",
        "-days", "2", "-subj", "/CN=abifit test CA")
    run("req", "-newkey", "rsa:2048", "-nodes", "-keyout", "server.key", "-out", "server.csr",
        "-subj", "/CN=127.0.0.1")
    (root / "san.ext").write_text("subjectAltName=IP:127.0.0.1\n")
    run("x509", "-req", "-in", "server.csr", "-CA", "ca.pem", "-CAkey", "ca.key",
        "-CAcreateserial", "-out", "server.pem", "-days", "2", "-extfile", "san.ext")
    run("req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", "client.key", "-out",
        "client.crt", "-days", "2", "-subj", "/CN=abifit client")
    (root / "client.pem").write_bytes((root / "client.key").read_bytes()
                                      + (root / "client.crt").read_bytes())
    return {name: root / f"{name}.pem" for name in ("ca", "server", "client")} | {
        "server_key": root / "server.key", "client_crt": root / "client.crt"}


def https_server(certificates: dict[str, Path], client_cert: bool = False) -> LoopbackServer:
    import ssl

    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.load_cert_chain(certificates["server"], certificates["server_key"])
    if client_cert:  # the server wants the client's certificate
        context.verify_mode = ssl.CERT_REQUIRED
        context.load_verify_locations(certificates["client_crt"])
    return LoopbackServer(tls=context)


def test_pips_cert_and_trusted_host(
        binaries: dict[str, bytes], certificates: dict[str, Path], clean_env: None,
        tmp_path: Path, capsys: pytest.CaptureFixture[str],
        monkeypatch: pytest.MonkeyPatch) -> None:
    """An HTTPS index whose certificate a private authority signed: refused without pip's
    cert setting (the certificate is checked), accepted with PIP_CERT naming the authority,
    and with the host in PIP_TRUSTED_HOST (not checked)."""
    with https_server(certificates) as server:
        index = publish_index(server, wheels(binaries))
        code, out, err = check(index.url, tmp_path / "none", capsys)
        assert code == 2 and "certificate" in out + err
        code, _out, err = check(index.url, tmp_path / "cert", capsys,
                                {"PIP_CERT": str(certificates["ca"])}, monkeypatch)
        assert code == 0, err
        monkeypatch.delenv("PIP_CERT")
        host = index.url.split("/")[2]
        code, _out, err = check(index.url, tmp_path / "trusted", capsys,
                                {"PIP_TRUSTED_HOST": host}, monkeypatch)
        assert code == 0, err


def test_pips_client_cert(
        binaries: dict[str, bytes], certificates: dict[str, Path], clean_env: None,
        tmp_path: Path, capsys: pytest.CaptureFixture[str],
        monkeypatch: pytest.MonkeyPatch) -> None:
    """An index that wants a client certificate: the handshake fails without pip's
    client-cert setting and succeeds with it."""
    env = {"PIP_CERT": str(certificates["ca"])}
    with https_server(certificates, client_cert=True) as server:
        index = publish_index(server, wheels(binaries))
        code, _out, _err = check(index.url, tmp_path / "none", capsys, env, monkeypatch)
        assert code == 2
        code, _out, err = check(index.url, tmp_path / "client", capsys,
                                {**env, "PIP_CLIENT_CERT": str(certificates["client"])},
                                monkeypatch)
        assert code == 0, err


def test_uvs_index_variables_when_pip_has_none() -> None:
    """A machine set up for uv only: UV_DEFAULT_INDEX and UV_INDEX (named or not) are the
    indexes; a pip index setting wins over them."""
    from abifit.remote.packageindex import pip_index_config

    config = pip_index_config({"UV_DEFAULT_INDEX": "https://a.example/simple",
                               "UV_INDEX": "corp=https://c.example/simple https://d.example/s"},
                              [])
    assert config.index_urls == ("https://a.example/simple", "https://c.example/simple",
                                 "https://d.example/s")
    assert pip_index_config({"PIP_INDEX_URL": "https://p.example/simple",
                             "UV_DEFAULT_INDEX": "https://a.example/simple"}, []).index_urls == (
        "https://p.example/simple",)


def test_no_index_and_find_links_as_pip_has_them(
        binaries: dict[str, bytes], clean_env: None, tmp_path: Path,
        capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    """`--no-index -f DIR`: the wheels of a directory, no index asked (an index URL that
    answers nothing is configured, and not used); `-i` is --index-url."""
    links = tmp_path / "wheels"
    links.mkdir()
    for entries in wheels(binaries).values():
        for name, data in entries:
            (links / name).write_bytes(data)
    monkeypatch.setenv("PIP_INDEX_URL", "http://127.0.0.1:9/simple")
    code = main(["check", "extpkg==1.0", "--python-version", "3.11", "--platform",
                 "linux_x86_64", "--no-index", "-f", str(links), "--cache-dir",
                 str(tmp_path / "cache"), "--json"])
    captured = capsys.readouterr()
    assert code == 0, captured.err
    assert json.loads(captured.out)["verdict"] == "fits"
    with LoopbackServer() as server:
        index = publish_index(server, wheels(binaries))
        code = main(["check", "extpkg==1.0", "--python-version", "3.11", "--platform",
                     "linux_x86_64", "-i", index.url, "--cache-dir", str(tmp_path / "c2")])
        assert code == 0 and server.requests > 0


def test_uvs_configuration_files_when_pip_has_none(tmp_path: Path,
                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    """uv's files, for a machine set up for uv only: the user's uv.toml, then the project's
    pyproject.toml [tool.uv] (found from a subdirectory), whose `[[tool.uv.index]]` with
    `default = true` is the primary index and the others extra ones; UV_* variables win over
    the files, and pip's settings over all of them."""
    from abifit.remote.packageindex import _pip_settings, pip_config_files, pip_index_config

    home = tmp_path / "home"
    env = {"HOME": str(home), "PIP_CONFIG_FILE": "/dev/null"}
    if {"index-url", "extra-index-url", "find-links", "no-index"} & _pip_settings(
            env, pip_config_files(env)).keys():
        pytest.skip("this machine's site-wide pip configuration names an index")
    (home / ".config" / "uv").mkdir(parents=True)
    (home / ".config" / "uv" / "uv.toml").write_text(
        'index-url = "https://user.example/simple"\n')
    project = tmp_path / "project"
    (project / "src").mkdir(parents=True)
    (project / "pyproject.toml").write_text(
        '[project]\nname = "app"\n[[tool.uv.index]]\nname = "corp"\n'
        'url = "https://corp.example/simple"\ndefault = true\n'
        '[[tool.uv.index]]\nurl = "https://extra.example/simple"\n')
    monkeypatch.chdir(project / "src")
    assert pip_index_config(env).index_urls == ("https://corp.example/simple",
                                                "https://extra.example/simple")
    (project / "pyproject.toml").write_text('[project]\nname = "app"\n')
    assert pip_index_config(env).index_urls == ("https://user.example/simple",)
    assert pip_index_config({**env, "UV_DEFAULT_INDEX": "https://env.example/simple"}
                            ).index_urls == ("https://env.example/simple",)
    assert pip_index_config({**env, "PIP_INDEX_URL": "https://pip.example/simple"}
                            ).index_urls == ("https://pip.example/simple",)


def test_the_keyring_is_asked_after_a_401_as_pip_asks_it(
        binaries: dict[str, bytes], clean_env: None, tmp_path: Path,
        capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    """The index URL names the user only; the host answers 401, and the `keyring` command
    (`keyring get HOST USER`, pip's subprocess provider) gives the password: the check goes on
    and fits. With pip's keyring-provider disabled, the 401 is the error."""
    import os

    tools = tmp_path / "bin"
    tools.mkdir()
    keyring = tools / "keyring"
    keyring.write_text("#!/bin/sh\n"
                       f'[ "$1 $2 $3" = "get 127.0.0.1 {USER}" ] && echo "{PASSWORD}" && exit 0\n'
                       "exit 1\n")
    keyring.chmod(0o755)
    monkeypatch.setenv("PATH", f"{tools}:{os.environ['PATH']}")
    with LoopbackServer(auth=(USER, PASSWORD)) as server:
        index = publish_index(server, wheels(binaries))
        user_only = index.url.replace("http://", f"http://{USER}@")
        code, _out, err = check(user_only, tmp_path / "one", capsys)
        assert code == 0, err
        code, out, err = check(user_only, tmp_path / "two", capsys,
                               {"PIP_KEYRING_PROVIDER": "disabled"}, monkeypatch)
        assert code == 2 and "HTTP 401" in out + err
    assert PASSWORD not in out + err


def test_pips_timeout_setting_is_followed(
        binaries: dict[str, bytes], clean_env: None, tmp_path: Path,
        capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    """A wheel answered after 2 s: with PIP_TIMEOUT=0.5 and no retries the read times out
    (exit 2, saying so); with pip's defaults it is waited for."""
    with LoopbackServer(slow_s=2.0) as server:
        index = publish_index(server, wheels(binaries))
        wheel = next(f"/files/{name}" for name in index.files if name.startswith("extpkg"))
        server.inject("slow", path=wheel)
        code, out, err = check(index.url, tmp_path / "one", capsys,
                               {"PIP_TIMEOUT": "0.5", "PIP_RETRIES": "0"}, monkeypatch)
        assert code == 2 and "0.5 s" in out + err, out + err
        monkeypatch.delenv("PIP_TIMEOUT")
        monkeypatch.delenv("PIP_RETRIES")
        server.inject("slow", path=wheel)
        code, _out, err = check(index.url, tmp_path / "two", capsys)
        assert code == 0, err
