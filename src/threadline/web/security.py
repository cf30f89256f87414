"""Who may use the browser, and how pages are protected.

* **A token per server run.** ``threadline ui`` prints ``http://127.0.0.1:PORT/?token=…``;
  the first visit with the token sets an HttpOnly, SameSite=Strict cookie and redirects
  to the same URL without the token. Any other request without the cookie gets 403 —
  other users and other local programs cannot read the database through the server.
  The cookie is bound to the port: named for it, and holding not the token but an HMAC
  of the port under the token, which this server alone accepts. (Browsers send a host's
  cookies to every port of it; a program listening on another port of 127.0.0.1 that the
  browser visits receives the cookie and could replay it here, which no cookie attribute
  prevents; it never learns the printed token.) A token visit from another site (the
  launch file ``threadline ui`` opens is one) gets a page that moves on from this origin
  instead of a redirect, which would keep the navigation cross-site and the cookie unsent.
* **Host check.** Requests must name a loopback host (or the host the server was
  bound to), which defeats DNS rebinding.
* **Writes are POST with CSRF protection**: a per-run CSRF token in every form
  (``csrf_form``), and the browser's ``Origin`` / ``Sec-Fetch-Site`` must be this
  origin.
* **Headers**: a Content-Security-Policy allowing scripts, styles and images from the
  server only (no inline script; database values are never code), no framing, no
  sniffing, no caching of pages.
"""

from __future__ import annotations

import hashlib
import hmac
import html
import re
import secrets
from dataclasses import dataclass, field
from urllib.parse import parse_qsl, urlencode

from starlette.datastructures import FormData
from starlette.middleware.base import BaseHTTPMiddleware, RequestResponseEndpoint
from starlette.requests import Request
from starlette.responses import HTMLResponse, PlainTextResponse, RedirectResponse, Response

LOOPBACK_HOSTS = ("127.0.0.1", "localhost", "::1", "[::1]")
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


class CsrfError(Exception):
    """A write request without this run's CSRF token, or from another origin."""


@dataclass
class Guard:
    """The secrets of one server run and the hosts it answers to."""

    port: int
    bind_host: str = "127.0.0.1"
    token: str = field(default_factory=lambda: secrets.token_urlsafe(24))
    csrf: str = field(default_factory=lambda: secrets.token_urlsafe(24))

    @property
    def cookie(self) -> str:
        return f"threadline_ui_{self.port}"

    @property
    def cookie_value(self) -> str:
        """The cookie's value: this server's port, HMAC'd under this run's token (never the token)."""
        return hmac.new(self.token.encode(), f"threadline ui on port {self.port}".encode(), hashlib.sha256).hexdigest()

    def host_allowed(self, host_header: str) -> bool:
        """True for a loopback host (or the bound one) in the Host header; any host when bound to all interfaces."""
        if self.bind_host in ("0.0.0.0", "::", ""):
            return True
        m = re.match(r"^(\[[^\]]+\]|[^:\[\]]+)(?::\d+)?$", host_header)
        host = m.group(1) if m else ""
        return host in LOOPBACK_HOSTS or host.strip("[]") == self.bind_host.strip("[]")

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
            return self._headers(PlainTextResponse("Invalid Host header: open the URL `threadline ui` printed.", 400))
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
