"""`make serve` with data that stops validating: it keeps serving the last good site with the error on
every page, and `mkdocs build --strict` still fails with the message."""
import html
import json
import os
import socket
import subprocess
import sys
import threading
import time
import types
import urllib.request

import pytest
from mkdocs.exceptions import PluginError

import synthetic
from conftest import ROOT, mkdocs_build
from render import mkdocs_hook


def _config():
    return {"extra": {"run": ""}}


def _page(src="index.md", title="Home"):
    return types.SimpleNamespace(file=types.SimpleNamespace(src_uri=src), title=title)


def _break(run_dir):
    m = json.loads((run_dir / "manifest.json").read_text())
    m["device"]["sm_count"] = "<img src=x onerror=alert(1)>"  # the message quotes it
    (run_dir / "manifest.json").write_text(json.dumps(m))


@pytest.fixture
def hook(monkeypatch, tmp_path):
    monkeypatch.setattr(mkdocs_hook, "DATA_DIR", tmp_path)
    monkeypatch.setattr(mkdocs_hook, "_report", None)
    monkeypatch.setattr(mkdocs_hook, "_error", None)
    return mkdocs_hook


def test_serve_keeps_the_last_good_data_and_shows_the_error(hook, tmp_path):
    run_dir = synthetic.make_run(tmp_path, "good-1")
    hook.on_startup(command="serve", dirty=False)
    hook.on_config(_config())
    good = hook._report
    _break(run_dir)
    cfg = hook.on_config(_config())  # a rebuild after the file changed: no exception
    assert hook._report is good and cfg["extra"]["report_run"] == "good-1"
    out = hook.on_page_markdown("# Home\n\nRun {{ run.id }}.\n", _page(), cfg, None)
    shown = html.unescape(out)
    assert out.startswith("# Home\n") and "Run good-1." in out  # the last good data, still served
    assert "does not validate" in shown and "device.sm_count" in shown
    assert "<img" not in out and "<img" in shown  # the error quotes data: escaped, yet readable


def test_serve_before_any_data_validated_shows_the_error_on_every_page(hook, tmp_path):
    _break(synthetic.make_run(tmp_path, "bad-1"))
    hook.on_startup(command="serve", dirty=False)
    cfg = hook.on_config(_config())
    assert hook._report is None and cfg["extra"]["report_provenance"] is None
    out = html.unescape(hook.on_page_markdown("# Home\n\n{{ home.headlines() }}\n", _page(), cfg, None))
    assert "does not validate" in out and "device.sm_count" in out and "{{" not in out


def _nest(run_dir):
    m = json.loads((run_dir / "manifest.json").read_text())
    (run_dir / "manifest.json").write_text(json.dumps(m)[:-1] + ', "notes": ' + "[" * 10_000 + "]" * 10_000 + "}")


def _fifo(run_dir):
    (run_dir / "manifest.json").unlink()
    os.mkfifo(run_dir / "manifest.json")


def _within(fn, seconds=60):
    """fn() in a thread; fails the test (instead of hanging it) when it does not return in time."""
    box = {}

    def target():
        try:
            box["out"] = fn()
        except BaseException as exc:  # noqa: BLE001 - raised again in the test's thread
            box["error"] = exc
    t = threading.Thread(target=target, daemon=True)
    t.start()
    t.join(seconds)
    if t.is_alive():
        pytest.fail(f"did not return in {seconds} s: serve hangs")
    if "error" in box:
        raise box["error"]
    return box.get("out")


@pytest.mark.parametrize("attack", [_nest, _fifo], ids=["nested 10,000 deep", "FIFO"])
def test_serve_survives_a_file_that_attacks_the_reader_and_recovers(hook, tmp_path, attack):
    run_dir = synthetic.make_run(tmp_path, "good-2")
    good_text = (run_dir / "manifest.json").read_text()
    hook.on_startup(command="serve", dirty=False)
    hook.on_config(_config())
    good = hook._report
    try:
        attack(run_dir)
        cfg = _within(lambda: hook.on_config(_config()))
        assert hook._report is good and "manifest.json" in hook._error
        out = html.unescape(hook.on_page_markdown("# Home\n\nRun {{ run.id }}.\n", _page(), cfg, None))
        assert "Run good-2." in out and "does not validate" in out
    finally:
        try:  # a reader blocked on the FIFO gets its end of file (none is there once it is never opened)
            os.close(os.open(run_dir / "manifest.json", os.O_WRONLY | os.O_NONBLOCK))
        except OSError:
            pass
    (run_dir / "manifest.json").unlink()
    (run_dir / "manifest.json").write_text(good_text.replace("synthetic", "restored"))
    _within(lambda: hook.on_config(_config()))
    assert hook._error is None and hook._report is not good and hook._report.run.manifest.command == "restored"


def test_build_still_stops_on_bad_data(hook, tmp_path):
    _break(synthetic.make_run(tmp_path, "bad-2"))
    hook.on_startup(command="build", dirty=False)
    with pytest.raises(PluginError, match="device.sm_count"):
        hook.on_config(_config())


def test_strict_build_fails_with_the_message(tmp_path):
    _break(synthetic.make_run(tmp_path, "bad-3"))
    proc = mkdocs_build(tmp_path / "site", data_dir=tmp_path)
    assert proc.returncode != 0 and "device.sm_count" in proc.stdout + proc.stderr


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _get(url: str, timeout: float = 20) -> str:
    with urllib.request.urlopen(url, timeout=timeout) as r:
        return r.read().decode("utf-8")


def _until(url: str, done, seconds: float = 240) -> str:
    """The page at `url` once `done(page)`, or as it last was; every request must be answered."""
    deadline = time.monotonic() + seconds
    while True:
        page = _get(url, timeout=60)  # answered, with or without the rebuild done
        if done(page) or time.monotonic() > deadline:
            return page
        time.sleep(2)


@pytest.mark.parametrize("attack,says", [(_break, "device.sm_count"), (_fifo, "FIFO"), (_nest, "nested deeper")],
                         ids=["bad value", "FIFO", "nested 10,000 deep"])
def test_mkdocs_serve_answers_while_the_data_is_broken(tmp_path, attack, says):
    """The real server: a request made after the data broke is answered (not left hanging), and once the file
    is restored the site is rebuilt from it (after a FIFO, the server once stayed blocked on it for good)."""
    run_dir = synthetic.make_run(tmp_path, "live-1")
    good = (run_dir / "manifest.json").read_text()
    port = _free_port()
    env = {**os.environ, "REPORT_DATA_DIR": str(tmp_path), "NO_MKDOCS_2_WARNING": "1",
           "SITE_URL": f"http://127.0.0.1:{port}/"}
    env.pop("REPORT_RUN", None)
    proc = subprocess.Popen([sys.executable, "-m", "mkdocs", "serve", "--dev-addr", f"127.0.0.1:{port}",
                             ], cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                            text=True)
    try:
        url = f"http://127.0.0.1:{port}/reproduce/"
        deadline = time.monotonic() + 240
        page = None
        while time.monotonic() < deadline and page is None:
            try:
                page = _get(url, timeout=5)
            except OSError:
                if proc.poll() is not None:
                    pytest.fail(f"mkdocs serve exited:\n{proc.stdout.read()[-3000:]}")
                time.sleep(1)
        assert page is not None and "live-1" in page, "mkdocs serve never answered"
        attack(run_dir)
        page = _until(url, lambda p: "does not validate" in p)
        assert "does not validate" in page and "live-1" in page and says in html.unescape(page)
        (run_dir / "manifest.json").unlink()
        (run_dir / "manifest.json").write_text(good)
        page = _until(url, lambda p: "does not validate" not in p)
        assert "does not validate" not in page and "live-1" in page, "the restored data was never served"
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            proc.kill()
