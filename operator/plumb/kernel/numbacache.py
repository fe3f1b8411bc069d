"""Where numba keeps the compiled kernel between runs (``NUMBA_CACHE_DIR``).

numba reads ``NUMBA_CACHE_DIR`` into ``numba.core.config`` when it is first imported, and picks
a cache location for each ``cache=True`` function when the function is decorated. Without a
writable location it falls back to ``__pycache__`` beside the source, which is read-only in the
container, and then refuses to cache at all. So ``configure()`` must run before ``import numba``
(``kernel.compiled_jit``, the only module that imports numba, calls it first thing); if numba
was imported earlier anyway, it asks numba to re-read its environment.

Resolution: an explicit ``NUMBA_CACHE_DIR`` is used as it is (and must be writable: an operator
who set it wants it, not a silent fallback); otherwise the first writable of
``$XDG_CACHE_HOME/plumb/numba`` (``~/.cache/plumb/numba``) and ``<tmp>/plumb-numba-<uid>``.
"""

from __future__ import annotations

import os
import pathlib
import sys
import tempfile
from collections.abc import Mapping, MutableMapping, Sequence

VARIABLE = "NUMBA_CACHE_DIR"


class KernelCacheError(RuntimeError):
    """No writable directory for numba's cache."""


def default_locations(environ: Mapping[str, str]) -> tuple[pathlib.Path, ...]:
    """Where the cache goes when ``NUMBA_CACHE_DIR`` is not set, in order of preference."""
    xdg = environ.get("XDG_CACHE_HOME")
    home = pathlib.Path(xdg) if xdg else pathlib.Path.home() / ".cache"
    user = os.getuid() if hasattr(os, "getuid") else "user"
    return (
        home / "plumb" / "numba",
        pathlib.Path(tempfile.gettempdir()) / f"plumb-numba-{user}",
    )


def writable(path: pathlib.Path) -> str | None:
    """None when ``path`` exists (or can be made) and accepts a new file; else why not."""
    try:
        path.mkdir(parents=True, exist_ok=True)
        # os.access is not enough: it misses read-only mounts under some runtimes.
        handle, probe = tempfile.mkstemp(prefix=".plumb-probe-", dir=path)
        os.close(handle)
        os.unlink(probe)
    except OSError as error:
        return f"{type(error).__name__}: {error.strerror or error}"
    return None


def configure(
    environ: MutableMapping[str, str] | None = None,
    *,
    defaults: Sequence[pathlib.Path] | None = None,
) -> pathlib.Path:
    """Choose the cache directory, export it as ``NUMBA_CACHE_DIR`` and return it.

    ``environ`` defaults to ``os.environ``; tests pass a dict (and then numba is not touched).
    Raises ``KernelCacheError`` naming every path tried when none is writable.
    """
    env = os.environ if environ is None else environ
    explicit = env.get(VARIABLE)
    if explicit:
        candidates: Sequence[pathlib.Path] = (pathlib.Path(explicit),)
    else:
        candidates = defaults if defaults is not None else default_locations(env)
    failures = []
    for candidate in candidates:
        problem = writable(candidate)
        if problem is None:
            env[VARIABLE] = str(candidate)
            if environ is None:
                _refresh_numba()
            return candidate
        failures.append(f"{candidate} ({problem})")
    tried = "; ".join(failures) or "no candidate paths"
    if explicit:
        advice = f"point {VARIABLE} at a writable directory (a volume in the pod)"
    else:
        advice = f"set {VARIABLE} to a writable directory (a volume in the pod)"
    raise KernelCacheError(f"no writable directory for the numba cache: tried {tried}; {advice}")


def _refresh_numba() -> None:
    """numba read its environment when imported; if that already happened, make it read again."""
    config = sys.modules.get("numba.core.config")
    if config is not None:
        config.reload_config()
