"""The dashboard in a real browser: Debian's chromium, headless, driven by selenium through
Debian's chromedriver. It signs in through the login forms (admin, then a tenant), finds the
plots (SVG with data points and bars), and checks a screenshot holds the plots' pixels.

`.ci/run` installs chromium and chromium-driver; elsewhere the test skips, saying why.
"""

from __future__ import annotations

import io
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
    png = browser.get_screenshot_as_png()
    (tmp_path / "admin-dashboard.png").write_bytes(png)
    colours, blue, red = plot_pixels(png)
    assert colours > 50 and blue > 2000 and red > 500, (colours, blue, red)  # lines and bars drawn

    sign_out(browser)
    sign_in(browser, gw.url + "/dashboard", load.key_a)
    assert "tenant docs-team" in browser.title and "billing-team" not in browser.page_source
    marks = plotted(browser)
    assert marks["usage"] > 0 and marks["quota"] > 0
    png = browser.get_screenshot_as_png()
    (tmp_path / "tenant-dashboard.png").write_bytes(png)
    colours, blue, _ = plot_pixels(png)
    assert colours > 50 and blue > 1000, (colours, blue)
