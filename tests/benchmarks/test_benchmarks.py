"""The overhead benchmark runs end to end (a smoke run: its figures are not checked, timings are the machine's)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_overhead_quick_run_writes_a_table(tmp_path):
    output = tmp_path / "overhead.md"
    completed = subprocess.run(
        [sys.executable, str(ROOT / "benchmarks" / "overhead.py"), "--quick", "--output", str(output)],
        capture_output=True, text=True, cwd=ROOT, check=False, timeout=600,
    )
    assert completed.returncode == 0, completed.stderr[-2000:]
    rows = [line for line in output.read_text().splitlines() if line.startswith("| tiny-bert")]
    assert len(rows) == 1 and "builtin_tracking" in rows[0] and "failed" not in rows[0]
    ratios = [cell.strip(" *") for cell in rows[0].split("|")[6:10:3]]  # time ratio, memory ratio
    assert all(float(ratio) > 0 for ratio in ratios)
