"""What ``plumb run`` carries from start: no ``kubernetes`` package (its generated client is
~20 MiB resident), and a kernel loaded from numba's cache without readying numba to compile.

Each check runs in a fresh interpreter, since the test process has imported everything."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any


def _python(code: str, *, env: dict[str, str] | None = None, cwd: Path | None = None) -> Any:
    """Run ``code`` in a new interpreter; the JSON it prints last."""
    done = subprocess.run(
        [sys.executable, "-c", textwrap.dedent(code)],
        capture_output=True,
        text=True,
        check=True,
        env={**os.environ, **(env or {})},
        cwd=cwd,
        timeout=300,
    )
    return json.loads(done.stdout.strip().splitlines()[-1])


def test_the_run_command_imports_no_kubernetes_package() -> None:
    imported = _python(
        """
        import json, sys
        import plumb.cli, plumb.app.runtime, kopf
        print(json.dumps(sorted(m for m in sys.modules if m.split(".")[0] == "kubernetes")))
        """
    )
    assert imported == []


def test_kopf_still_works_when_the_kubernetes_client_was_imported_first() -> None:
    # A test run imports the kubernetes client before plumb.app: kopf then uses it as usual.
    found = _python(
        """
        import json, sys
        import kubernetes.client
        import plumb.app
        from kopf._cogs.helpers import thirdparty
        print(json.dumps(thirdparty.V1ObjectMetaSync is not None))
        """
    )
    assert found is True


_TINY = textwrap.dedent(
    """
    import numpy as np
    from plumb.kernel.compiled_jit import jit

    @jit
    def doubled_sum(values):
        out = np.zeros(values.shape[0], dtype=np.int64)  # an NRT allocation
        for i in range(values.shape[0]):
            out[i] = 2 * values[i]
        return out.sum()
    """
)


def test_a_cached_kernel_function_loads_without_numba_readying_itself_to_compile(
    tmp_path: Path,
) -> None:
    (tmp_path / "memtiny.py").write_text(_TINY)
    code = """
        import json, sys
        import numpy as np
        import memtiny
        from numba.core.runtime import nrt
        result = int(memtiny.doubled_sum(np.arange(5, dtype=np.int64)))
        stats = memtiny.doubled_sum.stats
        print(json.dumps({
            "result": result,
            "hits": sum(stats.cache_hits.values()),
            "misses": sum(stats.cache_misses.values()),
            "compiler_ready": nrt.rtsys._init or "numba.np.npyimpl" in sys.modules,
        }))
        """
    env = {"NUMBA_CACHE_DIR": str(tmp_path / "cache"), "PYTHONPATH": _path_with(tmp_path)}
    first = _python(code, env=env, cwd=tmp_path)
    assert first == {"result": 20, "hits": 0, "misses": 1, "compiler_ready": True}
    second = _python(code, env=env, cwd=tmp_path)
    assert second == {"result": 20, "hits": 1, "misses": 0, "compiler_ready": False}


def test_llvm_pages_are_released_and_the_kernel_still_runs(tmp_path: Path) -> None:
    code = """
        import json
        import numpy as np
        import memtiny
        from plumb.kernel import compiled_jit

        def resident():
            for line in open("/proc/self/status"):
                if line.startswith("VmRSS:"):
                    return int(line.split()[1])

        before = memtiny.doubled_sum(np.arange(5, dtype=np.int64))
        rss = resident()
        released = compiled_jit.release_compiler_pages()
        after = memtiny.doubled_sum(np.arange(7, dtype=np.int64))
        print(json.dumps([int(before), int(after), released > 0, resident() < rss]))
        """
    (tmp_path / "memtiny.py").write_text(_TINY)
    env = {"NUMBA_CACHE_DIR": str(tmp_path / "cache"), "PYTHONPATH": _path_with(tmp_path)}
    assert _python(code, env=env, cwd=tmp_path) == [20, 42, True, True]


def _path_with(directory: Path) -> str:
    return os.pathsep.join([str(directory), *sys.path])


def test_a_function_compiled_after_the_release_still_links_a_cached_one(tmp_path: Path) -> None:
    (tmp_path / "memtiny.py").write_text(_TINY)
    env = {"NUMBA_CACHE_DIR": str(tmp_path / "cache"), "PYTHONPATH": _path_with(tmp_path)}
    code = """
        import json
        import numba
        import numpy as np
        import memtiny
        from plumb.kernel import compiled_jit

        memtiny.doubled_sum(np.arange(3, dtype=np.int64))  # loaded from the cache (2nd run)
        compiled_jit.release_compiler_pages()

        @numba.njit
        def caller(values):  # compiled now, linking the cached function's library in
            return memtiny.doubled_sum(values) + 1

        print(json.dumps(int(caller(np.arange(4, dtype=np.int64)))))
        """
    assert _python(code, env=env, cwd=tmp_path) == 13
    assert _python(code, env=env, cwd=tmp_path) == 13
