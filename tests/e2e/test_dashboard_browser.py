"""The dashboard in a real browser: Debian's chromium, headless, driven by selenium through
Debian's chromedriver. It signs in through the login forms (admin, then a tenant), finds the
plots (SVG with data points and bars), checks a screenshot holds the plots' pixels, that every
plot has a title, named axes and a rendered label for each bar and series, that the advice
reads as sentences with numbers, and that the tenant sees its own latency and cache figures.

`.ci/run` installs chromium and chromium-driver; elsewhere the test skips, saying why.
"""

from __future__ import annotations

import io
import re
import shutil

import pytest

from fairgate.gateway.settings import Settings
from tests.gateway.harness import ADMIN_TOKEN, Admin, GatewayThread
from tests.helpers.dashboard_load import run_load

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
CHROMEDRIVER = shutil.which("chromedriver")
pytestmark = pytest.mark.skipif(not (CHROMIUM and CHROMEDRIVER),
                                reason="no headless browser: `apt-get install chromium chromium-driver` "
                                       "(.ci/run does) to run the dashboard in chromium")
PLOT_BLUE, PLOT_RED = (0x25, 0x63, 0xEB), (0xDC, 0x26, 0x26)  # the first two series / bars (svg.PALETTE)


@pytest.fixture(scope="module")
def gateway(tmp_path_factory, tiny_model_dir):
    db = tmp_path_factory.mktemp("dash-browser") / "d.db"
    settings = Settings(admin_token=ADMIN_TOKEN, database_url=f"sqlite:///{db}", model=str(tiny_model_dir))
    with GatewayThread(settings) as gw:
        admin = Admin(gw.url)
        load = run_load(gw.url, admin, tiny_model_dir.name)
        assert gw.call(gw.state.usage.flush())
        yield gw, load
        admin.close()


@pytest.fixture
def browser():
    webdriver = pytest.importorskip("selenium.webdriver", reason="selenium is in the test extra")
    from selenium.webdriver.chrome.service import Service

    options = webdriver.ChromeOptions()
    options.binary_location = CHROMIUM
    for arg in ("--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
                "--window-size=1400,1900", "--force-device-scale-factor=1"):
        options.add_argument(arg)
    try:
        driver = webdriver.Chrome(service=Service(CHROMEDRIVER), options=options)
    except Exception as exc:  # a browser that cannot start here (no display libraries, ...)
        pytest.skip(f"chromium did not start headless: {type(exc).__name__}: {exc}")
    driver.set_page_load_timeout(60)
    yield driver
    driver.quit()


def sign_in(driver, url: str, secret: str) -> None:
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support import expected_conditions as ec
    from selenium.webdriver.support.ui import WebDriverWait

    driver.get(url)
    WebDriverWait(driver, 30).until(ec.presence_of_element_located((By.ID, "token")))
    assert "/login" in driver.current_url  # not signed in: the page sent us to its form
    driver.find_element(By.ID, "token").send_keys(secret)
    driver.find_element(By.ID, "sign-in").click()
    try:  # a loaded CI box renders a page in seconds, not a minute
        WebDriverWait(driver, 90).until(ec.presence_of_element_located((By.ID, "usage")))
    except Exception as exc:  # say where the browser is and what it shows
        raise AssertionError(f"no dashboard after signing in: at {driver.current_url}, page says "
                             f"{driver.find_element(By.TAG_NAME, 'body').text[:300]!r}") from exc


def sign_out(driver) -> None:
    """Click sign-out and wait for the login form: the next page load must not race its redirect
    (a sign-out answered after the next sign-in would clear that one's cookie)."""
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support import expected_conditions as ec
    from selenium.webdriver.support.ui import WebDriverWait

    driver.find_element(By.ID, "sign-out").click()
    WebDriverWait(driver, 60).until(ec.presence_of_element_located((By.ID, "token")))


def plotted(driver) -> dict[str, int]:
    """Panel id -> data points and bars with a value above 0 in its SVG plots."""
    from selenium.webdriver.common.by import By

    out = {}
    for section in driver.find_elements(By.CSS_SELECTOR, "section.panel"):
        marks = section.find_elements(By.CSS_SELECTOR, "svg.plot circle.point, svg.plot rect.bar")
        out[section.get_attribute("id")] = sum(float(m.get_attribute("data-value")) > 0 for m in marks)
    return out


# What the browser renders of each plot: its title, its axis labels, and for every bar and line
# series the label drawn for it (with a size: a label the browser lays out as nothing is no label).
PLOT_PROBLEMS = """
const problems = [];
const shown = el => { const b = el.getBBox(); return el.textContent.trim() !== '' && b.width > 0 && b.height > 0; };
document.querySelectorAll('svg.plot').forEach((svg, i) => {
  const title = svg.querySelector(':scope > title');
  const name = title ? title.textContent.trim() : '';
  if (!name) problems.push('plot ' + i + ' has no title');
  if (svg.classList.contains('plot-empty')) return;
  for (const axis of ['x', 'y']) {
    const label = svg.querySelector('text.axis-label[data-axis="' + axis + '"]');
    if (!label || !shown(label)) problems.push(name + ': no ' + axis + ' axis label');
  }
  const bars = svg.querySelectorAll('rect.bar'), labels = svg.querySelectorAll('text.bar-label');
  if (bars.length !== labels.length) problems.push(name + ': ' + bars.length + ' bars, ' + labels.length + ' labels');
  labels.forEach(l => { if (!shown(l)) problems.push(name + ': an empty bar label'); });
  const series = [...svg.querySelectorAll('polyline.series')].map(p => p.dataset.series);
  const legend = [...svg.querySelectorAll('text.legend')].filter(shown).map(t => t.dataset.series);
  if (series.join('|') !== legend.join('|')) problems.push(name + ': series ' + series + ' legend ' + legend);
});
return problems;
"""


def plot_problems(driver) -> tuple[int, list[str]]:
    """(plots drawn with data, what is missing from any plot's labels)."""
    from selenium.webdriver.common.by import By

    drawn = len(driver.find_elements(By.CSS_SELECTOR, "svg.plot:not(.plot-empty)"))
    return drawn, driver.execute_script(PLOT_PROBLEMS)


def plot_pixels(png: bytes) -> tuple[int, int, int]:
    """(distinct colours, pixels of the first series' blue, of the second's red)."""
    from PIL import Image

    image = Image.open(io.BytesIO(png)).convert("RGB")
    colours = image.getcolors(maxcolors=1 << 20) or []

    def near(rgb: tuple[int, int, int], ref: tuple[int, int, int]) -> bool:
        return sum(abs(a - b) for a, b in zip(rgb, ref, strict=True)) < 24

    blue = sum(n for n, rgb in colours if near(rgb, PLOT_BLUE))
    red = sum(n for n, rgb in colours if near(rgb, PLOT_RED))
    return len(colours), blue, red


def test_admin_and_tenant_dashboards_in_chromium(gateway, browser, tmp_path):
    from selenium.webdriver.common.by import By

    gw, load = gateway
    sign_in(browser, gw.url + "/admin/dashboard", ADMIN_TOKEN)
    assert browser.current_url.endswith("/admin/dashboard")
    marks = plotted(browser)
    for panel in ("usage", "latency", "cache", "quota", "routing"):
        assert marks[panel] > 0, (panel, marks)
    assert browser.find_element(By.ID, "advice").is_displayed()
    items = browser.find_elements(By.CSS_SELECTOR, "#advice li.advice-item")
    assert items
    for item in items:  # as a reader sees it: a title and a sentence with numbers, no dict dump
        text = item.text
        assert not re.search(r"[{}]|': |\w_\w", text), text
        sentence = item.find_element(By.CSS_SELECTOR, ".advice-sentence").text
        assert sentence.endswith(".") and re.search(r"\d", sentence), text
    drawn, problems = plot_problems(browser)
    assert drawn >= 8 and problems == [], problems
    png = browser.get_screenshot_as_png()
    (tmp_path / "admin-dashboard.png").write_bytes(png)
    colours, blue, red = plot_pixels(png)
    assert colours > 50 and blue > 2000 and red > 500, (colours, blue, red)  # lines and bars drawn

    sign_out(browser)
    sign_in(browser, gw.url + "/dashboard", load.key_a)
    assert "tenant docs-team" in browser.title and "billing-team" not in browser.page_source
    marks = plotted(browser)
    assert marks["usage"] > 0 and marks["quota"] > 0
    # its own latency and cache figures, in its wording, with numbers (not "no data yet")
    assert marks["latency"] >= 4 and marks["cache"] == 1, marks
    latency, cache = browser.find_element(By.ID, "latency"), browser.find_element(By.ID, "cache")
    assert latency.find_element(By.TAG_NAME, "h2").text.startswith("Your latency")
    assert cache.find_element(By.TAG_NAME, "h2").text.startswith("Your prefix-cache hit rate")
    rows = [[td.text for td in tr.find_elements(By.TAG_NAME, "td")]
            for tr in latency.find_elements(By.CSS_SELECTOR, "table tr")]
    e2e = next(r for r in rows if r and r[0] == "end-to-end")
    assert e2e[1] == "/v1/chat/completions" and e2e[2] == "3" and float(e2e[3]) > 0, rows
    hit = cache.find_element(By.CSS_SELECTOR, "table tr:nth-child(2) td:last-child").text
    assert re.fullmatch(r"\d+\.\d%", hit) and float(hit[:-1]) > 0, hit  # it repeated its system prompt
    assert "no data yet" not in latency.text + cache.text
    drawn, problems = plot_problems(browser)
    assert drawn >= 4 and problems == [], problems
    png = browser.get_screenshot_as_png()
    (tmp_path / "tenant-dashboard.png").write_bytes(png)
    colours, blue, _ = plot_pixels(png)
    assert colours > 50 and blue > 1000, (colours, blue)
