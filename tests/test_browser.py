"""Open every built page in a real headless Chromium: every plot renders, no console errors, dark mode works."""
import os

import pytest

from browser import CHROMIUM, chromium, serving
from test_site_build import html_path, nav_pages

if CHROMIUM is None:
    if os.environ.get("REQUIRE_BROWSER"):
        raise RuntimeError("the browser test needs Debian's chromium: apt-get install chromium")
    pytest.skip("no chromium here (apt-get install chromium); CI sets REQUIRE_BROWSER=1 and runs this",
                allow_module_level=True)


@pytest.fixture(scope="module")
def server(built_site):
    with serving(built_site) as url:
        yield url


@pytest.fixture(scope="module")
def browser():
    with chromium() as b:
        yield b


def page_url(server, md):
    rel = "" if md == "index.md" else md.replace(".md", "/")
    return f"{server}/{rel}"


@pytest.mark.parametrize("md", nav_pages())
def test_page_renders_every_plot_without_console_errors(server, browser, built_site, md):
    page = browser.new_page()
    errors = []
    page.on("console", lambda msg: errors.append(msg.text) if msg.type == "error" else None)
    page.on("pageerror", lambda exc: errors.append(str(exc)))
    page.on("requestfailed", lambda req: errors.append(f"request failed: {req.url}"))
    page.goto(page_url(server, md), wait_until="load")
    plots = page.locator("div.js-plotly-plot")
    n = plots.count()
    expected = html_path(built_site, md).read_text().count('class="report-figure"')
    assert n == expected, f"{md}: {n} plot divs rendered, {expected} figures in the HTML"
    for i in range(n):
        assert plots.nth(i).locator("svg.main-svg").count() >= 1, f"{md}: plot {i} has no svg.main-svg"
    assert errors == [], f"{md}: console errors {errors}"
    page.close()


def test_dark_mode_toggle_rethemes_figures(server, browser):
    page = browser.new_page()
    page.goto(page_url(server, "hardware.md"), wait_until="load")
    plot = page.locator("div.js-plotly-plot").first

    def font_colour():
        return page.evaluate("el => el.layout.font.color", plot.element_handle())

    scheme = lambda: page.evaluate("document.body.getAttribute('data-md-color-scheme')")  # noqa: E731
    before_scheme, before = scheme(), font_colour()
    page.locator("label.md-header__button[for^='__palette']:visible").first.click()
    page.wait_for_function(f"document.body.getAttribute('data-md-color-scheme') !== '{before_scheme}'")
    page.wait_for_timeout(200)
    assert scheme() != before_scheme
    assert font_colour() != before
    page.close()
