"""The ASGI application: ``create_app(UIConfig)`` → a Starlette app.

The database is opened once for the app's lifetime (``db.open_for_ui``); endpoints are
plain functions run in Starlette's thread pool over the sync saver (which serializes
use of its connection). Pages are Jinja2 templates rendered on the server with
autoescape on; the few scripts in ``static/`` draw the branch graph and the charts and
poll for live updates.
"""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from pathlib import Path

from starlette.applications import Starlette
from starlette.exceptions import HTTPException
from starlette.middleware import Middleware
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Mount
from starlette.staticfiles import StaticFiles
from starlette.templating import Jinja2Templates

from threadline.backends.registry import masked
from threadline.errors import ConfigError, FilterError, NotFoundError, ThreadlineError, UnsafeOperationError
from threadline.read import load_graph
from threadline.web import actions, pages, runs
from threadline.web.db import Opened, open_for_ui
from threadline.web.render import template_globals
from threadline.web.respond import inbox_count
from threadline.web.security import CsrfError, Guard, GuardMiddleware

HERE = Path(__file__).parent
ERROR_STATUS = ((CsrfError, 403), (NotFoundError, 404), (UnsafeOperationError, 409))


@dataclass
class UIConfig:
    """What ``threadline ui`` serves.

    ``db``: a SQLite path or a ``sqlite:///``, ``postgresql://``, ``redis://…?prefix=`` or ``redis+cluster://…`` URL.
    ``read_only``: no actions, and the database is opened read-only (also chosen
    automatically when the database cannot be written). ``graph``: ``module:attr``
    of the agent's graph (a compiled graph, a ``StateGraph`` or a factory of one),
    which enables edit-and-branch, runs (answer an interrupt, replay, edit and run) and the
    agent's shape, and computes state with its reducers.
    ``host``: the interface to listen on; on loopback (or all interfaces) the app is reached at
    this run's own ``<random>.localhost`` name only (``guard.origin``, ``web.security``).
    ``poll_seconds``: how often pages check for new checkpoints.
    """

    db: str
    read_only: bool = False
    graph: str | None = None
    host: str = "127.0.0.1"
    port: int = 0
    poll_seconds: float = 2.0
    guard: Guard = field(init=False)

    def __post_init__(self) -> None:
        self.guard = Guard(port=self.port, bind_host=self.host)


def create_app(config: UIConfig, opened: Opened | None = None) -> Starlette:
    """The app for ``config``, on the database ``opened`` (else opened at startup, closed at shutdown).

    Raises ConfigError for a ``graph`` that cannot be loaded.
    """
    graph = load_graph(config.graph) if config.graph else None
    templates = Jinja2Templates(directory=str(HERE / "templates"))
    templates.env.globals.update(template_globals())

    @contextlib.asynccontextmanager
    async def lifespan(app: Starlette) -> AsyncIterator[None]:
        if opened is not None:
            app.state.db = opened
            yield
            return
        with open_for_ui(config.db, read_only=config.read_only) as mine:
            app.state.db = mine
            yield

    async def on_error(request: Request, exc: Exception) -> Response:
        if isinstance(exc, HTTPException):
            status, message = exc.status_code, str(exc.detail)
        else:
            status, message = next((s for t, s in ERROR_STATUS if isinstance(exc, t)), 400), str(exc)
        return templates.TemplateResponse(request, "error.html", {"message": message, "status": status}, status_code=status)

    app = Starlette(
        routes=[*pages.ROUTES, *actions.ROUTES, *runs.ROUTES, Mount("/static", StaticFiles(directory=str(HERE / "static")), name="static")],
        middleware=[Middleware(GuardMiddleware)],
        exception_handlers={
            HTTPException: on_error,
            CsrfError: on_error,
            ThreadlineError: on_error,
            ConfigError: on_error,
            FilterError: on_error,
            ValueError: on_error,
        },
        lifespan=lifespan,
    )
    app.state.config = config
    app.state.guard = config.guard
    app.state.graph = graph
    app.state.templates = templates
    app.state.db_label = masked(config.db)
    templates.env.globals["inbox_count"] = lambda: inbox_count(app.state.db.saver) if hasattr(app.state, "db") else None
    return app
