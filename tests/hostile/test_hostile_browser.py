"""Open every page of the hostile site in headless Chromium: no payload runs, no entity is shown."""
import pytest

from browser import chromium, serving
from test_browser import page_url  # noqa: F401 - importing it skips this module without chromium
from test_site_build import nav_pages


@pytest.fixture(scope="module")
def hostile_server(hostile_site):
    _, site = hostile_site
    with serving(site) as url:
        yield url


@pytest.fixture(scope="module")
def browser():
    with chromium() as b:
        yield b


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
