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

import ctypes
import functools
import hashlib
import logging
import pathlib
import re
import weakref
from collections.abc import Callable
from typing import Any, TypeVar, cast

import numpy as np

from plumb.kernel import contract as c
from plumb.kernel import numbacache

# numba reads NUMBA_CACHE_DIR when it is imported and when each cached function is decorated.
numbacache.configure()

import llvmlite.binding as ll  # type: ignore[import-untyped]  # noqa: E402  (numba's LLVM)
import numba  # noqa: E402  (after numbacache.configure(), see above)
from numba.core import caching  # noqa: E402
from numba.core.runtime import _nrt_python  # type: ignore[attr-defined]  # noqa: E402
from numba.misc.special import literally  # noqa: E402

__all__ = [
    "HIGHEST",
    "LOWEST",
    "MAX",
    "PLUGINS",
    "inline",
    "jit",
    "literally",
    "release_compiler_pages",
]

logger = logging.getLogger(__name__)

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

    def rebuild(self, target_context: Any, payload: Any) -> Any:
        """numba's, noting the loaded library and its linking bitcode (see _release_linking)."""
        result = super().rebuild(target_context, payload)  # type: ignore[no-untyped-call]
        _, kind, data = payload[0]  # the library's (name, "object", (object code, bitcode))
        if kind == "object":
            _loaded.append((weakref.ref(result.library), data[1]))
        return result


# Libraries loaded from the cache whose linking module may be parsed again on demand.
_loaded: list[tuple[weakref.ref[Any], bytes]] = []


def _release_linking() -> None:
    """Free the LLVM module numba parses from each cached library's bitcode and keeps, only to
    link the library into a caller compiled later; parse it again should one ever be compiled
    (``decide``'s is big: docs/performance.md#memory-peak-rss-vmhwm)."""
    while _loaded:
        ref, bitcode = _loaded.pop()
        library = ref()
        if library is not None and library._shared_module is not None:
            library._shared_module = None
            library._get_module_for_linking = functools.partial(_reparsed, library, bitcode)


def _reparsed(library: Any, bitcode: bytes) -> Any:
    if library._shared_module is None:
        library._shared_module = ll.parse_bitcode(bitcode)
    return library._shared_module


class _Cache(caching.FunctionCache):
    _impl_class = _CacheImpl

    def load_overload(self, sig: Any, target_context: Any) -> Any:
        """numba's ``load_overload`` without its ``target_context.refresh()``, which readies
        the context for compiling: it imports and registers every typing and lowering module
        of numba, and initialises the NRT, whose atomics it compiles with LLVM (the first
        LLVM compile of the process, which sets up LLVM's optimiser and code generator). A
        kernel loaded from the cache needs none of it, only the NRT's C functions to link
        against, and starts with a smaller resident set without it
        (docs/performance.md#memory-peak-rss-vmhwm). A miss compiles, and the compiler
        refreshes the context itself first."""
        _runtime_symbols()
        with self._guard_against_spurious_io_errors():
            return self._load_overload(sig, target_context)  # type: ignore[no-untyped-call]


@functools.cache
def _runtime_symbols() -> None:
    """Tell LLVM where the NRT's C functions are (the part of numba's ``rtsys.initialize``
    that cached code needs: the NRT functions written in LLVM IR are compiled into it)."""
    for name, address in _nrt_python.c_helpers.items():
        ll.add_symbol(name if name.startswith("_") else f"NRT_{name}", address)


_MADV_DONTNEED = 4  # linux/mman.h
_MAPPING = re.compile(r"^([0-9a-f]+)-([0-9a-f]+) (\S+) \S+ \S+ \S+\s*(.*)$")


def release_compiler_pages(smaps: pathlib.Path = pathlib.Path("/proc/self/smaps")) -> int:
    """Drop LLVM's code (llvmlite's shared library) from this process's resident set; the
    bytes dropped from the mappings (0 where there is no /proc).

    Importing numba runs LLVM's initialisers and loading the kernel runs its JIT linker, which
    leaves many of the library's pages resident, yet the compiled kernel never calls into LLVM
    again (docs/performance.md#memory-peak-rss-vmhwm). The pages are clean copies of the file
    (read-only mappings holding no page of their own, checked per mapping), so
    ``MADV_DONTNEED`` only unmaps them: a later compile faults back what it runs, from the page
    cache. Also frees the linking modules of the functions loaded from the cache (see
    _release_linking) and hands free heap memory back (``malloc_trim``). Call it after the
    imports and again after the kernel is loaded."""
    _release_linking()
    try:
        text = smaps.read_text()
        libc = ctypes.CDLL(None, use_errno=True)
    except OSError:
        return 0
    libc.madvise.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int]
    mappings: list[tuple[int, int, bool]] = []  # start, end, whether it may be dropped
    for line in text.splitlines():
        found = _MAPPING.match(line)
        if found:
            start, end, perms, path = found.groups()
            droppable = "w" not in perms and path.rsplit("/", 1)[-1].startswith("libllvmlite")
            mappings.append((int(start, 16), int(end, 16), droppable))
        elif line.startswith("Anonymous:") and mappings and int(line.split()[1]) != 0:
            # Copy-on-write pages (relocated data): dropping them would lose the relocations.
            start, end, _ = mappings[-1]
            mappings[-1] = (start, end, False)
    released = 0
    for start, end, droppable in mappings:
        if droppable and libc.madvise(start, end - start, _MADV_DONTNEED) == 0:
            released += end - start
    if hasattr(libc, "malloc_trim"):
        libc.malloc_trim(0)
    logger.debug("released %d MiB of LLVM mappings", released >> 20)
    return released
