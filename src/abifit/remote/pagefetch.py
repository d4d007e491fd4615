"""The fetch function of a `PackageIndex` (`cached_fetch`): index pages from the cache while
they are fresh, asked for again with their ETag or Last-Modified once they are not, and only
from the cache offline."""

from __future__ import annotations

import time
from collections.abc import Mapping

from abifit.errors import UsageError
from abifit.remote.diskcache import Cache
from abifit.remote.http import HttpClient
from abifit.remote.packageindex import Fetch

# Index pages are fresh for this long; offline, any age will do.
PAGE_MAX_AGE = 600.0


def cached_fetch(client: HttpClient | None, cache: Cache | None) -> Fetch:
    """The index's fetch function: cached pages when fresh, the network otherwise, and only the
    cache when offline (client None). A cached page that is no longer fresh is asked for with
    its ETag or Last-Modified: when the server answers 304 (unchanged), no page is sent again."""

    def fetch(url: str, headers: Mapping[str, str]) -> tuple[int, Mapping[str, str], bytes, str]:
        entry = cache.page_entry(url) if cache is not None else None
        usable = entry is not None and cache is not None and not cache.refresh
        if entry is not None and (client is None  # offline: any age, refresh or not
                                  or (usable and time.time() - entry[0] <= PAGE_MAX_AGE)):
            return 200, {"content-type": entry[1]}, entry[2], url
        if client is None:
            raise UsageError(f"offline: {url} is not in the cache (run once without --offline)")
        stale = entry[1:] if entry is not None and usable else None
        conditional = {} if stale is None else {
            k: v for k, v in (("If-None-Match", stale[2]), ("If-Modified-Since", stale[3])) if v}
        response = client.get(url, {**headers, **conditional}, allow=(304,) if conditional
                              else ())
        if cache is not None and stale is not None and response.status == 304:
            cache.put_page(url, *stale)  # unchanged: fresh again
            return 200, {"content-type": stale[0]}, stale[1], url
        if cache is not None and response.status == 200:
            cache.put_page(url, response.headers.get("content-type", ""), response.body,
                           response.headers.get("ETag", ""),
                           response.headers.get("Last-Modified", ""))
        return response.status, response.headers, response.body, response.url

    return fetch
