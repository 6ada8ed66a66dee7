"""The live page of the pool on the workstation: a local HTTP server that forwards the page's
requests to the active elastic manager, presenting a token the browser never sees.

The managers serve the page (``/ui``), its document (``/v1/view``) and its events
(``/v1/view/stream``) behind their tokens, on the experiment's LAN. A browser can neither reach
that LAN nor attach a bearer token to a page it opens, so ``ptc elastic ui`` runs this server on
the workstation's loopback, reaching the managers through ``elastic.manager.workstation`` (SSH
forwards) as the observer, whose token only reads. Each request goes to the manager that is
active now; the event stream begins with an ``event: manager`` naming it, so the page can say
when a failover moved it to another manager. With no manager active the stream says so
(``event: unavailable``) and ends, and the browser's EventSource connects again.
"""

from __future__ import annotations

import contextlib
import json
from collections.abc import Iterator

from starlette.applications import Starlette
from starlette.concurrency import run_in_threadpool
from starlette.requests import Request
from starlette.responses import RedirectResponse, Response, StreamingResponse
from starlette.routing import Route

from elastic.errors import PtcError
from elastic.manager.client import ManagerClient

PAGE = "/ui"
VIEW = "/v1/view"
STREAM = "/v1/view/stream"
# The manager sends a document at least every ten seconds: a quiet minute means it is gone.
STREAM_READ_TIMEOUT = 60.0
FORWARDED_HEADERS = (
    "content-type",
    "cache-control",
    "www-authenticate",
    "content-security-policy",
    "x-content-type-options",
)


def create_app(client: ManagerClient) -> Starlette:
    """The page's routes, each forwarded to ``client``'s active manager."""

    def fetch(path: str) -> Response:
        try:
            with client.streamed(path, read_timeout=10.0) as (_, answer):
                body = answer.read()
                headers = {k: v for k, v in answer.headers.items() if k in FORWARDED_HEADERS}
                return Response(body, status_code=answer.status_code, headers=headers)
        except PtcError as err:
            return Response(f"no elastic manager answered: {err}\n", status_code=502)

    async def page(request: Request) -> Response:
        asset = request.path_params.get("asset")
        return await run_in_threadpool(fetch, f"{PAGE}/{asset}" if asset else PAGE)

    async def view(request: Request) -> Response:
        return await run_in_threadpool(fetch, VIEW)

    async def stream(request: Request) -> Response:
        stack = contextlib.ExitStack()
        try:
            base, answer = await run_in_threadpool(
                stack.enter_context, client.streamed(STREAM, STREAM_READ_TIMEOUT)
            )
        except PtcError as err:
            stack.close()
            message = json.dumps({"message": str(err)})
            return StreamingResponse(
                iter([f"retry: 2000\n\nevent: unavailable\ndata: {message}\n\n".encode()]),
                media_type="text/event-stream",
            )
        if answer.status_code != 200:
            body = await run_in_threadpool(answer.read)
            stack.close()
            return Response(body, status_code=answer.status_code)

        def relay() -> Iterator[bytes]:
            with stack:
                yield f"event: manager\ndata: {json.dumps({'url': base})}\n\n".encode()
                try:
                    yield from answer.iter_bytes()
                except Exception:  # the manager went away mid-stream: the browser reconnects
                    return

        return StreamingResponse(
            relay(), media_type="text/event-stream", headers={"Cache-Control": "no-store"}
        )

    async def root(request: Request) -> Response:
        return RedirectResponse(PAGE)

    async def no_icon(request: Request) -> Response:
        return Response(status_code=204)  # the page has none; the browser asks all the same

    return Starlette(
        routes=[
            Route("/", root),
            Route("/favicon.ico", no_icon),
            Route(PAGE, page),
            Route(PAGE + "/{asset}", page),
            Route(VIEW, view),
            Route(STREAM, stream),
        ]
    )
