"""Collect under faults, on a stubbed GPU (fake_collect: the real runner around fake phases): two
collects at once, a phase file truncated behind a manifest that calls it complete, a run id that
climbs out of --out, and kill -9 at random moments followed by --resume."""
import json
import random
import signal
import subprocess
import sys
import time
import types
from pathlib import Path

import pytest

from collect import cli
from hostile import fake_collect

FAKE = Path(fake_collect.__file__)


def _start(out: Path, *args: str) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, str(FAKE), str(out), *args], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)


def _rows(out: Path) -> list[dict]:
    path = out / fake_collect.RUN_ID / "bench.json"
    return json.loads(path.read_text())["rows"] if path.exists() else []


def _wait_for(path: Path, proc: subprocess.Popen, timeout: float = 60) -> None:
    deadline = time.monotonic() + timeout
    while not path.exists():
        if proc.poll() is not None or time.monotonic() > deadline:
            proc.kill()
            pytest.fail(f"the first collect never reached its bench phase:\n{proc.communicate()[1][-2000:]}")
        time.sleep(0.02)


def test_a_second_collect_into_the_same_run_is_refused_with_the_holders_pid(tmp_path, monkeypatch, capsys):
    gate = tmp_path / "first-is-measuring"
    first = _start(tmp_path, "--wait-for", str(gate))
    try:
        _wait_for(gate, first)
        fake_collect.install(monkeypatch.setattr, attempt=1)
        before = {p.name: p.read_bytes() for p in (tmp_path / fake_collect.RUN_ID).iterdir() if p.is_file()}
        with pytest.raises(RuntimeError) as err:
            fake_collect.collect(tmp_path, "bench", resume=True)
        assert str(first.pid) in str(err.value) and fake_collect.RUN_ID in str(err.value), str(err.value)
        after = {p.name: p.read_bytes() for p in (tmp_path / fake_collect.RUN_ID).iterdir() if p.is_file()
                 and p.name in before}
        assert after == before, "the refused collect changed the run"
        gate.unlink()  # the first collect goes on and finishes every case
        assert first.wait(timeout=120) == 0, first.communicate()[1][-2000:]
    finally:
        if first.poll() is None:
            first.kill()
    assert [r["seq_len"] for r in _rows(tmp_path)] == list(fake_collect.SEQ)


def test_the_cli_names_the_holder_of_the_run(tmp_path, monkeypatch, capsys):
    gate = tmp_path / "first-is-measuring"
    first = _start(tmp_path, "--wait-for", str(gate))
    try:
        _wait_for(gate, first)
        fake_collect.install(monkeypatch.setattr)
        code = cli.main(["bench", "--run-id", fake_collect.RUN_ID, "--out", str(tmp_path), "--resume"])
        err = capsys.readouterr().err
        assert code == 2 and str(first.pid) in err and "another collect" in err, err
    finally:
        first.kill()
        first.wait()


def test_a_lock_file_that_is_not_a_file_is_refused_without_following_it(tmp_path, monkeypatch):
    fake_collect.install(monkeypatch.setattr)
    run_dir = tmp_path / fake_collect.RUN_ID
    run_dir.mkdir()
    (run_dir / ".collect.lock").symlink_to(tmp_path / "elsewhere")
    with pytest.raises(RuntimeError, match="lock file"):
        fake_collect.collect(tmp_path)
    assert not (tmp_path / "elsewhere").exists() and not (run_dir / "manifest.json").exists()


def test_kill_9_releases_the_run_and_resume_continues(tmp_path, monkeypatch):
    gate = tmp_path / "first-is-measuring"
    first = _start(tmp_path, "--wait-for", str(gate))
    _wait_for(gate, first)
    first.send_signal(signal.SIGKILL)
    first.wait()
    fake_collect.install(monkeypatch.setattr, attempt=1)
    assert fake_collect.collect(tmp_path, "bench", resume=True) == 0
    assert len(_rows(tmp_path)) == len(fake_collect.SEQ)


def test_a_truncated_phase_file_the_manifest_calls_complete_is_not_skipped(tmp_path, monkeypatch, capsys):
    fake_collect.install(monkeypatch.setattr)
    assert fake_collect.collect(tmp_path) == 0
    path = tmp_path / fake_collect.RUN_ID / "bench.json"
    path.write_bytes(path.read_bytes()[: path.stat().st_size // 2])
    cut = path.read_bytes()
    code = fake_collect.collect(tmp_path, "bench", resume=True)
    err = capsys.readouterr().err
    assert "already complete" not in err, err
    if code == 0:  # measured again: every row is back
        assert [r["seq_len"] for r in _rows(tmp_path)] == list(fake_collect.SEQ)
    else:  # refused: the file is named and left as it was
        assert "bench.json" in err and path.read_bytes() == cut, err


@pytest.mark.parametrize("run_id", ["../escaped", "a/../../b", "/tmp/abs", ".hidden", "x" * 81])
def test_a_run_id_that_is_not_a_slug_is_refused_before_anything_is_written(tmp_path, monkeypatch, run_id):
    fake_collect.install(monkeypatch.setattr)
    out = tmp_path / "out" / "runs"
    with pytest.raises(ValueError, match="run.id"):
        fake_collect.collect(out, run_id=run_id)
    assert not any(p.is_file() for p in tmp_path.rglob("*")), sorted(tmp_path.rglob("*"))


def test_the_cli_refuses_a_run_id_that_climbs_out(tmp_path, monkeypatch, capsys):
    fake_collect.install(monkeypatch.setattr)
    assert cli.main(["env", "--run-id", "../escaped", "--out", str(tmp_path / "runs")]) == 2
    assert "../escaped" in capsys.readouterr().err
    assert not any(p.is_file() for p in tmp_path.rglob("*"))


def test_kill_9_at_random_moments_then_resume_loses_no_saved_row(tmp_path):
    """Each attempt measures with its own number in warmup_s; a saved row must never come back changed,
    every file must parse after every kill, and the last --resume completes the grid."""
    rng = random.Random(40)
    seen: dict[int, dict] = {}
    for attempt in range(1, 13):
        proc = _start(tmp_path, "--resume", "--attempt", str(attempt), "--delay", "0.002")
        time.sleep(rng.uniform(0.3, 1.2))
        proc.send_signal(signal.SIGKILL)
        proc.wait()
        for f in (tmp_path / fake_collect.RUN_ID).glob("*.json") if (tmp_path / fake_collect.RUN_ID).exists() else []:
            json.loads(f.read_text())  # whole, never half a file
        now = {r["seq_len"]: r for r in _rows(tmp_path)}
        lost = [n for n in seen if now.get(n) != seen[n]]
        assert not lost, f"attempt {attempt}: saved rows lost or changed: {lost}"
        seen.update(now)
    proc = _start(tmp_path, "--resume", "--attempt", "99")
    out, err = proc.communicate(timeout=120)
    assert proc.returncode == 0, err[-2000:]
    final = {r["seq_len"]: r for r in _rows(tmp_path)}
    assert sorted(final) == list(fake_collect.SEQ)
    assert all(final[n] == seen[n] for n in seen)
    m = json.loads((tmp_path / fake_collect.RUN_ID / "manifest.json").read_text())
    assert next(p for p in m["phases"] if p["name"] == "bench")["status"] == "complete"
    assert not list((tmp_path / fake_collect.RUN_ID).glob(".*.tmp"))


def test_a_tools_hostile_error_text_is_written_as_the_build_can_read_it(tmp_path, monkeypatch):
    """An exception's text is the tool's, not ours: ESC from a coloured log, a reversing mark, and more text
    than a field holds. Collect writes the characters as code points and clips the text to its bound, so
    the run it leaves validates, and the error still says what happened."""
    from collect import runner
    from render.runs import load_run

    fake_collect.install(monkeypatch.setattr)
    real = runner.phase_module

    def failing(name):
        if name != "bench":
            return real(name)

        def run(ctx):
            raise RuntimeError("\x1b[31mCUDA error\x1b[0m in \u202ekernel " + "x" * 50_000)
        return types.SimpleNamespace(run=run)
    monkeypatch.setattr(runner, "phase_module", failing)
    assert fake_collect.collect(tmp_path) == 1
    run = load_run(tmp_path / fake_collect.RUN_ID)
    error = run.phase_record("bench").error
    assert error.startswith("RuntimeError: <U+001B>[31mCUDA error<U+001B>[0m in <U+202E>kernel xxx")
    assert error.endswith(" [...]")
    assert (run.path / ".collect.lock").is_file() and all(p.name != ".collect.lock" for p in run.files)
