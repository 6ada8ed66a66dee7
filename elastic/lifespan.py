"""What the ptc services (the elastic manager, the Slurm client) share: a FastAPI lifespan
that runs the service's own loop in the background while the app serves, and stops it with it."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import AbstractAsyncContextManager
from typing import Any


def lifespan_running(
    loop: Callable[[], Awaitable[None]] | None,
) -> Callable[[Any], AbstractAsyncContextManager[None]]:
    """A lifespan that runs ``loop()`` as a task for as long as the app runs (none if None)."""

    @contextlib.asynccontextmanager
    async def lifespan(_: Any) -> AsyncIterator[None]:
        task: asyncio.Future[None] | None = None
        if loop is not None:
            task = asyncio.ensure_future(loop())
        try:
            yield
        finally:
            if task is not None:
                task.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await task

    return lifespan
