"""The ``plumb`` command's entry point: ``plumb run`` loads its kernel before the rest of plumb.

A scheduler's peak resident set is reached at its start. Importing numba and loading the
kernel from numba's cache touch LLVM's code for a moment (dropped right after by
``compiled_jit.release_compiler_pages``, since the loaded kernel never calls LLVM again). Done
before kopf, aiohttp and the scheduler's own modules are imported, that passing bulge sits on
a smaller resident set, which lowers ``plumb run``'s peak (docs/performance.md#start-up-memory).
Every other command imports the kernel only if it uses it.
"""

from __future__ import annotations

import sys
from collections.abc import Sequence


def main(argv: Sequence[str] | None = None) -> int:
    """Run the ``plumb`` command line (``plumb.cli``), the kernel loaded first for ``run``."""
    args = list(sys.argv[1:] if argv is None else argv)
    if args[:1] == ["run"] and not {"-h", "--help"} & set(args):
        load_kernel()
    from plumb import cli  # after the kernel: the point of this module

    return cli.main(args)


def load_kernel() -> None:
    """Load (or compile) the kernel with only numpy and numba imported, LLVM's pages dropped
    before and after; ``compiled.warm_up`` remembers how long it took for the log."""
    from plumb.kernel import compiled, compiled_jit

    compiled_jit.release_compiler_pages()
    compiled.warm_up()
    compiled_jit.release_compiler_pages()
