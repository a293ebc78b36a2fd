"""The web dashboard: `create_app` builds the ASGI app, `serve` runs it with uvicorn.

Needs the `dashboard` extra (starlette, uvicorn). Nothing else in tallyboard imports this package.
"""

from tallyboard.dashboard.app import create_app
from tallyboard.dashboard.server import serve

__all__ = ["create_app", "serve"]
