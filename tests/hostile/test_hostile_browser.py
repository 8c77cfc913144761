"""Open every page of the hostile site in headless Chromium: no payload runs, no entity is shown."""
import functools
import threading
from http.server import ThreadingHTTPServer

import pytest

from test_browser import CHROMIUM, QuietHandler, page_url  # noqa: F401 - skips the module without chromium
from test_site_build import nav_pages


@pytest.fixture(scope="module")
def hostile_server(hostile_site):
    _, site = hostile_site
    httpd = ThreadingHTTPServer(("127.0.0.1", 0), functools.partial(QuietHandler, directory=str(site)))
    threading.Thread(target=httpd.serve_forever, daemon=True).start()
    yield f"http://127.0.0.1:{httpd.server_address[1]}"
    httpd.shutdown()


@pytest.fixture(scope="module")
def browser():
    from playwright.sync_api import sync_playwright

    with sync_playwright() as p:
        b = p.chromium.launch(executable_path=CHROMIUM, args=[
            "--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
            "--disable-component-update", "--no-first-run"])
        yield b
        b.close()


# Entities a reader must never see: they mean a string was escaped twice.
SHOWN_ENTITY = r"/&(lt|gt|amp|quot|#39|#x27);/"


@pytest.mark.parametrize("md", nav_pages())
def test_no_dialog_fires_and_plots_show_text_as_typed(hostile_server, browser, md):
    page = browser.new_page()
    dialogs = []

    def on_dialog(d):
        dialogs.append(f"{d.type}: {d.message}")
        d.dismiss()

    page.on("dialog", on_dialog)
    page.goto(page_url(hostile_server, md), wait_until="load")
    page.wait_for_timeout(300)  # onerror/onload handlers of a broken image fire right after load
    # Hover every legend entry and point label once: handlers bound to mouse events fire too.
    for el in page.locator("svg text").all()[:60]:
        try:
            el.hover(timeout=200)
        except Exception:  # noqa: BLE001 - hidden or detached text cannot be hovered; that is fine
            pass
    shown = page.evaluate(f"[...document.querySelectorAll('.js-plotly-plot svg text')]"
                          f".map(t => t.textContent).filter(t => {SHOWN_ENTITY}.test(t))")
    page.close()
    assert dialogs == [], f"{md}: a payload ran: {dialogs}"
    assert shown == [], f"{md}: plot text shows entities (escaped twice): {shown[:5]}"
