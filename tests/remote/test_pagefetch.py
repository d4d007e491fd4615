"""`cached_fetch`: index pages come from the cache while fresh and are asked for again with
their validators once they are not."""

from __future__ import annotations

from pathlib import Path

import pytest

from abifit.remote.http import HttpClient
from httpserver import LoopbackServer


def test_a_stale_index_page_is_revalidated_not_fetched_again(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A cached page past its freshness is asked for with its ETag (or Last-Modified); a 304
    costs no body and makes it fresh again; a changed page (200) replaces it."""
    import abifit.remote.pagefetch as pagefetch
    from abifit.remote.diskcache import Cache
    from httpserver import Reply, Request

    pages = {"v1": b"<a href='a-1.0-py3-none-any.whl'>a</a>" * 100}
    seen: list[dict[str, str]] = []

    def reply(request: Request) -> Reply:
        seen.append(dict(request.headers))
        etag = f'"{next(iter(pages))}"'
        if request.headers.get("If-None-Match") == etag:
            return Reply(304, b"", {"ETag": etag})
        return Reply(200, pages[next(iter(pages))], {"ETag": etag, "Content-Type": "text/html"})

    monkeypatch.setattr(pagefetch, "PAGE_MAX_AGE", 0.0)  # every cached page is stale
    with LoopbackServer() as server, HttpClient() as client:
        server.add_handler("/simple/a/", reply)
        fetch = pagefetch.cached_fetch(client, Cache(tmp_path))
        url = server.url("/simple/a/")
        first = fetch(url, {})
        before = client.transfer.bytes_fetched
        second = fetch(url, {})
        assert second[0] == 200 and second[2] == first[2] == pages["v1"]
        assert client.transfer.bytes_fetched == before  # a 304: no body
        assert [h.get("If-None-Match") for h in seen] == [None, '"v1"']
        pages.clear()
        pages["v2"] = b"<a href='a-2.0-py3-none-any.whl'>a</a>"
        third = fetch(url, {})
        assert third[2] == pages["v2"] and seen[-1].get("If-None-Match") == '"v1"'
        assert fetch(url, {})[2] == pages["v2"] and seen[-1].get("If-None-Match") == '"v2"'
