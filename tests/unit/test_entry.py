"""``plumb run`` loads its kernel before kopf, aiohttp and the scheduler's modules (plumb.entry)."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap

# Runs in a fresh interpreter: this test process has imported everything already. It records,
# at each kernel warm-up, which of the big modules were imported, then runs the command.
_PROBE = textwrap.dedent(
    """
    import json, sys
    from plumb.kernel import compiled

    seen = []
    real = compiled.warm_up

    def recording():
        seen.append(sorted(m for m in ("kopf", "aiohttp", "plumb.app", "plumb.scheduler")
                           if m in sys.modules))
        return real()

    compiled.warm_up = recording
    from plumb import entry
    try:
        code = entry.main(sys.argv[1:])
    except SystemExit as exit:
        code = exit.code
    print(json.dumps({"code": code, "warm_ups": seen}))
    """
)


def _probe(*args: str) -> dict[str, object]:
    done = subprocess.run(
        [sys.executable, "-c", _PROBE, *args], capture_output=True, text=True, timeout=300
    )
    last = done.stdout.strip().splitlines()[-1]
    result: dict[str, object] = json.loads(last)
    return result


def test_run_loads_the_kernel_before_kopf_and_the_scheduler() -> None:
    result = _probe("run", "--kubeconfig", "/nonexistent/kubeconfig")
    # The command went on to the scheduler's start (and stopped there: no credentials), and
    # the first warm-up came before any of kopf, aiohttp or the scheduler was imported.
    assert result["code"] == 1
    warm_ups = result["warm_ups"]
    assert isinstance(warm_ups, list)
    assert warm_ups
    assert warm_ups[0] == []


def test_other_commands_do_not_load_the_kernel_first() -> None:
    for args in (["run", "--help"], ["explain", "--help"], ["cluster", "status", "--help"]):
        result = _probe(*args)
        assert result == {"code": 0, "warm_ups": []}, args
