"""How the compiled kernel's functions are compiled and cached, and what all its passes share.

Every module of the compiled kernel imports this one before anything else of numba's: it runs
``numbacache.configure()`` before ``import numba``, which is when numba reads
``NUMBA_CACHE_DIR`` (see numbacache). The kernel's other modules take numba from here and never
import it themselves.

The cache. numba caches a function with everything it calls compiled in, but checks only the
function's own source file for changes: edit a filter in ``compiled_filters`` and ``decide``
(in ``compiled_batch``) would go on loading the old filter from the cache, across restarts and
upgrades alike when the cache is on a volume (numba's documented limitation, numba#1833). So the
kernel's functions are cached with a stamp of every module their code is compiled from: the
``compiled_*.py`` modules beside this one and ``contract`` (whose constants are compiled in).
A change to any of them recompiles the whole kernel once; otherwise it loads from the cache.
"""

from __future__ import annotations

import functools
import hashlib
import pathlib
from collections.abc import Callable
from typing import Any, TypeVar, cast

import numpy as np

from plumb.kernel import contract as c
from plumb.kernel import numbacache

# numba reads NUMBA_CACHE_DIR when it is imported and when each cached function is decorated.
numbacache.configure()

import numba  # noqa: E402  (after numbacache.configure(), see above)
from numba.core import caching  # noqa: E402
from numba.misc.special import literally  # noqa: E402

__all__ = ["HIGHEST", "LOWEST", "MAX", "PLUGINS", "inline", "jit", "literally"]

_F = TypeVar("_F", bound=Callable[..., Any])

MAX = c.MAX_NODE_SCORE
PLUGINS = len(c.SCORE_PLUGINS)
LOWEST = np.iinfo(np.int64).min
HIGHEST = np.iinfo(np.int64).max


def jit(function: _F) -> _F:
    """``numba.njit(nogil=True, cache=True)``, typed for mypy (numba itself is untyped).

    ``error_model="numpy"``: a division by zero gives inf/nan instead of raising, which lets
    the dense loops vectorise; every result that could involve one is selected away.
    """
    return cast(_F, _cached(numba.njit(nogil=True, error_model="numpy")(function)))


def inline(function: _F) -> _F:
    """``jit``, inlined into its callers (a call per node would cost more than its body)."""
    jitted = numba.njit(nogil=True, error_model="numpy", inline="always")(function)
    return cast(_F, _cached(jitted))


def _cached(dispatcher: Any) -> Any:
    """``cache=True``, with the kernel's stamp in place of the function's file (see above)."""
    dispatcher._cache = _Cache(dispatcher.py_func)  # type: ignore[no-untyped-call]
    return dispatcher


@functools.cache
def _stamp() -> str:
    """A hash of every module the compiled functions come from (read once per process, as the
    functions are decorated)."""
    here = pathlib.Path(__file__).parent
    digest = hashlib.sha256()
    for path in sorted([here / "contract.py", *here.glob("compiled_*.py")]):
        digest.update(path.name.encode() + b"\0" + path.read_bytes() + b"\0")
    return digest.hexdigest()


class _Locator(caching.UserProvidedCacheLocator):
    """numba's locator for ``NUMBA_CACHE_DIR`` (which numbacache.configure() always sets),
    stamped with the whole kernel rather than one file."""

    def get_source_stamp(self) -> str:
        return _stamp()


class _CacheImpl(caching.CompileResultCacheImpl):
    # numba's own locators follow, as they would for cache=True, should the first not apply.
    # (numba's attribute: a list, read per instance.)
    _locator_classes = [_Locator, *caching.CompileResultCacheImpl._locator_classes]  # noqa: RUF012


class _Cache(caching.FunctionCache):
    _impl_class = _CacheImpl
