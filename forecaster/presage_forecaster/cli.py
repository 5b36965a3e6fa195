"""``presage-forecaster``: parse the settings, serve the app with uvicorn, exit 1 if the model fails to load."""

from __future__ import annotations

import logging
import sys
from collections.abc import Sequence

import uvicorn

from presage_forecaster.app import create_app
from presage_forecaster.settings import parse_settings


def main(argv: Sequence[str] | None = None) -> None:
    """Run the server until SIGTERM; exit non-zero when the model cannot be loaded."""
    settings = parse_settings(argv)
    logging.basicConfig(
        level=settings.log_level.upper(),
        format="time=%(asctime)s level=%(levelname)s logger=%(name)s msg=%(message)s",
        stream=sys.stderr,
    )
    failure: list[str] = []
    server: uvicorn.Server | None = None

    def on_fatal(reason: str) -> None:
        failure.append(reason)
        if server is not None:
            server.should_exit = True

    app = create_app(settings, on_fatal=on_fatal)
    config = uvicorn.Config(
        app,
        host=settings.host,
        port=settings.port,
        log_level=settings.log_level,
        access_log=False,  # one structured line per forecast is logged by the app instead
        timeout_graceful_shutdown=10,
    )
    server = uvicorn.Server(config)
    server.run()
    if failure:
        print(f"presage-forecaster: {failure[0]}", file=sys.stderr)
        sys.exit(1)
