"""The command's allocator setting: freed large buffers are reused, not faulted in again (Linux, glibc)."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

pytestmark = [pytest.mark.unit, pytest.mark.skipif(not sys.platform.startswith("linux"), reason="glibc only")]

PROBE = """
import resource, sys
from modelexport_core.export.allocator import keep_freed_buffers
tuned = keep_freed_buffers() if sys.argv[1] == "tune" else False
before = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
for _ in range(8):  # what an export does: a large buffer filled, freed, another of the size filled
    buffer = bytearray(64 << 20)
    del buffer
print(int(tuned), resource.getrusage(resource.RUSAGE_SELF).ru_minflt - before)
"""


def _probe(mode: str, **env: str) -> tuple[bool, int]:
    clean = {k: v for k, v in os.environ.items() if not k.startswith(("MALLOC_", "MODELEXPORT_SYSTEM_MALLOC"))}
    out = subprocess.run([sys.executable, "-c", PROBE, mode], env={**clean, **env}, capture_output=True, text=True,
                         check=True).stdout.split()
    return out[0] == "1", int(out[1])


def test_freed_buffers_are_reused_instead_of_faulted_in_again() -> None:
    tuned, tuned_faults = _probe("tune")
    untuned, untuned_faults = _probe("plain")
    assert tuned and not untuned
    # 8 x 64 MB is 131,072 pages touched afresh by default; reused, the pages of about one buffer
    assert untuned_faults > 100_000
    assert tuned_faults < untuned_faults / 4


@pytest.mark.parametrize("env", [{"MODELEXPORT_SYSTEM_MALLOC": "1"}, {"MALLOC_ARENA_MAX": "4"}])
def test_a_users_own_setting_is_left_alone(env: dict[str, str]) -> None:
    tuned, faults = _probe("tune", **env)
    assert not tuned
    if "MALLOC_ARENA_MAX" not in env:
        assert faults > 100_000
