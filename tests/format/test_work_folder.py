"""An export stopped by a signal leaves nothing behind; a killed one's work folder goes at the next run."""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path
from types import SimpleNamespace

import pytest
from typer.testing import CliRunner

from modelexport_core.cli import app
from modelexport_core.export.fallback import first_success
from modelexport_core.format.signals import Stopped, deferred_signals, stop_on_signals
from modelexport_core.format.work_folder import (
    OWNER_FILE,
    Owner,
    close_work_folder,
    current_owner,
    open_work_folder,
    remove_stale_work_folders,
)

CLI = shutil.which("modelexport") or str(Path(sys.executable).with_name("modelexport"))
SLOW_MODEL = Path(__file__).with_name("slow_model.py")


def _work_folders(folder: Path) -> list[Path]:
    return [p for p in folder.iterdir() if p.name.startswith(".modelexport-") and p.is_dir()]


def _start_export(output: Path) -> subprocess.Popen:
    # SIGINT as a terminal and SIGTERM as a service manager would deliver them, even if this test runs under a
    # parent that ignores them (a background job ignores SIGINT; a CI runner may ignore SIGTERM, and a child
    # inherits that: the export then rightly keeps ignoring it)
    # a model whose every run takes seconds: the export is still running when the signal comes
    def default_handlers() -> None:
        for each in (signal.SIGINT, signal.SIGTERM):
            signal.signal(each, signal.SIG_DFL)

    return subprocess.Popen([CLI, "export", f"{SLOW_MODEL}:build", str(output)], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, preexec_fn=default_handlers)


def _wait_for_work_folder(process: subprocess.Popen, folder: Path, timeout: float = 240) -> Path:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        found = [p for p in _work_folders(folder) if (p / OWNER_FILE).exists()]
        if found:
            time.sleep(0.5)  # inside the export by now, not only at its first step
            return found[0]
        if process.poll() is not None:
            pytest.fail(f"the export ended ({process.returncode}) before its work folder appeared: {process.stderr.read()}")
        time.sleep(0.02)
    process.kill()
    pytest.fail("no work folder appeared")


@pytest.mark.parametrize(("signum", "code"), [(signal.SIGTERM, 143), (signal.SIGINT, 130)])
def test_a_signal_stops_an_export_and_removes_its_work_folder(tmp_path, signum, code):
    output = tmp_path / "bert.onnx"
    output.write_bytes(b"the previous export")
    process = _start_export(output)
    work = _wait_for_work_folder(process, tmp_path)
    assert (work / OWNER_FILE).read_text().split()[0] == str(process.pid)
    process.send_signal(signum)
    _, stderr = process.communicate(timeout=120)
    assert process.returncode == code
    lines = stderr.strip().splitlines()
    assert len(lines) == 1, stderr
    assert lines[0] == (f"error: stopped by {signal.Signals(signum).name}; nothing was written and no work "
                        "folder is left")
    assert _work_folders(tmp_path) == []
    assert output.read_bytes() == b"the previous export"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["bert.onnx"]


def test_the_next_run_removes_the_work_folder_of_a_killed_export(tmp_path):
    output = tmp_path / "bert.onnx"
    process = _start_export(output)
    work = _wait_for_work_folder(process, tmp_path)
    process.kill()
    process.communicate(timeout=60)
    assert work.is_dir()  # SIGKILL cannot be caught: the folder is left
    result = CliRunner().invoke(app, ["export", "preset:bert", str(output), "-s", "builtin_tracking", "--no-verify"])
    assert result.exit_code == 0, result.output
    assert f"removed 1 work folder(s) left in {tmp_path} by stopped export(s) (pid {process.pid})" in result.output
    assert _work_folders(tmp_path) == []
    assert output.is_file()


def _folder_owned_by(parent: Path, owner: Owner) -> Path:
    folder = parent / f".modelexport-{owner.pid}"
    folder.mkdir()
    (folder / OWNER_FILE).write_text(owner.line())
    (folder / "model.onnx.data").write_bytes(b"\0" * 1024)
    return folder


def test_a_running_exports_folder_is_kept(tmp_path):
    sleeper = subprocess.Popen(["sleep", "60"])
    try:
        stat = Path(f"/proc/{sleeper.pid}/stat").read_text()
        started = stat[stat.rindex(")") + 2:].split()[19]
        live = _folder_owned_by(tmp_path, Owner(sleeper.pid, started, current_owner().host))
        elsewhere = _folder_owned_by(tmp_path, Owner(1, "0", "another-host"))
        unowned = tmp_path / ".modelexport-unowned"
        unowned.mkdir()
        assert remove_stale_work_folders(tmp_path) == []
        assert live.is_dir() and elsewhere.is_dir() and unowned.is_dir()
    finally:
        sleeper.kill()
        sleeper.wait()
    with pytest.warns(UserWarning, match=f"removed 1 work folder.*pid {sleeper.pid}"):
        removed = remove_stale_work_folders(tmp_path)
    assert [folder for folder, _ in removed] == [live] and not live.exists()


def test_a_reused_pid_does_not_keep_a_folder(tmp_path):
    me = current_owner()
    reused = _folder_owned_by(tmp_path, Owner(me.pid, "1", me.host))  # this pid, another start time
    with pytest.warns(UserWarning, match="removed 1 work folder"):
        remove_stale_work_folders(tmp_path)
    assert not reused.exists()


def test_an_open_work_folder_records_its_owner_and_closes_to_nothing(tmp_path):
    folder = open_work_folder(tmp_path)
    assert Owner.parse((folder / OWNER_FILE).read_text()) == current_owner()
    assert remove_stale_work_folders(tmp_path) == []
    close_work_folder(folder)
    assert list(tmp_path.iterdir()) == []


def test_a_signal_while_files_move_into_place_takes_effect_after(tmp_path):
    moved = []
    with pytest.raises(Stopped) as stopped, stop_on_signals():
        with deferred_signals():
            os.kill(os.getpid(), signal.SIGTERM)
            time.sleep(0.1)
            moved.append("all")
    assert moved == ["all"] and stopped.value.exit_code == 143
    assert signal.getsignal(signal.SIGTERM) is signal.SIG_DFL


def _swallowing(stop: Stopped) -> None:
    raise RuntimeError(f"native code reporting {stop}")  # what a library calling back into Python may make of it


def test_a_stop_turned_into_another_error_by_a_strategy_stops_the_chain():
    tried = []

    def step(info: str) -> str:
        tried.append(info)
        try:
            os.kill(os.getpid(), signal.SIGTERM)
            time.sleep(0.1)
        except Stopped as stop:
            _swallowing(stop)
        return info

    with pytest.raises(Stopped) as stopped, stop_on_signals():
        first_success([SimpleNamespace(name="first"), SimpleNamespace(name="second")],
                      lambda info: step(info.name), [])
    assert tried == ["first"] and stopped.value.exit_code == 143


def test_a_stop_an_earlier_step_swallowed_keeps_the_files_from_moving_into_place():
    moved = []
    with pytest.raises(Stopped), stop_on_signals():
        try:
            os.kill(os.getpid(), signal.SIGTERM)
            time.sleep(0.1)
        except Stopped:
            pass  # an exception raised in a finalizer is printed, not raised
        with deferred_signals():
            moved.append("all")
    assert moved == []


def test_a_new_block_forgets_the_last_ones_stop():
    with pytest.raises(Stopped), stop_on_signals():
        os.kill(os.getpid(), signal.SIGTERM)
        time.sleep(0.1)
    with stop_on_signals(), deferred_signals():
        pass
    with deferred_signals():  # nor does a library call made outside one
        pass


class _Finalized:
    def __del__(self) -> None:
        os.kill(os.getpid(), signal.SIGTERM)
        time.sleep(0.1)  # the stop is raised here, where Python can only print it


def test_a_stop_raised_in_a_finalizer_prints_nothing_and_still_stops(capsys):
    with pytest.raises(Stopped), stop_on_signals():
        _Finalized()
        with deferred_signals():
            pass
    assert capsys.readouterr().err == ""
