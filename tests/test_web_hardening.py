"""Issue 27, findings 10 and 13 for ``threadline ui`` (HTTP, Starlette's TestClient; the launch
in a real browser is in ``test_web_browser.py``).

10. The token cookie is bound to its server's port; a token visit from another site moves
    on from this origin; a password in ``--db`` never shows in a page; a ``meta`` filter
    nested thousands deep is a 400 naming the problem.
13. The ``ui`` banner masks the password.
"""

from __future__ import annotations

import signal
import subprocess
from urllib.parse import urlsplit

import pytest
from starlette.testclient import TestClient

import web_helpers as wh
from cli_support import EXE
from threadline import open_saver
from threadline.demo import THREAD_ID
from threadline.web import UIConfig, create_app
from threadline.web.security import Guard
from threadline.web.server import url_of

demo_path = wh.demo_path


def with_passwords(pg_url: str) -> str:
    """``pg_url`` with a password in its user part and a ``password`` parameter (trust auth ignores both)."""
    return pg_url.replace("postgresql://postgres@", "postgresql://postgres:s3cret-user@") + "&password=s3cret-param"


def test_cookie_is_bound_to_this_servers_port(demo_path: str) -> None:
    config = UIConfig(db=demo_path, port=8765)
    guard = config.guard
    with wh.client(config) as c:
        value = c.cookies[guard.cookie]
        assert value != guard.token and guard.token not in value  # the printed token never travels in a cookie
        assert c.get("/").status_code == 200
    other_port = Guard(port=8766, token=guard.token).cookie_value
    with TestClient(create_app(config), base_url=guard.origin) as fresh:
        for stolen in (guard.token, other_port):  # the token itself, or a cookie minted for another port
            assert fresh.get("/", cookies={guard.cookie: stolen}).status_code == 403
        assert fresh.get("/", cookies={guard.cookie: value}).status_code == 200


def test_ui_answers_only_at_its_own_host_name(demo_path: str) -> None:
    """Issue 42, finding 9: browsers send a host's cookies to every port of it, so a cookie set for
    127.0.0.1 reached every local server, and replayed to the UI's port it read the database. The UI
    is served at a name of its own, unguessable and different each run; its cookie is host-only
    (no Domain attribute) and a request naming any other host is refused, cookie or token."""
    config = UIConfig(db=demo_path, port=8765)
    url = urlsplit(url_of(config))
    assert url.hostname != urlsplit(url_of(UIConfig(db=demo_path, port=8765))).hostname
    label, _, tld = url.hostname.partition(".")
    assert tld == "localhost" and len(label) >= 32 and url.port == 8765
    with TestClient(create_app(config), base_url=f"http://{url.netloc}") as own:
        entered = own.get(f"/?{url.query}", follow_redirects=False)
        assert entered.status_code == 303 and "domain=" not in entered.headers["set-cookie"].lower()
        cookie = {config.guard.cookie: own.cookies[config.guard.cookie]}
        graph = own.get("/api/graph", params={"thread_id": THREAD_ID})
        assert graph.status_code == 200 and '"nodes"' in graph.text
    with TestClient(create_app(config), base_url="http://127.0.0.1:8765") as other:
        for host in ("127.0.0.1:8765", "127.0.0.1", "localhost:8765", "[::1]:8765", "other.localhost:8765",
                     f"x.{url.hostname}:8765", "evil.example:8765"):
            for path, cookies in ((f"/api/graph?thread_id={THREAD_ID}", cookie), (f"/?{url.query}", {})):
                refused = other.get(path, headers={"host": host}, cookies=cookies, follow_redirects=False)
                assert refused.status_code == 400 and "open the URL `threadline ui` printed" in refused.text, host
                assert '"nodes"' not in refused.text and url.hostname not in refused.text and "set-cookie" not in refused.headers


LOOPBACK = ("127.0.0.1:8765", "localhost:8765", "[::1]:8765")


@pytest.mark.parametrize(("bind", "origin", "answered", "refused"), [
    ("127.0.0.1", None, (), (*LOOPBACK, "10.1.2.3:8765")),
    ("localhost", None, (), LOOPBACK),
    ("::1", None, (), LOOPBACK),
    ("0.0.0.0", None, (*LOOPBACK, "box.example:8765"), ()),  # all interfaces: reached by any name
    ("10.1.2.3", "http://10.1.2.3:8765", ("10.1.2.3:8765",), LOOPBACK),  # one other interface: by its address
])
def test_host_option_decides_the_address_and_the_hosts_answered(bind: str, origin: str | None, answered: tuple[str, ...],
                                                                 refused: tuple[str, ...]) -> None:
    guard = Guard(port=8765, bind_host=bind)
    assert guard.origin == (origin or f"http://{guard.name}:8765")
    assert all(guard.host_allowed(host) for host in (f"{guard.name}:8765", *answered))
    assert not any(guard.host_allowed(host) for host in refused)


def test_token_visit_from_another_site_moves_on_from_this_origin(demo_path: str) -> None:
    config = UIConfig(db=demo_path, port=8765)
    with TestClient(create_app(config), base_url=config.guard.origin) as c:
        r = c.get(f"/?token={config.guard.token}&q=demo", headers={"sec-fetch-site": "cross-site"}, follow_redirects=False)
        assert r.status_code == 200 and '<meta http-equiv="refresh" content="0;url=/?q=demo">' in r.text
        assert config.guard.token not in r.text and config.guard.cookie in r.headers["set-cookie"]
        assert THREAD_ID in c.get("/").text


def test_meta_filter_nested_thousands_deep_is_a_400(demo_path: str) -> None:
    with wh.client(UIConfig(db=demo_path)) as c:
        for meta in ('{"a":' + "[" * 5000 + "]" * 5000 + "}", "step=" + "[" * 5000 + "]" * 5000):
            r = c.get("/", params={"meta": meta})
            assert r.status_code == 400 and "nested too deeply" in r.text


def test_password_in_the_database_url_never_shows_in_a_page(pg_url: str) -> None:
    with open_saver(pg_url) as saver:
        wh.paused(saver)
    with wh.client(UIConfig(db=with_passwords(pg_url))) as c:
        for path in ("/", "/thread?thread_id=t-paused"):
            page = c.get(path)
            assert page.status_code == 200 and "//***@" in page.text and "password=***" in page.text
            assert "s3cret" not in page.text


def test_ui_banner_masks_the_password(pg_url: str) -> None:
    with open_saver(pg_url):
        pass
    proc = subprocess.Popen([str(EXE), "ui", "--no-browser", "--port", "0", "--db", with_passwords(pg_url)],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        banner = proc.stdout.readline() + proc.stdout.readline()
    finally:
        proc.send_signal(signal.SIGINT)
        proc.communicate(timeout=30)
    assert "?token=" in banner and "//***@" in banner and "password=***" in banner
    assert "s3cret" not in banner


def test_ctrl_c_as_the_server_starts_stops_it(demo_path: str) -> None:
    """A Ctrl+C (SIGINT) that arrives between the announcement and uvicorn's own handler (here: while the
    banner is printed) stops the server once it has started: ``serve`` returns, no KeyboardInterrupt, and
    the handler it found is back."""
    from threadline.web.server import serve

    before = signal.getsignal(signal.SIGINT)
    banners: list[str] = []

    def announce(text: str) -> None:
        banners.append(text)
        signal.raise_signal(signal.SIGINT)  # delivered now, before the server runs

    try:
        serve(UIConfig(db=demo_path, port=0), open_browser=False, announce=announce)
    except KeyboardInterrupt:  # pragma: no cover - the failure this test is about
        pytest.fail("a Ctrl+C as the server started escaped as KeyboardInterrupt")
    assert banners and "Press Ctrl+C to stop." in banners[0]
    assert signal.getsignal(signal.SIGINT) is before
