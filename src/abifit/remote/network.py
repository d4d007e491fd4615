"""How the indexes are reached: proxies, credentials, certificates, as pip reaches them.

- **Proxies** come from the environment as pip (through requests) reads them: `http_proxy`,
  `https_proxy`, `all_proxy` (lower case before upper case) and `no_proxy`, whose entries are
  host names (a leading dot or none: the host and its subdomains), `host:port`, or `*`; pip's
  own `proxy` setting (`--proxy`, `PIP_PROXY`) is the proxy of every scheme.
- **Credentials** in an index URL (`https://user:password@host/simple`) belong to its host:
  they are taken out of the URL (which is then what is shown and what keys the cache) and
  sent as Basic authentication to every request to that host, the wheel files too; a host
  without them gets those of its `.netrc` entry (`NETRC`, else `~/.netrc`), and a host that
  answers 401 is asked again with what the keyring gives, as pip does (`keyring-provider`).
  `redact` hides a password wherever a URL is shown.
- **TLS and patience**: pip's `cert` (a CA bundle that replaces the system's), `client-cert`,
  `trusted-host` (hosts whose certificate is not checked), `timeout` and `retries`.

Settings and the environment arrive as mappings; only `Network.netrc_credentials` reads a
file.
"""

from __future__ import annotations

import base64
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from urllib.parse import unquote, urlsplit, urlunsplit

NETWORK_KEYS = ("proxy", "cert", "client-cert", "trusted-host", "timeout", "retries",
                "keyring-provider")


@dataclass(frozen=True, slots=True)
class Network:
    """The network settings of a run (`pip_network` reads them)."""

    proxies: Mapping[str, str] = field(default_factory=dict)  # scheme -> proxy URL
    no_proxy: tuple[str, ...] = ()
    cert: str | None = None  # a CA bundle (file) or directory
    client_cert: str | None = None  # a PEM file holding the client's key and certificate
    trusted_hosts: tuple[str, ...] = ()  # "host" or "host:port"
    timeout: float | None = None
    retries: int | None = None
    netrc_path: str | None = None  # the netrc file pip would read, when there is one
    keyring_provider: str = "auto"  # pip's: auto, import, subprocess or disabled

    def proxy_for(self, url: str) -> str | None:
        """The proxy a request for `url` goes through, None for a direct connection."""
        parts = urlsplit(url)
        proxy = self.proxies.get(parts.scheme) or self.proxies.get("all")
        if proxy is None or bypassed(parts.hostname or "", parts.port, self.no_proxy):
            return None
        return proxy

    def trusted(self, url: str) -> bool:
        """Whether `url`'s host is a trusted host (its certificate is not checked)."""
        parts = urlsplit(url)
        host = (parts.hostname or "").lower()
        return any(t.lower() in (host, f"{host}:{parts.port}") for t in self.trusted_hosts)

    def netrc_credentials(self, host: str) -> tuple[str, str] | None:
        """The login and password the netrc file gives `host` (or its `default` entry); None
        without a file, or one that cannot be read."""
        if not self.netrc_path:
            return None
        import netrc

        try:
            found = netrc.netrc(self.netrc_path).authenticators(host)
        except (netrc.NetrcParseError, OSError):
            return None
        if found is None:
            return None
        login, _account, password = found
        return (login, password or "") if login else None

    def keyring_credentials(self, url: str, user: str | None) -> tuple[str, str] | None:
        """What the keyring gives for `url`'s host, as pip asks it after a 401 (its
        `keyring-provider`): the `keyring` module when this Python has it (a user name and
        password), else the `keyring` command, which needs the user name (`keyring get HOST
        USER`). None when there is none, or nothing answers; never a prompt."""
        provider = self.keyring_provider.strip().lower()
        if provider == "disabled":
            return None
        host = urlsplit(url).hostname or ""
        if provider in ("auto", "import"):
            found = _keyring_module(host, user)
            if found is not None or provider == "import":
                return found
        if provider in ("auto", "subprocess") and user:
            return _keyring_command(host, user)
        return None


def _keyring_module(host: str, user: str | None) -> tuple[str, str] | None:
    try:
        import keyring  # type: ignore[import-not-found, unused-ignore]
    except ImportError:
        return None
    try:
        found = keyring.get_credential(host, user)
    except Exception:  # a backend that fails gives no credential
        return None
    if found is None or found.password is None:
        return None
    return str(found.username or user or ""), str(found.password)


def _keyring_command(host: str, user: str) -> tuple[str, str] | None:
    import shutil
    import subprocess

    command = shutil.which("keyring")
    if command is None:
        return None
    try:
        done = subprocess.run([command, "get", host, user], capture_output=True, text=True,
                              stdin=subprocess.DEVNULL, timeout=30, check=False)
    except (OSError, subprocess.SubprocessError):
        return None
    password = done.stdout.rstrip("\n")
    return (user, password) if done.returncode == 0 and password else None


def bypassed(host: str, port: int | None, no_proxy: tuple[str, ...]) -> bool:
    """Whether `no_proxy` sends requests for `host` (at `port`) directly."""
    host = host.lower().strip("[]")
    for entry in no_proxy:
        entry = entry.strip().lower()
        if not entry:
            continue
        if entry == "*":
            return True
        name, _, wanted_port = entry.rpartition(":") if re.search(r":\d+$", entry) else (
            entry, "", "")
        if wanted_port and port is not None and int(wanted_port) != port:
            continue
        name = name.lstrip(".")
        if host == name or host.endswith("." + name):
            return True
    return False


def environment_proxies(env: Mapping[str, str], proxy: str | None = None,
                        ) -> tuple[dict[str, str], tuple[str, ...]]:
    """The proxies by scheme and the `no_proxy` entries of an environment; `proxy` (pip's
    setting), when given, is that of every scheme."""
    proxies: dict[str, str] = {}
    for scheme in ("http", "https", "all"):
        value = env.get(f"{scheme}_proxy") or env.get(f"{scheme.upper()}_PROXY")
        if value:
            proxies[scheme] = value if "://" in value else f"http://{value}"
    if proxy:
        url = proxy if "://" in proxy else f"http://{proxy}"
        proxies = {"http": url, "https": url}
    no_proxy = env.get("no_proxy") or env.get("NO_PROXY") or ""
    return proxies, tuple(e for e in re.split(r"[,\s]+", no_proxy) if e)


def pip_network(settings: Mapping[str, str], env: Mapping[str, str],
                netrc_path: str | None) -> Network:
    """The network settings from pip's merged settings (`NETWORK_KEYS`) and the environment."""
    proxies, no_proxy = environment_proxies(env, settings.get("proxy", "").strip() or None)
    return Network(
        proxies=proxies, no_proxy=no_proxy,
        cert=settings.get("cert", "").strip() or None,
        client_cert=settings.get("client-cert", "").strip() or None,
        trusted_hosts=tuple(settings.get("trusted-host", "").split()),
        timeout=_number(settings.get("timeout")),
        retries=None if (n := _number(settings.get("retries"))) is None else int(n),
        netrc_path=netrc_path,
        keyring_provider=settings.get("keyring-provider", "").strip() or "auto",
    )


def _number(text: str | None) -> float | None:
    """A setting's number; None when unset or not a number (pip would refuse it)."""
    try:
        return float(text.strip()) if text and text.strip() else None
    except ValueError:
        return None


def split_credentials(url: str) -> tuple[str, tuple[str, str] | None]:
    """`url` without its user information, and the (user, password) it held, if any."""
    parts = urlsplit(url)
    if "@" not in parts.netloc:
        return url, None
    userinfo, _, hostport = parts.netloc.rpartition("@")
    user, _, password = userinfo.partition(":")
    clean = urlunsplit((parts.scheme, hostport, parts.path, parts.query, parts.fragment))
    return clean, (unquote(user), unquote(password))


def basic_auth(credentials: tuple[str, str]) -> str:
    """The Authorization header's value for Basic authentication."""
    return "Basic " + base64.b64encode(":".join(credentials).encode("utf-8")).decode("ascii")


_USERINFO = re.compile(r"(?P<scheme>[a-zA-Z][\w+.-]*://)(?P<user>[^/@:\s]*)(?P<password>:[^/@\s]*)?@")


def redact(text: str) -> str:
    """`text` with the secret of every URL in it hidden, as pip hides it: the password
    (`https://user:****@host/`), or a user name given alone, which is then a token
    (`https://****@host/`)."""
    return _USERINFO.sub(lambda m: f"{m['scheme']}{m['user']}:****@" if m["password"]
                         else f"{m['scheme']}****@", text)
