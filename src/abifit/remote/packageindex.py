"""Package indexes: PEP 691 JSON and PEP 503 HTML pages, PEP 658/714 metadata, pip's index settings.

A pure core parses pages into `IndexFile` values and chooses wheels for a `Target`; a thin I/O
layer (`PackageIndex`) fetches pages through a `Fetch` callable, reads `file://` indexes (a
directory per project, holding an `index.json` (PEP 691), an `index.html` (PEP 503) or the files
themselves) and `--find-links` directories from disk, and merges what the configured sources
offer. Files on disk keep file:// URLs; `remote.wheels` reads them in place.

Choices worth knowing:

- A manylinux platform implies the older ones: `manylinux_2_28_x86_64` also accepts
  `manylinux_2_27` .. `manylinux_2_5`, `manylinux2014`, `manylinux2010` and `manylinux1` (the
  oldest is `_2_17` for architectures other than x86_64/i686), plus `linux_x86_64`, ranked first as
  packaging >= 26.3 ranks it. That is what an installer running on a glibc 2.28 machine accepts
  (`packaging.tags.sys_tags()`); pip's `--platform` flag, by contrast, takes only the tags given.
  `musllinux_1_2` implies `musllinux_1_1` and `_1_0`; macOS versions expand as `mac_platforms()`.
- Local version labels follow PEP 440 as `packaging` implements it: `==2.9.1` matches
  `2.9.1+cu130` (a specifier without a local label ignores the candidate's label),
  `==2.9.1+cu130` matches only that label, `>2.9.1` does not match `2.9.1+cu130`, and
  `<=2.9.1` does.
- Yanked files (PEP 592) are used only when a `==` (without `.*`) or `===` specifier pins their
  version; even then a non-yanked file of the same version ranks first.
- Pre-releases are used when asked for, or when a specifier names one (`>=2.10.0rc1`).
"""

from __future__ import annotations

import configparser
import difflib
import functools
import hashlib
import json
import os
import re
import sys
import threading
from bisect import bisect_left
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import KW_ONLY, dataclass, field
from html.parser import HTMLParser
from pathlib import Path
from typing import TYPE_CHECKING, TypeVar
from urllib.parse import unquote, urldefrag, urljoin, urlsplit

from packaging import tags as _tags
from packaging.requirements import Requirement
from packaging.specifiers import InvalidSpecifier, SpecifierSet
from packaging.utils import (
    BuildTag,
    InvalidSdistFilename,
    InvalidWheelFilename,
    NormalizedName,
    canonicalize_name,
    parse_sdist_filename,
    parse_wheel_filename,
)
from packaging.version import InvalidVersion, Version

from abifit.errors import AbifitError, FormatError, UsageError
from abifit.remote.network import NETWORK_KEYS

if TYPE_CHECKING:
    from abifit.remote.network import Network

DEFAULT_INDEX_URL = "https://pypi.org/simple"
ACCEPT = "application/vnd.pypi.simple.v1+json, text/html;q=0.1"
DIST_EXTENSIONS = (".whl", ".tar.gz", ".zip", ".tar.bz2", ".tar.xz", ".tgz", ".tar")

#: fetch(url, request headers) -> (status, response headers, body, final URL after redirects)
Fetch = Callable[[str, Mapping[str, str]], tuple[int, Mapping[str, str], bytes, str]]
WheelName = tuple[NormalizedName, Version, BuildTag, frozenset[_tags.Tag]]
_T = TypeVar("_T")


# --- errors ---------------------------------------------------------------------------------------


class _Hinted(AbifitError):
    """An error of one line, with an optional `hint:` line under it."""

    def __init__(self, line: str, hint: str | None = None) -> None:
        self.line = line
        self.hint = hint
        super().__init__(line if hint is None else f"{line}\nhint: {hint}")


class PackageNotFound(_Hinted):
    """No configured index or find-links location has the project."""

    def __init__(self, name: str, sources: Sequence[str], suggestions: Sequence[str] = ()) -> None:
        self.name = name
        self.sources = tuple(sources)
        self.suggestions = tuple(suggestions)
        hint = f"did you mean {' or '.join(map(repr, suggestions))}?" if suggestions else None
        super().__init__(f"no project {name!r} on {', '.join(sources) or 'no index'}", hint)


class NoMatchingWheel(_Hinted):
    """The project exists, but none of its wheels fits the requirement and the target."""

    def __init__(self, line: str, hint: str | None, nearest: Sequence[Version],
                 platforms: Sequence[str]) -> None:
        self.nearest = tuple(nearest)
        self.platforms = tuple(platforms)
        super().__init__(line, hint)


class IndexUnavailable(AbifitError):
    """An index page could not be fetched: a connection failure or an unexpected HTTP status
    (`status`, None for a failure of the network or the disk)."""

    def __init__(self, url: str, problem: str, status: int | None = None) -> None:
        self.url = url
        self.problem = problem
        self.status = status
        super().__init__(f"{url}: {problem}")


# --- files on an index ----------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class IndexFile:
    """One distribution file an index offers.

    `yanked` is None or False when the file is not yanked, True when it is yanked without a
    reason, and the reason (possibly empty) otherwise. `metadata` is False when no PEP 658
    `.metadata` file is offered, True when one is offered without hashes, and its hashes otherwise.
    """

    filename: str
    url: str
    hashes: Mapping[str, str] = field(default_factory=dict)
    requires_python: str | None = None
    yanked: str | bool | None = None
    metadata: bool | Mapping[str, str] = False
    size: int | None = None
    upload_time: str | None = None

    def __hash__(self) -> int:
        return hash((self.filename, self.url))

    @property
    def sha256(self) -> str | None:
        return self.hashes.get("sha256")

    @property
    def is_wheel(self) -> bool:
        return self.filename.endswith(".whl")

    @property
    def is_yanked(self) -> bool:
        return self.yanked is not None and self.yanked is not False

    @property
    def has_metadata(self) -> bool:
        return self.metadata is not False

    def wheel(self) -> WheelName | None:
        """(name, version, build tag, tags) from the file name; None for sdists and bad names."""
        return wheel_name(self.filename) if self.is_wheel else None

    def project(self) -> NormalizedName | None:
        """The canonical project name the file name carries, when it can be read."""
        wheel = self.wheel()
        if wheel is not None:
            return wheel[0]
        try:
            return parse_sdist_filename(self.filename)[0]
        except (InvalidSdistFilename, InvalidVersion):
            return None


# --- PEP 691 JSON ---------------------------------------------------------------------------------


def _str_map(value: object) -> dict[str, str]:
    if not isinstance(value, dict):
        return {}
    return {str(k): str(v) for k, v in value.items()}


def _metadata_of(value: object) -> bool | Mapping[str, str]:
    """A PEP 691/714 core-metadata value: a bool or a (possibly empty) hash mapping."""
    if isinstance(value, dict):
        return _str_map(value) or True
    return value is True


def _json_file(entry: object, page_url: str) -> IndexFile:
    if not isinstance(entry, dict):
        raise FormatError(page_url, f"a files[] entry is not an object: {entry!r}")
    filename, url = entry.get("filename"), entry.get("url")
    if not isinstance(filename, str) or not isinstance(url, str):
        raise FormatError(page_url, f"a files[] entry lacks filename or url: {entry!r}")
    metadata = next((entry[k] for k in ("core-metadata", "dist-info-metadata",
                                         "data-dist-info-metadata") if k in entry), False)
    requires_python, yanked = entry.get("requires-python"), entry.get("yanked")
    size, uploaded = entry.get("size"), entry.get("upload-time")
    if not isinstance(requires_python, str):
        requires_python = None
    return IndexFile(
        filename=filename,
        url=_absolute(page_url, url),
        hashes=_str_map(entry.get("hashes")),
        requires_python=requires_python or None,
        yanked=yanked if isinstance(yanked, (bool, str)) else None,
        metadata=_metadata_of(metadata),
        size=size if isinstance(size, int) and not isinstance(size, bool) and size >= 0 else None,
        upload_time=uploaded if isinstance(uploaded, str) else None,
    )


def _absolute(base: str, url: str) -> str:
    """`urljoin(base, url)`, without its cost for the absolute URLs most pages give."""
    if url.startswith(("https://", "http://")) and "/." not in url:
        return url
    return urljoin(base, url)


def _json_document(body: bytes, page_url: str) -> dict[str, object]:
    try:
        document = json.loads(body)
    except (UnicodeDecodeError, json.JSONDecodeError) as e:
        raise FormatError(page_url, f"not a PEP 691 JSON page: {e}") from e
    except RecursionError as e:  # arrays or objects nested past what the parser can follow
        raise FormatError(page_url, "not a PEP 691 JSON page: nested too deep") from e
    if not isinstance(document, dict):
        raise FormatError(page_url, "not a PEP 691 JSON page: the document is not an object")
    meta = document.get("meta")
    version = meta.get("api-version") if isinstance(meta, dict) else None
    if not isinstance(version, str) or version.split(".")[0] != "1":
        raise FormatError(page_url, f"unsupported simple API version {version!r} (expected 1.x)")
    return document


def parse_simple_json(body: bytes, page_url: str) -> list[IndexFile]:
    """The files of a PEP 691 v1 JSON project page, with URLs resolved against `page_url`."""
    files = _json_document(body, page_url).get("files")
    if not isinstance(files, list):
        raise FormatError(page_url, "not a PEP 691 project page: no files list")
    return [_json_file(entry, page_url) for entry in files]


# --- PEP 503 HTML ---------------------------------------------------------------------------------


class _LinkParser(HTMLParser):
    """Collects `<a>` attributes with their text, and the first `<base href>`."""

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.base: str | None = None
        self.anchors: list[tuple[dict[str, str | None], str]] = []
        self._open: dict[str, str | None] | None = None
        self._text: list[str] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        if tag == "base" and self.base is None:
            self.base = dict(attrs).get("href")
        elif tag == "a":
            self._finish()
            self._open, self._text = dict(attrs), []

    def handle_endtag(self, tag: str) -> None:
        if tag == "a":
            self._finish()

    def handle_data(self, data: str) -> None:
        if self._open is not None:
            self._text.append(data)

    def close(self) -> None:
        super().close()
        self._finish()

    def _finish(self) -> None:
        if self._open is not None:
            self.anchors.append((self._open, "".join(self._text).strip()))
            self._open = None


def _links(body: bytes, page_url: str) -> tuple[str, list[tuple[dict[str, str | None], str]]]:
    """(base URL, anchors) of an HTML page."""
    parser = _LinkParser()
    parser.feed(body.decode("utf-8", errors="replace"))
    parser.close()
    return urljoin(page_url, parser.base or ""), parser.anchors


def _fragment_hashes(fragment: str) -> dict[str, str]:
    pairs = (part.partition("=") for part in fragment.split("&"))
    known = hashlib.algorithms_available
    return {k.lower(): v for k, sep, v in pairs if sep and k.lower() in known}


def _html_metadata(attrs: Mapping[str, str | None]) -> bool | Mapping[str, str]:
    for key in ("data-core-metadata", "data-dist-info-metadata"):
        if key in attrs:
            value = attrs[key]
            if value is None or value.strip().lower() in ("", "true"):
                return True
            if value.strip().lower() == "false":
                return False
            return _fragment_hashes(value.strip()) or True
    return False


def _html_yanked(attrs: Mapping[str, str | None]) -> str | bool | None:
    if "data-yanked" not in attrs:
        return None
    return attrs["data-yanked"] or True


def _html_file(attrs: Mapping[str, str | None], text: str, base: str) -> IndexFile | None:
    href = attrs.get("href")
    if not href:
        return None
    url, fragment = urldefrag(urljoin(base, href))
    filename = unquote(urlsplit(url).path.rsplit("/", 1)[-1]) or text
    return IndexFile(
        filename=filename,
        url=url,
        hashes=_fragment_hashes(fragment),
        requires_python=attrs.get("data-requires-python") or None,
        yanked=_html_yanked(attrs),
        metadata=_html_metadata(attrs),
    )


def parse_simple_html(body: bytes, page_url: str) -> list[IndexFile]:
    """The files of a PEP 503 HTML project page; `<base href>` and entities are honoured."""
    base, anchors = _links(body, page_url)
    found = (_html_file(attrs, text, base) for attrs, text in anchors)
    return [f for f in found if f is not None]


def parse_simple_page(body: bytes, page_url: str, content_type: str) -> list[IndexFile]:
    """The files of a project page, parsed as its Content-Type says (sniffed when unknown).
    A page served over HTTP(S) may name HTTP(S) files only: a `file://` (or any other) URL on
    it would make abifit open a file of this machine the user never named, so it is left out."""
    return _served(_parse_simple_page(body, page_url, content_type), page_url)


def _served(files: list[IndexFile], page_url: str) -> list[IndexFile]:
    web = ("http", "https")
    if urlsplit(page_url).scheme.lower() not in web:
        return files
    return [f for f in files if urlsplit(f.url).scheme.lower() in web]


def _parse_simple_page(body: bytes, page_url: str, content_type: str) -> list[IndexFile]:
    media = content_type.split(";")[0].strip().lower()
    if media.endswith("+json") or media == "application/json":
        return parse_simple_json(body, page_url)
    if media in ("text/html", "application/vnd.pypi.simple.v1+html"):
        return parse_simple_html(body, page_url)
    if body.lstrip().startswith(b"{"):
        return parse_simple_json(body, page_url)
    return parse_simple_html(body, page_url)


def parse_project_names(body: bytes, page_url: str, content_type: str) -> list[str]:
    """The project names an index's root page lists (PEP 691 `projects`, or PEP 503 anchors)."""
    media = content_type.split(";")[0].strip().lower()
    if media.endswith("+json") or body.lstrip().startswith(b"{"):
        projects = _json_document(body, page_url).get("projects")
        entries = projects if isinstance(projects, list) else []
        names = (e.get("name") for e in entries if isinstance(e, dict))
        return [n for n in names if isinstance(n, str)]
    return [text for _attrs, text in _links(body, page_url)[1] if text]


# --- local files: find-links directories and file:// indexes --------------------------------------


def find_links_files(directory: Path) -> list[IndexFile]:
    """The distribution files in a `--find-links` directory (not recursive), as file:// URLs.

    Files are not hashed (a torch wheel is ~900 MB); a `<file>.metadata` next to a file marks
    its PEP 658 metadata as present.
    """
    names = sorted(p.name for p in directory.iterdir())
    present = set(names)
    return [
        IndexFile(filename=name, url=(directory / name).resolve().as_uri(),
                  metadata=f"{name}.metadata" in present,
                  size=(directory / name).stat().st_size)
        for name in names
        if name.endswith(DIST_EXTENSIONS) and (directory / name).is_file()
    ]


def file_url_path(url: str) -> Path:
    """The local path of a file:// URL, percent-escapes decoded (`%2B` is `+`): what
    `urllib.request.url2pathname` does on POSIX, without importing urllib.request (and with it
    http.client and ssl) for every wheel."""
    return Path(unquote(urlsplit(url).path))


def local_file(url: str) -> Path | None:
    """The path a file:// URL names; None for any other URL."""
    return file_url_path(url) if urlsplit(url).scheme == "file" else None


def path_file(path: str) -> IndexFile:
    """A wheel named by its path, as an index lists it: a file:// URL (read in place) and its
    size."""
    return IndexFile(os.path.basename(path), Path(path).resolve().as_uri(),
                     size=os.path.getsize(path))


def _local_path(location: str) -> Path | None:
    """The path a find-links entry or index URL names on disk; None for remote URLs."""
    if location.startswith("file:"):
        return file_url_path(location)
    if "://" in location:
        return None
    return Path(location).expanduser()


# the page files of a directory in a file:// index, PEP 691 first (as ACCEPT asks of a server)
_PAGE_FILES = (("index.json", "application/vnd.pypi.simple.v1+json"), ("index.html", "text/html"))


def _page_file(directory: Path) -> tuple[bytes, str] | None:
    """(body, media type) of a directory's index.json or index.html, when it has one."""
    for name, media in _PAGE_FILES:
        page = directory / name
        if page.is_file():
            return page.read_bytes(), media
    return None


def _local_page(path: Path) -> list[IndexFile] | None:
    """A file:// project page: a directory (its index.json or index.html, else its listing) or
    a page file; None when there is nothing at `path`."""
    if path.is_dir():
        page = _page_file(path)
        if page is not None:
            return parse_simple_page(page[0], path.as_uri() + "/", page[1])
        return find_links_files(path)
    if path.is_file():
        return parse_simple_page(path.read_bytes(), path.as_uri(), "")
    return None


def _local_names(path: Path) -> list[str]:
    """Project names a file:// index root or a find-links directory holds."""
    if not path.is_dir():
        return []
    page = _page_file(path)
    if page is not None:
        return parse_project_names(page[0], path.as_uri() + "/", page[1])
    if any(p.is_dir() for p in path.iterdir()):
        return sorted(p.name for p in path.iterdir() if p.is_dir())
    return sorted({str(n) for f in find_links_files(path) if (n := f.project()) is not None})


# --- pip configuration ----------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class IndexConfig:
    """Where to look for distributions, in pip's terms."""

    index_url: str = DEFAULT_INDEX_URL
    extra_index_urls: tuple[str, ...] = ()
    find_links: tuple[str, ...] = ()
    no_index: bool = False

    @property
    def index_urls(self) -> tuple[str, ...]:
        """The indexes to ask, primary first; none with `no-index`."""
        return () if self.no_index else (self.index_url, *self.extra_index_urls)

    @property
    def sources(self) -> tuple[str, ...]:
        """Every index and find-links location, for messages."""
        return (*self.index_urls, *self.find_links)


def pip_config_files(env: Mapping[str, str], prefix: Path | None = None) -> list[Path]:
    """pip's configuration files on Linux, lowest precedence first (as pip loads them).

    Site-wide `$XDG_CONFIG_DIRS/pip/pip.conf` (default /etc/xdg) and /etc/pip.conf; the user's
    ~/.pip/pip.conf and `$XDG_CONFIG_HOME/pip/pip.conf` (skipped when $PIP_CONFIG_FILE names an
    existing file); the environment's `<prefix>/pip.conf` (default $VIRTUAL_ENV); $PIP_CONFIG_FILE.
    `PIP_CONFIG_FILE=/dev/null` turns every configuration file off, as it does for pip.
    """
    if env.get("PIP_CONFIG_FILE") == os.devnull:
        return []
    home = Path(env.get("HOME") or Path.home())
    xdg_dirs = (env.get("XDG_CONFIG_DIRS") or "/etc/xdg").split(os.pathsep)
    files = [Path(d) / "pip" / "pip.conf" for d in xdg_dirs if d] + [Path("/etc/pip.conf")]
    env_file = env.get("PIP_CONFIG_FILE")
    if not (env_file and Path(env_file).exists()):
        user_dir = Path(env.get("XDG_CONFIG_HOME") or home / ".config")
        files += [home / ".pip" / "pip.conf", user_dir / "pip" / "pip.conf"]
    if prefix is None and env.get("VIRTUAL_ENV"):
        prefix = Path(env["VIRTUAL_ENV"])
    if prefix is not None:
        files.append(prefix / "pip.conf")
    if env_file:
        files.append(Path(env_file))
    return files


def _normalize_key(name: str) -> str:
    return name.lower().replace("_", "-").removeprefix("--")


def _read_config(path: Path) -> dict[str, str]:
    """`section.key` -> value for one pip configuration file; a missing file is empty."""
    parser = configparser.RawConfigParser()
    try:
        parser.read(path, encoding="utf-8")
    except (configparser.Error, UnicodeDecodeError) as e:
        raise FormatError(str(path), f"not a valid pip configuration file: {e}") from e
    return {f"{section}.{_normalize_key(key)}": value
            for section in parser.sections() for key, value in parser.items(section)}


_INDEX_KEYS = ("index-url", "extra-index-url", "find-links", "no-index")
_KEYS = (*_INDEX_KEYS, *NETWORK_KEYS)
_TRUE = ("1", "true", "yes", "on", "y", "t")


def _pip_settings(env: Mapping[str, str], files: Iterable[Path]) -> dict[str, str]:
    """pip's precedence: every [global] < every [install] (later files win) < PIP_* variables."""
    merged: dict[str, str] = {}
    for path in files:
        merged.update(_read_config(path))
    settings: dict[str, str] = {}
    for section in ("global", "install"):
        settings.update({k: merged[f"{section}.{k}"] for k in _KEYS if f"{section}.{k}" in merged})
    for key in _KEYS:
        variable = "PIP_" + key.upper().replace("-", "_")
        if variable in env:
            settings[key] = env[variable]
    return settings


def pip_index_config(
    env: Mapping[str, str],
    config_files: Sequence[Path] | None = None,
    *,
    index_url: str | None = None,
    extra_index_urls: Sequence[str] = (),
    find_links: Sequence[str] = (),
    no_index: bool | None = None,
) -> IndexConfig:
    """The index settings pip would use: config files < PIP_* environment variables < arguments.

    As in pip, an `index_url` argument replaces the configured one, while `extra_index_urls` and
    `find_links` arguments are added after the configured ones (pip's command-line options append
    to the values from configuration). Multi-valued keys are whitespace separated.
    """
    files = pip_config_files(env) if config_files is None else config_files
    settings = _pip_settings(env, files)
    if not any(settings.get(k) for k in _INDEX_KEYS):
        if config_files is None:  # the machine's files, not only those given
            settings.update(_uv_files(env, Path.cwd()))
        settings.update(_uv_settings(env))
    configured_no_index = settings.get("no-index", "").strip().lower() in _TRUE
    return IndexConfig(
        index_url=(index_url or settings.get("index-url", "").strip() or DEFAULT_INDEX_URL),
        extra_index_urls=(*settings.get("extra-index-url", "").split(), *extra_index_urls),
        find_links=(*settings.get("find-links", "").split(), *find_links),
        no_index=configured_no_index if no_index is None else no_index,
    )


def _uv_files(env: Mapping[str, str], cwd: Path) -> dict[str, str]:
    """uv's index settings from its configuration files, in pip's terms: the system's
    (/etc/uv/uv.toml), the user's ($XDG_CONFIG_HOME/uv/uv.toml, else ~/.config/uv/uv.toml) and
    the project's (the nearest uv.toml, else the nearest pyproject.toml's [tool.uv], from
    `cwd` up), later ones winning: `index-url`, `extra-index-url`, `find-links`, `no-index`
    and `[[index]]` tables (the one with `default = true` is the primary index; the others
    are extra ones). A file that cannot be read is left out."""
    config_home = env.get("XDG_CONFIG_HOME") or (str(Path(env["HOME"]) / ".config")
                                                 if env.get("HOME") else None)
    files: list[tuple[Path, bool]] = [(Path("/etc/uv/uv.toml"), False)]
    if config_home:
        files.append((Path(config_home) / "uv" / "uv.toml", False))
    for directory in (cwd, *cwd.parents):
        if (directory / "uv.toml").is_file():
            files.append((directory / "uv.toml", False))
            break
        if (directory / "pyproject.toml").is_file():
            files.append((directory / "pyproject.toml", True))
            break
    out: dict[str, str] = {}
    for path, in_pyproject in files:
        out.update(_uv_file(path, in_pyproject))
    return out


def _uv_file(path: Path, in_pyproject: bool) -> dict[str, str]:
    if sys.version_info >= (3, 11):
        import tomllib
    else:  # pragma: no cover - Python 3.10
        import tomli as tomllib  # type: ignore[import-not-found, unused-ignore]
    try:
        data = tomllib.loads(path.read_text("utf-8"))
    except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError):
        return {}
    if in_pyproject:
        tool = data.get("tool")
        data = tool.get("uv", {}) if isinstance(tool, dict) else {}
    if not isinstance(data, dict):
        return {}
    out: dict[str, str] = {}
    if isinstance(data.get("index-url"), str):
        out["index-url"] = data["index-url"]
    extra = [u for u in data.get("extra-index-url", []) if isinstance(u, str)] \
        if isinstance(data.get("extra-index-url"), list) else []
    for table in data.get("index", []) if isinstance(data.get("index"), list) else []:
        if isinstance(table, dict) and isinstance(table.get("url"), str):
            if table.get("default") is True:
                out["index-url"] = table["url"]
            else:
                extra.append(table["url"])
    if extra:
        out["extra-index-url"] = " ".join(extra)
    links = data.get("find-links")
    if isinstance(links, list) and links:
        out["find-links"] = " ".join(str(x) for x in links)
    if data.get("no-index") is True:
        out["no-index"] = "1"
    return out


def _uv_settings(env: Mapping[str, str]) -> dict[str, str]:
    """uv's index variables in pip's terms, for a machine set up for uv only (no pip index
    setting; they win over uv's files): UV_DEFAULT_INDEX (or the older UV_INDEX_URL),
    UV_INDEX and UV_EXTRA_INDEX_URL (an entry of UV_INDEX may be named: `name=url`),
    UV_FIND_LINKS, UV_NO_INDEX."""
    out: dict[str, str] = {}
    primary = env.get("UV_DEFAULT_INDEX") or env.get("UV_INDEX_URL")
    if primary:
        out["index-url"] = primary.strip()
    extra = [e.split("=", 1)[1] if re.match(r"^[\w.-]+=", e) else e
             for e in (*env.get("UV_INDEX", "").split(),
                       *env.get("UV_EXTRA_INDEX_URL", "").split())]
    if extra:
        out["extra-index-url"] = " ".join(extra)
    links = env.get("UV_FIND_LINKS", "").replace(",", " ").split()
    if links:
        out["find-links"] = " ".join(links)
    if env.get("UV_NO_INDEX", "").strip().lower() in _TRUE:
        out["no-index"] = "1"
    return out


def pip_network_config(env: Mapping[str, str],
                       config_files: Sequence[Path] | None = None) -> Network:
    """The network settings pip would use (`remote.network`): its configuration files and
    PIP_* variables, the environment's proxies, and the netrc file (`NETRC`, else
    ~/.netrc, when it exists)."""
    from abifit.remote.network import pip_network

    files = pip_config_files(env) if config_files is None else config_files
    netrc = env.get("NETRC") or (str(Path(env["HOME"]) / ".netrc") if env.get("HOME") else None)
    return pip_network(_pip_settings(env, files), env,
                       netrc if netrc and Path(netrc).is_file() else None)


# --- targets and wheel selection ------------------------------------------------------------------

_LEGACY_MANYLINUX = {17: "manylinux2014", 12: "manylinux2010", 5: "manylinux1"}
_LEGACY_GLIBC_MINOR = {"manylinux2014": 17, "manylinux2010": 12, "manylinux1": 5}


def _manylinux_chain(major: int, minor: int, arch: str) -> Iterator[str]:
    oldest = 5 if major == 2 and arch in ("x86_64", "i686") else 17 if major == 2 else 0
    for m in range(minor, oldest - 1, -1):
        yield f"manylinux_{major}_{m}_{arch}"
        if major == 2 and (legacy := _LEGACY_MANYLINUX.get(m)):
            yield f"{legacy}_{arch}"


def _parse_platform(platform: str) -> tuple[str, int, int, str] | None:
    """("manylinux" | "musllinux" | "macosx", major, minor, arch) for versioned platforms."""
    head, _, rest = platform.partition("_")
    if head in _LEGACY_GLIBC_MINOR:
        return "manylinux", 2, _LEGACY_GLIBC_MINOR[head], rest
    parts = rest.split("_", 2)
    versioned = len(parts) == 3 and parts[0].isdigit() and parts[1].isdigit()
    if head in ("manylinux", "musllinux", "macosx") and versioned:
        return head, int(parts[0]), int(parts[1]), parts[2]
    return None


def manylinux_glibc(platform: str) -> tuple[int, int] | None:
    """The glibc release a manylinux platform tag stands for (manylinux2014: (2, 17))."""
    parsed = _parse_platform(platform)
    return (parsed[1], parsed[2]) if parsed is not None and parsed[0] == "manylinux" else None


def compatible_platforms(platform: str) -> list[str]:
    """The platform tags a machine described by `platform` accepts, best first."""
    parsed = _parse_platform(platform)
    if parsed is None:
        return [platform]
    kind, major, minor, arch = parsed
    if kind == "macosx":
        return list(_tags.mac_platforms((major, minor), arch))
    if kind == "musllinux":
        return [f"linux_{arch}"] + [f"musllinux_{major}_{m}_{arch}" for m in range(minor, -1, -1)]
    return [f"linux_{arch}", *_manylinux_chain(major, minor, arch)]


def parse_python_version(text: str) -> tuple[int, int]:
    """"3.12" -> (3, 12); UsageError for anything else."""
    major, _, minor = text.partition(".")
    if not (major.isdigit() and minor.isdigit()):
        raise UsageError(f"not a Python version: {text!r} (expected MAJOR.MINOR, e.g. 3.12)")
    return int(major), int(minor)


@dataclass(frozen=True, slots=True)
class Target:
    """The interpreter and platform a wheel must fit.

    `platforms` name the machine (each expanded with `compatible_platforms`); `abis` default to
    the plain CPython ABI of `python_version` (`cp311`).
    """

    python_version: tuple[int, int]
    _: KW_ONLY
    platforms: tuple[str, ...]
    implementation: str = "cp"
    abis: tuple[str, ...] | None = None

    @classmethod
    def current(cls) -> Target:
        """The running interpreter, with the tags `packaging.tags.sys_tags()` gives."""
        implementation = _tags.interpreter_name()
        interpreter = f"{implementation}{_tags.interpreter_version()}"
        abis = dict.fromkeys(t.abi for t in _tags.sys_tags()
                             if t.interpreter == interpreter and t.abi not in ("abi3", "none"))
        return cls((sys.version_info[0], sys.version_info[1]),
                   platforms=tuple(_tags.platform_tags()), implementation=implementation,
                   abis=tuple(abis))

    @classmethod
    def for_python(cls, version: str | tuple[int, int] | None = None,
                   platforms: Sequence[str] | None = None,
                   implementation: str | None = None) -> Target:
        """The one place a target is built: the running interpreter (nothing given), else the
        Python `version` ("3.12" or (3, 12)) with this machine's platforms and implementation
        unless others are given."""
        if version is None and not platforms:
            return cls.current()
        current = cls.current()
        if version is None:
            wanted = current.python_version
        elif isinstance(version, str):
            wanted = parse_python_version(version)
        else:
            wanted = version
        return cls(wanted, platforms=tuple(platforms or current.platforms),
                   implementation=implementation or current.implementation)

    @property
    def interpreter(self) -> str:
        return f"{self.implementation}{self.python_version[0]}{self.python_version[1]}"

    @property
    def python(self) -> str:
        """The Python version as written: "3.11"."""
        return "{}.{}".format(*self.python_version)

    def expanded_platforms(self) -> list[str]:
        """The platform tags this target accepts, best first."""
        expanded = (compatible_platforms(p) for p in self.platforms)
        return list(dict.fromkeys(p for chain in expanded for p in chain))

    def supported_tags(self) -> tuple[_tags.Tag, ...]:
        """Every tag this target accepts, best first (the order of `packaging.tags.sys_tags`)."""
        return _supported_tags(self)

    def _supported_tags(self) -> tuple[_tags.Tag, ...]:
        platforms = self.expanded_platforms()
        if self.implementation == "cp":
            abis = self.abis if self.abis is not None else (self.interpreter,)
            found = _tags.cpython_tags(self.python_version, abis, platforms)
        else:
            found = _tags.generic_tags(self.interpreter, self.abis or ("none",), platforms)
        compatible_interpreter = {"cp": self.interpreter, "pp": "pp3"}.get(self.implementation)
        compatible = _tags.compatible_tags(self.python_version, compatible_interpreter, platforms)
        return tuple(dict.fromkeys([*found, *compatible]))

    def python_fits(self, requires_python: str | None) -> bool:
        """Whether a Requires-Python specifier admits this Python (invalid ones admit all)."""
        if not requires_python:
            return True
        try:
            spec = SpecifierSet(requires_python)
        except InvalidSpecifier:
            return True
        return spec.contains(Version(self.python), prereleases=True)

    def __str__(self) -> str:
        """`cp311 on manylinux_2_28_x86_64`; a long list (this machine's tags) is shortened to
        its most specific entry and a count."""
        platforms = [p for p in self.platforms if not p.startswith("linux_")] or self.platforms
        if len(platforms) > 2:
            return f"{self.interpreter} on {platforms[0]} (and {len(platforms) - 1} older)"
        return f"{self.interpreter} on {', '.join(platforms)}"


@functools.lru_cache(maxsize=64)
def _supported_tags(target: Target) -> tuple[_tags.Tag, ...]:
    return target._supported_tags()


@functools.lru_cache(maxsize=1 << 16)
def wheel_name(filename: str) -> WheelName | None:
    """What a wheel's file name says (name, version, build, tags), None when it is not a
    valid wheel name."""
    try:
        return parse_wheel_filename(filename)
    except (InvalidWheelFilename, InvalidVersion):
        return None


def _quick_version(filename: str) -> Version | None:
    """The version field of a wheel's file name (the second of its dash-separated fields),
    None when there is none or it is not a version; the whole name is not checked."""
    parts = filename.split("-", 2)
    return _version(parts[1]) if len(parts) == 3 and filename.endswith(".whl") else None


@functools.lru_cache(maxsize=1 << 14)
def _version(text: str) -> Version | None:
    try:
        return Version(text)
    except InvalidVersion:
        return None


@dataclass(frozen=True, slots=True)
class Candidate:
    """A wheel that fits: its version, the file, and the rank of its best tag (0 is best)."""

    version: Version
    file: IndexFile
    tag_rank: int
    tag: _tags.Tag


def _pins(spec: SpecifierSet, version: Version) -> bool:
    """Whether an exact `==` (no `.*`) or `===` specifier pins `version` (PEP 592)."""
    for s in spec:
        if s.operator == "===" and s.version == str(version):
            return True
        if s.operator == "==" and not s.version.endswith(".*") and s.contains(version, True):
            return True
    return False


def _project_wheels(files: Iterable[IndexFile], name: str
                    ) -> Iterator[tuple[IndexFile, WheelName]]:
    project = canonicalize_name(name)
    for file in files:
        wheel = file.wheel()
        if wheel is not None and wheel[0] == project:
            yield file, wheel


def _rank(ranks: Mapping[_tags.Tag, int], tags: frozenset[_tags.Tag]
          ) -> tuple[int, _tags.Tag] | None:
    found = [(ranks[t], t) for t in tags if t in ranks]
    return min(found, key=lambda pair: pair[0]) if found else None


def _allows_prereleases(spec: SpecifierSet, prereleases: bool) -> bool:
    return prereleases or bool(spec.prereleases)


def select(files: Iterable[IndexFile], requirement: Requirement, target: Target, *,
           prereleases: bool = False) -> list[Candidate]:
    """The wheels that fit, newest version first, then non-yanked, best tag, highest build.

    Extras and markers of the requirement are not evaluated here; sdists are ignored.
    """
    ranks = {tag: i for i, tag in enumerate(target.supported_tags())}
    spec = requirement.specifier
    allow_pre = _allows_prereleases(spec, prereleases)
    found: list[tuple[Candidate, BuildTag]] = []
    # the version in the name rules most files out before their names are parsed whole
    files = [f for f in files if (v := _quick_version(f.filename)) is None
             or spec.contains(v, prereleases=True)]
    for file, (_name, version, build, tags) in _project_wheels(files, requirement.name):
        if not spec.contains(version, prereleases=True):
            continue
        if version.is_prerelease and not allow_pre:
            continue
        if file.is_yanked and not _pins(spec, version):
            continue
        rank = _rank(ranks, tags)
        if rank is not None and target.python_fits(file.requires_python):
            found.append((Candidate(version, file, rank[0], rank[1]), build))
    found.sort(key=lambda cb: (cb[0].file.is_yanked, cb[0].tag_rank, _negated_build(cb[1])))
    found.sort(key=lambda cb: cb[0].version, reverse=True)
    return [candidate for candidate, _build in found]


def _negated_build(build: BuildTag) -> tuple[int, str]:
    return (-build[0], build[1]) if build else (1, "")


def select_one(files: Iterable[IndexFile], requirement: Requirement, target: Target, *,
               prereleases: bool = False) -> Candidate:
    """The best wheel that fits; NoMatchingWheel (with what does exist) when none does."""
    files = list(files)
    found = select(files, requirement, target, prereleases=prereleases)
    if not found:
        raise no_matching_wheel(files, requirement, target, prereleases=prereleases)
    return found[0]


def releases(files: Iterable[IndexFile], name: str) -> dict[Version, list[IndexFile]]:
    """Every wheel of project `name` grouped by version, newest version first."""
    grouped: dict[Version, list[IndexFile]] = {}
    for file, wheel in _project_wheels(files, name):
        grouped.setdefault(wheel[1], []).append(file)
    return dict(sorted(grouped.items(), key=lambda item: item[0], reverse=True))


# --- explaining why nothing fits ------------------------------------------------------------------


def _anchor(spec: SpecifierSet) -> Version | None:
    """The version a specifier is about, to find versions near it."""
    for s in spec:
        try:
            return Version(s.version.removesuffix(".*"))
        except InvalidVersion:
            continue
    return None


def nearest_versions(versions: Iterable[Version], spec: SpecifierSet, limit: int = 3
                     ) -> list[Version]:
    """Up to `limit` of `versions` closest (by position) to the version `spec` names (else the
    newest), newest first."""
    ordered = sorted(set(versions))
    anchor = _anchor(spec)
    if anchor is None:
        return ordered[::-1][:limit]
    at = bisect_left(ordered, anchor)

    def distance(j: int) -> tuple[int, bool]:
        return (j - at, False) if j >= at else (at - 1 - j, True)

    closest = sorted(range(len(ordered)), key=distance)[:limit]
    return [ordered[j] for j in sorted(closest, reverse=True)]


def _platform_list(wheels: Iterable[WheelName]) -> list[str]:
    return sorted({t.platform for w in wheels for t in w[3]})


def _interpreter_list(wheels: Iterable[WheelName]) -> list[str]:
    return sorted({f"{t.interpreter}-{t.abi}" for w in wheels for t in w[3]})


def _joined(items: Iterable[object]) -> str:
    return ", ".join(map(str, items)) or "none"


def _why_not(spec: SpecifierSet, allow_pre: bool, target: Target,
             pairs: list[tuple[IndexFile, WheelName]]) -> tuple[str, str | None]:
    """(reason, hint) for the first filter that removes every wheel."""
    matching = [(f, w) for f, w in pairs if spec.contains(w[1], prereleases=True)]
    if not matching:
        return f"no version matches {spec or 'any'}", None
    final = [(f, w) for f, w in matching if allow_pre or not w[1].is_prerelease]
    if not final:
        newest = max(w[1] for _f, w in matching)
        return "only pre-releases match", f"allow pre-releases to use {newest}"
    listed = [(f, w) for f, w in final if not f.is_yanked or _pins(spec, w[1])]
    if not listed:
        newest = max(w[1] for _f, w in final)
        return "every matching file is yanked", f"pin =={newest} to use a yanked release"
    python_ok = [(f, w) for f, w in listed if target.python_fits(f.requires_python)]
    if not python_ok:
        needs = _joined(sorted({f.requires_python or "" for f, _w in listed}))
        return f"its wheels require Python {needs}", None
    versions = _joined(sorted({w[1] for _f, w in python_ok}, reverse=True)[:3])
    wheels = [w for _f, w in python_ok]
    newer = _newer_glibc(wheels, target)
    if newer is not None:
        (major, minor), tag = newer
        return (f"the wheels of {versions} for this machine type need glibc {major}.{minor} "
                f"or newer ({tag}), newer than the target's",
                f"a host with glibc {major}.{minor} or newer, or an older release; "
                f"`--platform {tag}` checks what else it needs")
    return (f"the wheels of {versions} are for {_joined(_interpreter_list(wheels))}", None)


_MANYLINUX = re.compile(r"manylinux_(\d+)_(\d+)_(\w+)")


def _newer_glibc(wheels: Iterable[WheelName], target: Target,
                 ) -> tuple[tuple[int, int], str] | None:
    """The oldest glibc (and its tag) that a manylinux wheel for the target's machine type needs,
    when every such wheel needs a newer glibc than the target's newest manylinux tag."""
    def glibc(tag: str) -> tuple[tuple[int, int], str] | None:
        m = _MANYLINUX.fullmatch(tag)
        return ((int(m[1]), int(m[2])), m[3]) if m else None

    own = [g for g in map(glibc, target.platforms) if g is not None]
    if not own:
        return None
    newest, arch = max(own)
    needed = sorted((g[0], t.platform) for w in wheels for t in w[3]
                    if (g := glibc(t.platform)) is not None and g[1] == arch)
    return needed[0] if needed and needed[0][0] > newest else None


def no_matching_wheel(files: Iterable[IndexFile], requirement: Requirement, target: Target, *,
                      prereleases: bool = False) -> NoMatchingWheel:
    """The error that says why no wheel fits, with the nearest versions that do fit the target
    and the platforms the project's wheels are built for."""
    pairs = list(_project_wheels(files, requirement.name))
    spec = requirement.specifier
    head = f"no wheel of {requirement} fits {target}"
    if not pairs:
        return NoMatchingWheel(f"{head}: {requirement.name} has no wheels", None, (), ())
    allow_pre = _allows_prereleases(spec, prereleases)
    reason, hint = _why_not(spec, allow_pre, target, pairs)
    matching = [w for _f, w in pairs if spec.contains(w[1], prereleases=True)]
    platforms = _platform_list(matching or [w for _f, w in pairs])
    fitting = select(
        [f for f, _w in pairs], Requirement(requirement.name), target, prereleases=allow_pre)
    nearest = nearest_versions((c.version for c in fitting), spec)
    if nearest:
        fit_note = f"nearest versions with a wheel for {target}: {_joined(nearest)}"
    else:
        nearest = nearest_versions((w[1] for _f, w in pairs), spec)
        fit_note = (f"no version of {requirement.name} has a wheel for {target}; "
                    f"nearest versions: {_joined(nearest)}")
    line = f"{head}: {reason}; platforms offered: {_joined(platforms)}"
    return NoMatchingWheel(line, f"{hint}; {fit_note}" if hint else fit_note, nearest, platforms)


# --- the I/O layer --------------------------------------------------------------------------------


def _header(headers: Mapping[str, str], name: str) -> str:
    return next((v for k, v in headers.items() if k.lower() == name), "")


def verify_hashes(data: bytes, hashes: Mapping[str, str], where: str) -> None:
    """Raise FormatError unless `data` has every known hash in `hashes`."""
    for algorithm, expected in hashes.items():
        if algorithm in hashlib.algorithms_guaranteed:
            actual = hashlib.new(algorithm, data).hexdigest()
            if actual != expected.lower():
                raise FormatError(where, f"{algorithm} is {actual}, the index says {expected}")


class PackageIndex:
    """The files the configured indexes and find-links locations offer for a project.

    Remote pages come through `fetch`; file:// indexes and local find-links are read from disk.
    A source that cannot be read (no connection, an HTTP error after the client's retries, a
    missing directory) raises IndexUnavailable, unless `warn` is given. Then, as pip does, the
    project's files come from the sources that do answer, and `warn` is told once per source it
    skipped; only when no source has the project is the first failure raised (a source that
    could not be read might have had it).
    """

    def __init__(self, fetch: Fetch, config: IndexConfig | None = None, *,
                 warn: Callable[[str], None] | None = None) -> None:
        self.fetch = fetch
        self.config = config or IndexConfig()
        self.warn = warn
        self._pages: dict[str, list[IndexFile]] = {}
        self._warned: set[str] = set()  # sources skipped and reported
        self._lock = threading.Lock()

    def project_files(self, name: str) -> list[IndexFile]:
        """Every file of the project, primary index first, then extra indexes, then find-links;
        the first occurrence of a file name wins. PackageNotFound when no source has it."""
        project = canonicalize_name(name)
        if project not in self._pages:
            self._pages[project] = self._gather(name, project)
        return self._pages[project]

    def _gather(self, name: str, project: str) -> list[IndexFile]:
        reads: list[tuple[str, Callable[[], list[IndexFile] | None]]] = [
            *((url, functools.partial(self._index_page, url, project))
              for url in self.config.index_urls),
            *((location, functools.partial(self._find_links, location, project))
              for location in self.config.find_links)]
        pages: list[list[IndexFile]] = []
        failed: list[tuple[str, IndexUnavailable]] = []
        for source, read in reads:
            try:
                page = _local_errors(source, read)
            except IndexUnavailable as e:
                if self.warn is None:
                    raise
                failed.append((source, e))
                continue
            if page:
                pages.append(page)
        if not pages:
            if failed:
                raise failed[0][1]
            raise PackageNotFound(name, self.config.sources, suggest(name, self.project_names()))
        for source, error in failed:
            self._skipped(source, error)
        merged: dict[str, IndexFile] = {}
        for page in pages:
            for file in page:
                merged.setdefault(file.filename, file)
        return list(merged.values())

    def _skipped(self, source: str, error: IndexUnavailable) -> None:
        """Tell `warn`, once per source, that the source was skipped and why."""
        with self._lock:
            if source in self._warned or self.warn is None:
                return
            self._warned.add(source)
        self.warn(f"skipping {error}")

    def _get(self, url: str, accept: str) -> tuple[int, Mapping[str, str], bytes, str]:
        """The response (200, 404 or 410); IndexUnavailable for anything else."""
        try:
            status, headers, body, final = self.fetch(url, {"Accept": accept})
        except (OSError, AbifitError) as e:
            code = getattr(e, "status", None)
            if code in (404, 410):  # a client that raises for 4xx (abifit.remote.http does)
                return int(code), {}, b"", url
            problem = getattr(e, "problem", None) or str(e)
            raise IndexUnavailable(url, problem, code if isinstance(code, int) else None) from e
        if status not in (200, 404, 410):
            raise IndexUnavailable(url, f"HTTP {status}", status)
        return status, headers, body, final

    def _index_page(self, index_url: str, project: str) -> list[IndexFile] | None:
        url = f"{index_url.rstrip('/')}/{project}/"
        root = local_file(index_url)
        if root is not None:
            if not root.is_dir():
                raise IndexUnavailable(index_url, "no such directory")
            return _local_page(file_url_path(url))
        status, headers, body, final = self._get(url, ACCEPT)
        if status != 200:
            return None
        return parse_simple_page(body, final, _header(headers, "content-type"))

    def _find_links(self, location: str, project: str) -> list[IndexFile] | None:
        path = _local_path(location)
        if path is not None:
            files = find_links_files(path) if path.is_dir() else _local_page(path)
            if files is None:
                raise IndexUnavailable(location, "no such file or directory")
        else:
            status, _headers, body, final = self._get(location, "text/html")
            files = _served(parse_simple_html(body, final), final) if status == 200 else None
        chosen = [f for f in files or () if f.project() == project]
        return chosen or None

    def project_names(self, *, remote: bool = False) -> list[str]:
        """Project names the sources list: local ones always, remote roots only when asked
        (PyPI's root page is tens of megabytes). A source that cannot be read is left out when
        `warn` is given."""
        names: list[str] = []
        for location in (*self.config.index_urls, *self.config.find_links):
            path = _local_path(location)
            try:
                if path is not None:
                    names += _local_errors(location, functools.partial(_local_names, path))
                elif remote and location in self.config.index_urls:
                    status, headers, body, final = self._get(location.rstrip("/") + "/", ACCEPT)
                    if status == 200:
                        content_type = _header(headers, "content-type")
                        names += parse_project_names(body, final, content_type)
            except IndexUnavailable:
                if self.warn is None:
                    raise
        return list(dict.fromkeys(names))

    def metadata(self, file: IndexFile) -> bytes | None:
        """The PEP 658 core metadata of a file when the index offers it, verified by its hashes;
        None (after `warn`, when given) when it cannot be fetched: the wheel holds it too."""
        if not file.has_metadata:
            return None
        url = file.url + ".metadata"
        path = local_file(url)
        if path is not None:
            data = path.read_bytes() if path.is_file() else None
        else:
            try:
                status, _headers, body, _final = self._get(url, "*/*")
            except IndexUnavailable as e:
                if self.warn is None:
                    raise
                self.warn(f"skipping {e}")
                return None
            data = body if status == 200 else None
        if data is not None and isinstance(file.metadata, Mapping):
            verify_hashes(data, file.metadata, url)
        return data


def _local_errors(source: str, read: Callable[[], _T]) -> _T:
    """`read()`, with a failure to read the disk (a directory without permission) as the
    IndexUnavailable of `source`."""
    try:
        return read()
    except OSError as e:
        raise IndexUnavailable(source, e.strerror or str(e)) from e


def suggest(name: str, names: Iterable[str], limit: int = 3) -> list[str]:
    """Names close to `name` (compared in canonical form), for 'did you mean'."""
    by_canonical: dict[str, str] = {canonicalize_name(n): n for n in names}
    close = difflib.get_close_matches(canonicalize_name(name), list(by_canonical), n=limit)
    return [by_canonical[c] for c in close]
