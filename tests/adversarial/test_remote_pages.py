"""A remote index page that names files of this machine: a PEP 503 or PEP 691 page served over
HTTP listing `file://` URLs (a wheel the user never named, /etc/passwd, /dev/zero). Such links
are left out: the check says no wheel fits (exit 2) at once, never reads the local files, never
hangs on /dev/zero."""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest

from abifit.cli import main
from helpers import make_wheel
from httpserver import LoopbackServer, Reply, Request


@pytest.mark.parametrize("kind", ["html", "json"])
def test_a_remote_page_may_not_name_local_files(
        kind: str, tmp_path: Path, capsys: pytest.CaptureFixture[str],
        monkeypatch: pytest.MonkeyPatch) -> None:
    name, data = make_wheel("sneaky", "1.0", {"sneaky/__init__.py": b""})
    local = tmp_path / name
    local.write_bytes(data)
    urls = [local.as_uri(), "file:///etc/passwd", "file:///dev/zero"]
    if kind == "html":
        body = "".join(f'<a href="{u}">{Path(u).name or "x"}</a>' for u in urls).encode()
        media = "text/html"
    else:
        body = json.dumps({"meta": {"api-version": "1.0"}, "name": "sneaky", "files": [
            {"filename": name, "url": u, "hashes": {}} for u in urls]}).encode()
        media = "application/vnd.pypi.simple.v1+json"
    monkeypatch.setenv("PIP_CONFIG_FILE", "/dev/null")
    for var in ("PIP_INDEX_URL", "PIP_EXTRA_INDEX_URL", "PIP_FIND_LINKS"):
        monkeypatch.delenv(var, raising=False)
    with LoopbackServer() as server:
        def page(_request: Request) -> Reply:
            return Reply(200, body, {"Content-Type": media})

        server.add_handler("/simple/sneaky/", page)
        started = time.monotonic()
        code = main(["check", "sneaky==1.0", "--python-version", "3.11", "--platform",
                     "linux_x86_64", "--index-url", server.url("/simple"), "--cache-dir",
                     str(tmp_path / "cache")])
    err = capsys.readouterr().err
    assert code == 2 and time.monotonic() - started < 30
    assert "sneaky" in err and "root:" not in err
