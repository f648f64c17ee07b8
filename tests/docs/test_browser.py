"""The built site in a real browser: Debian's headless Chromium, driven by Selenium, reading from a local server.

Checks what a reader sees: pages render with their code blocks and a copy button on each, and search finds "slot";
at 1280 x 1000 (a laptop window) no code block and no table on any page scrolls sideways, and the front page shows
its headline, plot and the start of its route table without scrolling; at 390 px (a phone) the navigation works and
nothing but code blocks scrolls sideways; the concept diagrams show their labels, legible, in the light and the dark
theme at both sizes, and their pages ask no host but the docs server for anything. One browser session for all of it. Screenshots go to
.lab/screenshots/ (git-ignored) for a person to look at.
"""

import functools
import http.server
import json
import os
import re
import shutil
import subprocess
import threading
import time
from pathlib import Path

import pytest

from rtm_lab.paths import PROJECT_ROOT

# Minutes of Spark or a browser: kept out of the fast loop (`pytest -m "not slow"`).
pytestmark = pytest.mark.slow

SCREENSHOTS = PROJECT_ROOT / ".lab" / "screenshots"
# Offline and quiet: no sandbox (root in CI), no GPU, and none of Chromium's background calls to Google services.
CHROMIUM_FLAGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--disable-dev-shm-usage",
    "--window-size=1280,1000",
]
WAIT_S = 20
LAPTOP = (1280, 1000)
PHONE = (390, 844)
# Sub-pixel rounding: a block a pixel or two wider than its box shows no scroll bar a reader would notice.
TOLERANCE_PX = 2
OVERFLOW_JS = (Path(__file__).parent / "overflow.js").read_text(encoding="utf-8")


def browser_binaries() -> tuple[str, str]:
    chromium = os.environ.get("CHROMIUM") or shutil.which("chromium")
    driver = os.environ.get("CHROMEDRIVER") or shutil.which("chromedriver")
    if not (chromium and driver):
        # Same step as `make setup`: installs Debian's chromium + chromium-driver when root, else says how.
        setup = subprocess.run([str(PROJECT_ROOT / "scripts" / "setup_browser.sh")], capture_output=True, text=True)
        if setup.returncode != 0:
            pytest.fail(setup.stderr.strip(), pytrace=False)
        chromium, driver = shutil.which("chromium"), shutil.which("chromedriver")
    return chromium, driver


@pytest.fixture(scope="module")
def site_url(built_site):
    handler = functools.partial(QuietHandler, directory=str(built_site))
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}"
    server.shutdown()
    server.server_close()


class QuietHandler(http.server.SimpleHTTPRequestHandler):
    def log_message(self, format, *args):
        pass


@pytest.fixture(scope="module")
def browser(tmp_path_factory):
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    chromium, driver_path = browser_binaries()
    options = webdriver.ChromeOptions()
    options.binary_location = chromium
    for flag in CHROMIUM_FLAGS:
        options.add_argument(flag)
    options.add_argument(f"--user-data-dir={tmp_path_factory.mktemp('chromium-profile')}")
    # Every request the page makes, read back by the diagram test from the DevTools log.
    options.set_capability("goog:loggingPrefs", {"performance": "ALL"})
    driver = webdriver.Chrome(options=options, service=Service(executable_path=driver_path))
    driver.set_page_load_timeout(WAIT_S)
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    yield driver
    driver.quit()


@pytest.fixture(autouse=True)
def laptop_window(browser):
    """Each test starts at 1280 x 1000, whatever size the one before it left the shared browser at."""
    set_viewport(browser, LAPTOP)


def wait_for(browser, css: str, at_least: int = 1):
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support.ui import WebDriverWait

    return WebDriverWait(browser, WAIT_S).until(
        lambda d: (found := d.find_elements(By.CSS_SELECTOR, css)) and len(found) >= at_least and found
    )


def code_blocks_with_copy_buttons(browser, url: str, screenshot: str) -> int:
    """Open a page; return how many code blocks it shows, after checking each got Material's copy button."""
    from selenium.webdriver.common.by import By

    browser.get(url)
    wait_for(browser, "article.md-content__inner h1")
    blocks = browser.find_elements(By.CSS_SELECTOR, "article div.highlight pre > code")
    assert blocks, f"{url}: no code blocks rendered"
    # The copy buttons are added by the theme's JavaScript after load: their presence proves the scripts ran.
    buttons = wait_for(browser, 'article div.highlight pre button[data-md-type="copy"]', at_least=len(blocks))
    assert len(buttons) == len(blocks)
    # textContent, not .text: a block in a hidden content tab has no visible text but must not be empty.
    assert all(b.get_attribute("textContent").strip() for b in blocks), f"{url}: an empty code block"
    browser.save_screenshot(str(SCREENSHOTS / screenshot))
    return len(blocks)


def reference_page() -> str:
    pages = sorted((PROJECT_ROOT / "docs" / "reference").glob("*.md"))
    assert pages, "docs/reference/ has no page to check"
    preferred = PROJECT_ROOT / "docs" / "reference" / "slot-sizing.md"
    return f"reference/{(preferred if preferred in pages else pages[0]).stem}/"


def test_home_page_renders(browser, site_url):
    from selenium.webdriver.common.by import By

    browser.get(site_url + "/")
    heading = wait_for(browser, "article.md-content__inner h1")[0]
    assert "Real-Time Mode" in heading.text
    assert browser.find_elements(By.CSS_SELECTOR, "nav.md-nav a.md-nav__link"), "no navigation rendered"
    browser.save_screenshot(str(SCREENSHOTS / "home.png"))


def test_get_started_shows_the_pipeline_with_copy_buttons(browser, site_url):
    assert code_blocks_with_copy_buttons(browser, site_url + "/get-started/", "get-started.png") >= 2
    assert "start_pipeline" in browser.page_source


def test_reference_page_shows_code_with_copy_buttons(browser, site_url):
    assert code_blocks_with_copy_buttons(browser, f"{site_url}/{reference_page()}", "reference.png") >= 1


def test_search_finds_slot(browser, site_url):
    browser.get(site_url + "/")
    wait_for(browser, "article.md-content__inner h1")
    # At this window width the search box sits in the header; typing into it is what a reader does.
    box = wait_for(browser, "input.md-search__input")[0]
    box.click()
    box.send_keys("slot")
    # The theme redraws the result list as each letter's search returns, so an item found a moment ago can be gone:
    # read the texts afresh on every poll, and treat a redraw mid-read as "not yet".
    from selenium.common.exceptions import StaleElementReferenceException
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support.ui import WebDriverWait

    def result_texts(d) -> list[str] | bool:
        texts = [r.text.lower() for r in d.find_elements(By.CSS_SELECTOR, "li.md-search-result__item")]
        return texts if any("slot" in t for t in texts) else False

    texts = WebDriverWait(browser, WAIT_S, ignored_exceptions=[StaleElementReferenceException]).until(result_texts)
    assert any("slot" in t for t in texts), texts
    browser.save_screenshot(str(SCREENSHOTS / "search.png"))


def site_pages() -> list[str]:
    """Every page of the site, as its URL path: the same list the strict build test checks."""
    pages = sorted(p.relative_to(PROJECT_ROOT / "docs") for p in (PROJECT_ROOT / "docs").rglob("*.md"))
    return [
        "" if p.name == "index.md" else f"{p.with_suffix('').as_posix()}/"
        for p in pages
        if p.parts[0] not in ("results", "includes", "drafts")
    ]


def set_viewport(browser, size: tuple[int, int]) -> None:
    """The page's viewport exactly this size (CSS pixels), whatever the headless window's chrome takes."""
    width, height = size
    browser.execute_cdp_cmd(
        "Emulation.setDeviceMetricsOverride",
        {"width": width, "height": height, "deviceScaleFactor": 1, "mobile": width < 600},
    )


def open_page(browser, url: str) -> None:
    """Load a page and wait for the theme's scripts: they wrap each table in its scrolling box."""
    from selenium.webdriver.support.ui import WebDriverWait

    browser.get(url)
    wait_for(browser, "article.md-content__inner h1")
    WebDriverWait(browser, WAIT_S).until(
        lambda d: d.execute_script(
            "return [...document.querySelectorAll('article table:not(.highlighttable)')]"
            ".every(t => t.closest('.md-typeset__scrollwrap'))"
        )
    )


def overflow_report(browser, site_url: str, size: tuple[int, int]) -> tuple[dict, list[str]]:
    """Every page at this viewport: totals of code blocks and tables, and each one that scrolls sideways, named."""
    set_viewport(browser, size)
    totals = {"code": 0, "tables": 0, "code_over": 0, "tables_over": 0, "pages_over": 0}
    offenders = []
    for path in site_pages():
        open_page(browser, f"{site_url}/{path}")
        found = browser.execute_script(OVERFLOW_JS, TOLERANCE_PX)
        totals["code"] += found["code"]
        totals["tables"] += found["tables"]
        for offender in found["offenders"]:
            totals["code_over" if ": code block" in offender else "tables_over"] += 1
            offenders.append(f"/{path}{offender}")
        if found["pageOver"] > TOLERANCE_PX:
            totals["pages_over"] += 1
            offenders.append(f"/{path}: the page itself is {found['pageOver']}px wider than the window")
    return totals, offenders


def summary(totals: dict, size: tuple[int, int]) -> str:
    return (
        f"at {size[0]}x{size[1]}, {totals['code_over']} of {totals['code']} code blocks and "
        f"{totals['tables_over']} of {totals['tables']} tables scroll sideways; {totals['pages_over']} of "
        f"{len(site_pages())} pages are wider than the window"
    )


def test_nothing_scrolls_sideways_at_1280(browser, site_url):
    totals, offenders = overflow_report(browser, site_url, LAPTOP)
    print(summary(totals, LAPTOP))
    assert totals["code"] and totals["tables"], totals
    assert not offenders, summary(totals, LAPTOP) + ":\n" + "\n".join(offenders)


def test_on_a_phone_only_code_blocks_scroll_sideways(browser, site_url):
    totals, offenders = overflow_report(browser, site_url, PHONE)
    print(summary(totals, PHONE))
    offenders = [o for o in offenders if ": code block" not in o]
    assert not offenders, summary(totals, PHONE) + "; not code blocks:\n" + "\n".join(offenders)


def test_front_page_answers_in_one_screen(browser, site_url):
    """At 1280 x 1000 the headline sentence, the latency plot and the "Route by task" heading show unscrolled, with
    the route table's first question under it (tests/docs/test_front_page.py checks what the table routes to)."""
    set_viewport(browser, LAPTOP)
    open_page(browser, site_url + "/")
    found = browser.execute_script(
        """
        const parts = {summary: '.rtm-headline', plot: 'img.rtm-plot', route: 'h2#route-by-task',
                       question: 'h2#route-by-task ~ .md-typeset__scrollwrap tbody tr'};
        const out = {};
        for (const [name, css] of Object.entries(parts)) {
          const el = document.querySelector('article ' + css);
          if (!el) { out[name] = 'missing'; continue; }
          const box = el.getBoundingClientRect();
          out[name] = {top: box.top, bottom: box.bottom, height: box.height,
                       loaded: el.tagName !== 'IMG' || (el.complete && el.naturalWidth > 0),
                       text: el.textContent.trim()};
        }
        out.scrollY = window.scrollY;
        out.viewport = window.innerHeight;
        return out;
        """
    )
    browser.save_screenshot(str(SCREENSHOTS / "home-1280.png"))
    names = ("summary", "plot", "route", "question")
    problems = [f"{name}: not on the page" for name in names if found[name] == "missing"]
    assert not problems, problems
    assert found["scrollY"] == 0, found
    for name in names:
        box = found[name]
        if not (box["height"] > 0 and box["top"] >= 0 and box["bottom"] <= found["viewport"]):
            problems.append(
                f"{name}: from {box['top']:.0f} to {box['bottom']:.0f} px, the window shows 0 to {found['viewport']}"
            )
    assert found["plot"]["loaded"], "the latency plot did not load"
    assert "real-time mode" in found["summary"]["text"] and "micro-batch" in found["summary"]["text"], found["summary"]
    assert not problems, "\n".join(problems)


def test_on_a_phone_the_navigation_opens_and_leads_to_a_page(browser, site_url):
    """At 390 px the sidebar is a drawer behind the menu button: open it, open a section, follow a link."""
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support.ui import WebDriverWait

    set_viewport(browser, PHONE)
    open_page(browser, site_url + "/")
    drawer = browser.find_element(By.CSS_SELECTOR, "nav.md-nav--primary")
    assert drawer.rect["x"] + drawer.rect["width"] <= 0 or not drawer.is_displayed(), "the drawer is open already"
    browser.find_element(By.CSS_SELECTOR, 'label.md-header__button[for="__drawer"]').click()

    def settled(css: str, text: str = ""):
        """The element once the drawer's slide has ended: shown, inside the window, and still between two looks."""

        def find(driver):
            for element in driver.find_elements(By.CSS_SELECTOR, css):
                if element.is_displayed() and text in element.text:
                    first = element.rect
                    time.sleep(0.1)
                    if element.rect == first and 0 <= first["x"] < PHONE[0]:
                        return element
            return None

        return WebDriverWait(browser, WAIT_S).until(find, f"{css} ({text}) never settled in the open drawer")

    settled('nav.md-nav--primary label.md-nav__link[for^="__nav_"]', "References").click()
    settled('nav.md-nav--primary a.md-nav__link[href$="slot-sizing/"]', "Slot sizing").click()
    WebDriverWait(browser, WAIT_S).until(
        lambda d: d.current_url.rstrip("/").endswith("reference/slot-sizing"), "the link did not open its page"
    )
    heading = wait_for(browser, "article.md-content__inner h1")[0]
    assert "slot" in heading.text.lower(), heading.text
    browser.save_screenshot(str(SCREENSHOTS / "phone-navigation.png"))


# Each concept diagram: the page it is on, its SVG's id (a diagram drawn in two layouts has the `-wide` and
# `-narrow` ids, one shown at a time), and the words a reader must be able to read in it.
DIAGRAMS = {
    "timeline": ("concepts/", "rtm-timeline", ("source task", "shuffle", "commit", "boundary stall")),
    "slots": ("reference/slot-sizing/", "rtm-slots", ("source task", "shuffle", "task slot", "202 task slots")),
}
SCHEMES = ("default", "slate")  # mkdocs.yml's light and dark palettes
# WCAG AA for normal text, and the smallest glyph box (font size x line box) that is still read without zooming.
MIN_CONTRAST = 4.5
MIN_TEXT_PX = 11
DIAGRAM_JS = """
const prefix = arguments[0];
const shown = [...document.querySelectorAll('article figure.rtm-diagram svg')]
  .filter((svg) => svg.id.startsWith(prefix) && svg.getBoundingClientRect().width > 0);
const page = getComputedStyle(document.body).backgroundColor;
return shown.map((svg) => {
  const box = svg.getBoundingClientRect();
  return {
    id: svg.id, left: box.left, right: box.right, background: page,
    labelledBy: (svg.getAttribute('aria-labelledby') || '').split(' ')
      .map((id) => (document.getElementById(id) || {}).textContent || ''),
    texts: [...svg.querySelectorAll('text')].map((t) => {
      const r = t.getBoundingClientRect();
      const style = getComputedStyle(t);
      return {words: t.textContent, left: r.left, right: r.right, height: r.height, fill: style.fill,
              shown: style.display !== 'none' && style.visibility !== 'hidden' && Number(style.opacity) > 0};
    }),
  };
});
"""


def rgba(css: str) -> tuple[float, float, float, float]:
    """`rgb(r, g, b)` or `rgba(r, g, b, a)` as computed by the browser."""
    numbers = [float(n) for n in re.findall(r"[\d.]+", css)]
    assert len(numbers) in (3, 4), f"not a computed colour: {css!r}"
    return numbers[0], numbers[1], numbers[2], numbers[3] if len(numbers) == 4 else 1.0


def contrast(fill: str, background: str) -> float:
    """WCAG contrast ratio of a (possibly translucent) text colour over an opaque background."""
    fr, fg, fb, alpha = rgba(fill)
    br, bg, bb, _ = rgba(background)
    blended = [alpha * f + (1 - alpha) * b for f, b in ((fr, br), (fg, bg), (fb, bb))]

    def luminance(rgb) -> float:
        linear = [c / 255 / 12.92 if c / 255 <= 0.03928 else ((c / 255 + 0.055) / 1.055) ** 2.4 for c in rgb]
        return 0.2126 * linear[0] + 0.7152 * linear[1] + 0.0722 * linear[2]

    light, dark = sorted((luminance(blended), luminance((br, bg, bb))), reverse=True)
    return (light + 0.05) / (dark + 0.05)


def switch_scheme(browser, scheme: str) -> None:
    """Through the theme's own toggle in the header, as a reader does: click until the page wears `scheme`."""
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support.ui import WebDriverWait

    def current(driver) -> str:
        return driver.find_element(By.TAG_NAME, "body").get_attribute("data-md-color-scheme")

    for _ in SCHEMES:
        if current(browser) == scheme:
            return
        toggle = browser.find_element(
            By.CSS_SELECTOR, "form[data-md-component=palette] label.md-header__button:not([hidden])"
        )
        before = current(browser)
        toggle.click()
        WebDriverWait(browser, WAIT_S).until(
            lambda d, before=before: current(d) != before, "the palette toggle changed nothing"
        )
    assert current(browser) == scheme, f"the palette toggle never reached {scheme}"


def requested_urls(browser) -> list[str]:
    """Every URL the browser asked for since the last call (the DevTools log, read and emptied)."""
    urls = []
    for entry in browser.get_log("performance"):
        message = json.loads(entry["message"])["message"]
        if message["method"] == "Network.requestWillBeSent":
            urls.append(message["params"]["request"]["url"])
    return urls


@pytest.mark.parametrize("size", [LAPTOP, PHONE], ids=["1280", "390"])
@pytest.mark.parametrize("name", list(DIAGRAMS))
def test_concept_diagram_is_legible_in_both_themes_and_asks_no_other_host(browser, site_url, name, size):
    """The diagram is inline SVG with real <text>: each required label is shown, inside the window, at least
    MIN_TEXT_PX tall and at WCAG AA contrast over the page, in the light and the dark theme; its title and
    description are there for a screen reader; and loading the page asked no host but the docs server."""
    from selenium.webdriver.common.by import By

    path, prefix, labels = DIAGRAMS[name]
    set_viewport(browser, size)
    problems = []
    for scheme in SCHEMES:
        requested_urls(browser)  # empties the log: what follows is this page's load
        open_page(browser, f"{site_url}/{path}")
        switch_scheme(browser, scheme)
        outside = [u for u in requested_urls(browser) if not u.startswith((site_url + "/", "data:", "blob:"))]
        assert not outside, f"{path} asked other hosts: {outside}"
        diagrams = browser.execute_script(DIAGRAM_JS, prefix)
        assert len(diagrams) == 1, f"{path} at {size[0]} px shows {[d['id'] for d in diagrams]}, not one {prefix}"
        diagram = diagrams[0]
        assert all(diagram["labelledBy"]) and len(diagram["labelledBy"]) == 2, diagram["labelledBy"]
        assert rgba(diagram["background"])[3] == 1, f"the page's background is not opaque: {diagram['background']}"
        window = browser.execute_script("return window.innerWidth")
        assert diagram["left"] >= 0 and diagram["right"] <= window + TOLERANCE_PX, (diagram["left"], diagram["right"])
        for label in labels:
            found = [t for t in diagram["texts"] if label in t["words"]]
            if not found:
                problems.append(f"{scheme} {size[0]} px: no text {label!r} in {diagram['id']}")
        for text in diagram["texts"]:
            where = f"{scheme} {size[0]} px, {diagram['id']}, {text['words']!r}"
            ratio = contrast(text["fill"], diagram["background"])
            if not text["shown"] or text["height"] < MIN_TEXT_PX:
                problems.append(f"{where}: hidden or {text['height']:.1f} px tall")
            if text["left"] < diagram["left"] - TOLERANCE_PX or text["right"] > diagram["right"] + TOLERANCE_PX:
                problems.append(f"{where}: runs out of the picture ({text['left']:.0f}-{text['right']:.0f} px)")
            if ratio < MIN_CONTRAST:
                problems.append(f"{where}: contrast {ratio:.1f} ({text['fill']} on {diagram['background']})")
        figure = browser.find_element(By.CSS_SELECTOR, f"article figure.rtm-diagram:has(svg[id^='{prefix}'])")
        # The whole figure in the window, clear of the sticky header: a screenshot keeps only what the window shows.
        browser.execute_script("arguments[0].scrollIntoView({block: 'center'})", figure)
        figure.screenshot(
            str(SCREENSHOTS / f"diagram-{name}-{'light' if scheme == 'default' else 'dark'}-{size[0]}.png")
        )
    assert not problems, "\n".join(problems)
