"""WhiteNoise's walk of the static files, done once per test process.

Django's test `Client` loads the middleware anew for every client it makes, and with
`WHITENOISE_USE_FINDERS` WhiteNoise then walks, stats and builds a responder for every
static file the finders list (169 of them, about 60 ms a client on a slow machine). A
server does that once per process. The files do not change while the suite runs, so the
responders one walk built serve every later middleware with the same configuration.
"""

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

from django.conf import settings
from whitenoise.middleware import WhiteNoiseMiddleware


def _configuration(middleware: WhiteNoiseMiddleware) -> tuple:
    """What the walk's responders depend on: where the files come from and how they are
    served."""
    return (
        middleware.static_prefix,
        middleware.max_age,
        middleware.allow_all_origins,
        middleware.charset,
        middleware.add_headers_function,
        middleware.index_file,
        tuple(settings.INSTALLED_APPS),
        tuple(map(str, getattr(settings, "STATICFILES_DIRS", ()))),
        tuple(settings.STATICFILES_FINDERS),
    )


def _walk_once(walk: Callable[[WhiteNoiseMiddleware], None]) -> Callable[..., None]:
    walked: dict[tuple, dict[str, Any]] = {}

    def add_files_from_finders(middleware: WhiteNoiseMiddleware) -> None:
        key = _configuration(middleware)
        if key not in walked:
            before = dict(middleware.files)
            walk(middleware)
            walked[key] = {
                url: responder
                for url, responder in middleware.files.items()
                if before.get(url) is not responder
            }
        middleware.files.update(walked[key])

    return add_files_from_finders


@contextmanager
def static_files_walked_once() -> Iterator[None]:
    original = WhiteNoiseMiddleware.add_files_from_finders
    WhiteNoiseMiddleware.add_files_from_finders = _walk_once(original)
    try:
        yield
    finally:
        WhiteNoiseMiddleware.add_files_from_finders = original
