"""The built site in a real browser: Debian's headless Chromium, driven by Selenium, reading from a local server.

Checks what a reader sees: pages render with their code blocks and a copy button on each, and search finds "slot";
at 1280 x 1000 (a laptop window) no code block and no table on any page scrolls sideways, and the front page shows
its headline, plot and cards without scrolling; at 390 px (a phone) the navigation works and nothing but code blocks
scrolls sideways. One browser session for all of it. Screenshots go to .lab/screenshots/ (git-ignored) for a person
to look at.
"""

import functools
import http.server
import os
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
    results = wait_for(browser, "li.md-search-result__item")
    assert any("slot" in r.text.lower() for r in results), [r.text for r in results]
    browser.save_screenshot(str(SCREENSHOTS / "search.png"))


def site_pages() -> list[str]:
    """Every page of the site, as its URL path: the same list the strict build test checks."""
    pages = sorted(p.relative_to(PROJECT_ROOT / "docs") for p in (PROJECT_ROOT / "docs").rglob("*.md"))
    return [
        "" if p.name == "index.md" else f"{p.with_suffix('').as_posix()}/" for p in pages if p.parts[0] != "results"
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
    """At 1280 x 1000 the headline sentence, the latency plot and the four "where to go" cards show unscrolled."""
    set_viewport(browser, LAPTOP)
    open_page(browser, site_url + "/")
    found = browser.execute_script(
        """
        const parts = {summary: '.rtm-headline', plot: 'img.rtm-plot', cards: '.grid.cards'};
        const out = {};
        for (const [name, css] of Object.entries(parts)) {
          const el = document.querySelector('article ' + css);
          if (!el) { out[name] = 'missing'; continue; }
          const box = el.getBoundingClientRect();
          out[name] = {top: box.top, bottom: box.bottom, height: box.height,
                       loaded: el.tagName !== 'IMG' || (el.complete && el.naturalWidth > 0),
                       items: el.querySelectorAll(':scope > ul > li').length, text: el.textContent.trim()};
        }
        out.scrollY = window.scrollY;
        out.viewport = window.innerHeight;
        return out;
        """
    )
    browser.save_screenshot(str(SCREENSHOTS / "home-1280.png"))
    problems = [f"{name}: not on the page" for name in ("summary", "plot", "cards") if found[name] == "missing"]
    assert not problems, problems
    assert found["scrollY"] == 0, found
    for name in ("summary", "plot", "cards"):
        box = found[name]
        if not (box["height"] > 0 and box["top"] >= 0 and box["bottom"] <= found["viewport"]):
            problems.append(
                f"{name}: from {box['top']:.0f} to {box['bottom']:.0f} px, the window shows 0 to {found['viewport']}"
            )
    assert found["plot"]["loaded"], "the latency plot did not load"
    assert found["cards"]["items"] == 4, found["cards"]
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
