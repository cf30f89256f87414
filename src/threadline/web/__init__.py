"""``threadline ui``: a local web app to browse and act on agent state (time travel).

``create_app(UIConfig(db=…))`` builds the ASGI app (Starlette); ``serve(config)`` binds
to loopback, prints the URL with this run's access token, opens the browser and runs
it with uvicorn. Modules: ``app`` (the app and its config), ``pages`` (read-only pages
and JSON), ``actions`` (rollback, fork, delete, prune, edit-and-branch, each previewed
then confirmed), ``queries`` (the extra read operations), ``layout`` (the branch-graph
layout), ``render`` (template helpers), ``security`` (token, CSRF, headers), ``db``
(opening read-only), ``server`` (uvicorn).
"""

from threadline.extras import require

require("ui", "the web app (threadline ui)")  # before Starlette's imports: one line when it is missing

from threadline.web.app import UIConfig, create_app  # noqa: E402
from threadline.web.server import serve  # noqa: E402

__all__ = ["UIConfig", "create_app", "serve"]
