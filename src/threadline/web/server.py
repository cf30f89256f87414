"""Running the app: bind a loopback socket, print the URL (this run's host name and token),
open the browser, serve.

The browser is launched with a private redirect file (``redirect_file``), as Jupyter does,
never with the URL itself: a command line is visible to every user of the machine
(``ps``), the file only to its owner.
"""

from __future__ import annotations

import contextlib
import os
import signal
import socket
import tempfile
import threading
import webbrowser
from collections.abc import Callable, Iterator
from pathlib import Path

import uvicorn

from threadline.backends.registry import masked
from threadline.web.app import UIConfig, create_app
from threadline.web.db import Opened, open_for_ui
from threadline.web.security import move_on_page


def bind(host: str, port: int) -> socket.socket:
    """A listening TCP socket on ``host:port`` (port 0: any free port). Raises OSError when taken."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        sock.bind((host, port))
    except OSError:
        sock.close()
        raise
    sock.listen(128)
    sock.set_inheritable(True)
    return sock


def url_of(config: UIConfig) -> str:
    """The URL a user opens: ``http://<this run's name>.localhost:PORT/?token=…`` (``Guard.origin``)."""
    return f"{config.guard.origin}/?token={config.guard.token}"


def redirect_file(link: str) -> str:
    """A new HTML file readable by its owner only (``mkstemp`` makes it 0600) that sends the
    browser on to ``link``; its path."""
    fd, path = tempfile.mkstemp(prefix="threadline-ui-", suffix=".html")
    with os.fdopen(fd, "w", encoding="utf-8") as f:
        f.write(move_on_page(link))
    return path


def make_server(config: UIConfig, sock: socket.socket, opened: Opened | None = None) -> uvicorn.Server:
    """A uvicorn server for ``config`` on the bound ``sock`` (``config.port`` set from it)."""
    config.port = sock.getsockname()[1]
    config.guard.port = config.port
    return uvicorn.Server(uvicorn.Config(create_app(config, opened), log_level="warning", timeout_graceful_shutdown=2))


def serve(config: UIConfig, *, open_browser: bool = True, announce: Callable[[str], None] = print) -> None:
    """Open the database, bind, announce the URL (``announce`` gets a few lines of text with
    it), open the browser unless told not to, and serve until interrupted.

    Raises OSError when the port is taken, ConfigError for a graph that cannot be
    loaded, BackendError for a database that cannot be opened (at startup).
    """
    with open_for_ui(config.db, read_only=config.read_only) as opened:
        sock = bind(config.host, config.port)
        server = make_server(config, sock, opened)
        link = url_of(config)
        mode = f"read-only: {opened.reason}" if opened.read_only else "actions on"
        with _stop_on_interrupt(server):
            announce(f"threadline ui for {masked(config.db)} ({mode}) at\n  {link}\nPress Ctrl+C to stop.")
            page = redirect_file(link) if open_browser else None
            try:
                if page:
                    threading.Timer(1.0, webbrowser.open, [Path(page).as_uri()]).start()
                server.run(sockets=[sock])
            finally:
                if page:
                    with contextlib.suppress(FileNotFoundError):
                        os.remove(page)


@contextlib.contextmanager
def _stop_on_interrupt(server: uvicorn.Server) -> Iterator[None]:
    """Ctrl+C (SIGINT) asks ``server`` to stop while uvicorn's own handler is not installed: from the
    announcement until it serves, and after it restores this one. Without it a Ctrl+C in that window
    raised KeyboardInterrupt wherever the main thread was, or let ``asyncio.run``'s handler cancel
    uvicorn's start-up half-way (a server that did not stop, seen once on a loaded machine); now it
    starts, stops at once and ``serve`` returns. Only in the main thread (where signals are handled)."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    previous = signal.signal(signal.SIGINT, lambda *_: setattr(server, "should_exit", True))
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, previous)
