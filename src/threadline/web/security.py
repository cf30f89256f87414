"""Who may use the browser, and how pages are protected.

* **A name of its own per server run.** Browsers scope cookies by host, not port: a cookie
  set for ``127.0.0.1`` goes to every server on 127.0.0.1 the browser visits, and one of
  them could replay it here. So a server listening on loopback is reached at an unguessable
  ``<random>.localhost`` name (browsers resolve every ``*.localhost`` name to loopback
  themselves), its cookie is host-only for that name (no ``Domain``), and a request naming
  any other host — ``127.0.0.1``, ``localhost``, another name — gets a 400 that does not
  tell the name. This also defeats DNS rebinding. A server listening on another interface
  (``--host``) also answers to that address (on all interfaces: to any name).
* **A token per server run.** ``threadline ui`` prints ``http://<name>:PORT/?token=…``;
  the first visit with the token sets an HttpOnly, SameSite=Strict cookie and redirects
  to the same URL without the token. Any other request without the cookie gets 403 —
  other users and other local programs cannot read the database through the server.
  The cookie holds not the token but an HMAC of the name and port under the token, which
  this server alone accepts. A token visit from another site (the launch file
  ``threadline ui`` opens is one) gets a page that moves on from this origin instead of a
  redirect, which would keep the navigation cross-site and the cookie unsent.
* **Writes are POST with CSRF protection**: a per-run CSRF token in every form
  (``csrf_form``), and the browser's ``Origin`` / ``Sec-Fetch-Site`` must be this
  origin.
* **Headers**: a Content-Security-Policy allowing scripts, styles and images from the
  server only (no inline script; database values are never code), no framing, no
  sniffing, no caching of pages, no ``Referer`` to other sites (it would carry the name).
"""

from __future__ import annotations

import hashlib
import hmac
import html
import ipaddress
import re
import secrets
from dataclasses import dataclass, field
from urllib.parse import parse_qsl, urlencode

from starlette.datastructures import FormData
from starlette.middleware.base import BaseHTTPMiddleware, RequestResponseEndpoint
from starlette.requests import Request
from starlette.responses import HTMLResponse, PlainTextResponse, RedirectResponse, Response

WRONG_HOST = ("Wrong address for this threadline ui: open the URL `threadline ui` printed "
              "(http://threadline-….localhost:PORT/?token=…). It answers to no other name (127.0.0.1, localhost), "
              "so no other program on this machine can use its cookie.")
CSP = (
    "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data:; "
    "connect-src 'self'; object-src 'none'; base-uri 'none'; form-action 'self'; frame-ancestors 'none'"
)
HEADERS = {
    "Content-Security-Policy": CSP,
    "X-Content-Type-Options": "nosniff",
    "X-Frame-Options": "DENY",
    "Referrer-Policy": "same-origin",
    "Cross-Origin-Opener-Policy": "same-origin",
    "Cross-Origin-Resource-Policy": "same-origin",
}


MOVE_ON_PAGE = """<!doctype html>
<html><head><meta charset="utf-8"><meta http-equiv="refresh" content="0;url={url}"><link rel="icon" href="data:,">
<title>threadline ui</title></head>
<body><p>Opening <a href="{url}">threadline ui</a>…</p></body></html>
"""


def move_on_page(url: str) -> str:
    """An HTML page that sends the browser on to ``url`` (a meta refresh: no script)."""
    return MOVE_ON_PAGE.format(url=html.escape(url, quote=True))


def listen_kind(host: str) -> str:
    """What a ``--host`` value listens on: ``"loopback"`` (``localhost``, 127.0.0.0/8, ``::1``),
    ``"all"`` (``0.0.0.0``, ``::``, empty) or ``"other"`` (a name or another address)."""
    if host.lower() == "localhost":
        return "loopback"
    try:
        address = ipaddress.ip_address(host.strip("[]")) if host else ipaddress.ip_address("0.0.0.0")
    except ValueError:
        return "other"
    return "loopback" if address.is_loopback else "all" if address.is_unspecified else "other"


def host_of(header: str) -> str:
    """The host name of a ``Host`` header (lower case, port dropped, IPv6 brackets kept); "" when malformed."""
    m = re.match(r"^(\[[^\]]+\]|[^:\[\]]+)(?::\d+)?$", header)
    return m.group(1).lower() if m else ""


class CsrfError(Exception):
    """A write request without this run's CSRF token, or from another origin."""


@dataclass
class Guard:
    """The secrets of one server run and the hosts it answers to.

    ``name``: this run's host name, ``threadline-<32 hex digits>.localhost`` (128 random bits),
    secret like the token: a local server that learned it could have the browser visit it under
    that name (cookies ignore ports) and receive the cookie.
    """

    port: int
    bind_host: str = "127.0.0.1"
    token: str = field(default_factory=lambda: secrets.token_urlsafe(24))
    csrf: str = field(default_factory=lambda: secrets.token_urlsafe(24))
    name: str = field(default_factory=lambda: f"threadline-{secrets.token_hex(16)}.localhost")

    @property
    def origin(self) -> str:
        """Where a browser reaches this server: ``http://<name>:PORT`` when it listens on loopback
        (or on all interfaces), else ``http://<bound address>:PORT``."""
        host = self.name if listen_kind(self.bind_host) != "other" else self.bind_host
        return f"http://{f'[{host}]' if ':' in host else host}:{self.port}"

    @property
    def cookie(self) -> str:
        return f"threadline_ui_{self.port}"

    @property
    def cookie_value(self) -> str:
        """The cookie's value: this server's name and port, HMAC'd under this run's token (never the token)."""
        return hmac.new(self.token.encode(), f"threadline ui at {self.name}:{self.port}".encode(), hashlib.sha256).hexdigest()

    def host_allowed(self, host_header: str) -> bool:
        """True when the Host header names this run's name; when not listening on loopback only,
        also the bound address (on all interfaces: any host)."""
        host = host_of(host_header)
        kind = listen_kind(self.bind_host)
        return host == self.name or kind == "all" or (kind == "other" and host.strip("[]") == self.bind_host.strip("[]").lower())

    def authorized(self, request: Request) -> bool:
        given = request.cookies.get(self.cookie, "")
        return hmac.compare_digest(given.encode(), self.cookie_value.encode())

    def check_origin(self, request: Request) -> None:
        """Raise CsrfError unless the browser says the request comes from this origin."""
        site = request.headers.get("sec-fetch-site")
        if site is not None and site not in ("same-origin", "none"):
            raise CsrfError(f"cross-site request refused (Sec-Fetch-Site: {site})")
        origin = request.headers.get("origin")
        if origin is not None and origin != f"{request.url.scheme}://{request.headers.get('host', '')}":
            raise CsrfError(f"request from another origin refused (Origin: {origin})")

    def check_csrf(self, request: Request, form: FormData) -> None:
        """Raise CsrfError unless ``form`` (or the ``X-CSRF-Token`` header) carries this run's CSRF token."""
        self.check_origin(request)
        given = str(form.get("csrf") or request.headers.get("x-csrf-token") or "")
        if not hmac.compare_digest(given.encode(), self.csrf.encode()):
            raise CsrfError("missing or wrong CSRF token: reload the page and try again")


async def csrf_form(request: Request) -> FormData:
    """The request's form after the CSRF and origin checks (raises CsrfError)."""
    form = await request.form()
    request.app.state.guard.check_csrf(request, form)
    return form


class GuardMiddleware(BaseHTTPMiddleware):
    """Host check, token → cookie exchange, 403 without the cookie, security headers."""

    async def dispatch(self, request: Request, call_next: RequestResponseEndpoint) -> Response:
        guard: Guard = request.app.state.guard
        if not guard.host_allowed(request.headers.get("host", "")):
            return self._headers(PlainTextResponse(WRONG_HOST, 400))
        token = request.query_params.get("token")
        if token is not None and request.method == "GET":
            if not hmac.compare_digest(token.encode(), guard.token.encode()):
                return self._headers(PlainTextResponse("Wrong token: open the URL `threadline ui` printed.", 403))
            rest = urlencode([(k, v) for k, v in parse_qsl(request.url.query, keep_blank_values=True) if k != "token"])
            clean = request.url.path + (f"?{rest}" if rest else "")
            if request.headers.get("sec-fetch-site") == "cross-site":
                response: Response = HTMLResponse(move_on_page(clean))
            else:
                response = RedirectResponse(clean, status_code=303)
            response.set_cookie(guard.cookie, guard.cookie_value, httponly=True, samesite="strict", path="/")
            return self._headers(response)
        if not request.url.path.startswith("/static/") and not guard.authorized(request):
            return self._headers(PlainTextResponse(
                "This threadline ui needs its access token: open the URL that `threadline ui` printed "
                "(http://…/?token=…).", 403))
        return self._headers(await call_next(request))

    @staticmethod
    def _headers(response: Response) -> Response:
        for k, v in HEADERS.items():
            response.headers.setdefault(k, v)
        if not response.headers.get("content-type", "").startswith(("text/css", "text/javascript", "application/javascript")):
            response.headers.setdefault("Cache-Control", "no-store")
        return response
