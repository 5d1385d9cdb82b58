"""The web page in a real headless browser: Debian's chromium driven by selenium (no download).

Skipped with a reason when chromium or chromedriver is missing (``apt-get install chromium
chromium-driver``). ``EVOLALLOC_SCREENSHOT=path.png`` saves a screenshot of the job page.
"""

from __future__ import annotations

import os
import shutil

import pytest

CHROMIUM = shutil.which("chromium") or "/usr/bin/chromium"
CHROMEDRIVER = shutil.which("chromedriver") or "/usr/bin/chromedriver"

pytestmark = pytest.mark.skipif(
    not (os.path.exists(CHROMIUM) and os.path.exists(CHROMEDRIVER)),
    reason="needs Debian's chromium and chromium-driver (apt-get install -y chromium chromium-driver)",
)

DRAWN_PIXELS = """
const canvas = document.querySelector(arguments[0] + ' canvas');
if (!canvas || !canvas.width) return 0;
const data = canvas.getContext('2d').getImageData(0, 0, canvas.width, canvas.height).data;
let painted = 0;
for (let i = 3; i < data.length; i += 4) if (data[i] > 0) painted++;
return painted;
"""


@pytest.fixture(scope="module")
def browser():
    webdriver = pytest.importorskip("selenium.webdriver")
    options = webdriver.ChromeOptions()
    options.binary_location = CHROMIUM
    for flag in ("--headless=new", "--no-sandbox", "--disable-dev-shm-usage", "--disable-gpu",
                 "--window-size=1280,1000"):
        options.add_argument(flag)
    driver = webdriver.Chrome(options=options, service=webdriver.ChromeService(executable_path=CHROMEDRIVER))
    yield driver
    driver.quit()


def wait(driver, condition, timeout=30):
    """Until ``condition`` holds; the page re-renders as it polls, so a vanished element is retried."""
    from selenium.common.exceptions import NoSuchElementException, StaleElementReferenceException
    from selenium.webdriver.support.ui import WebDriverWait

    ignored = (NoSuchElementException, StaleElementReferenceException)
    return WebDriverWait(driver, timeout, poll_frequency=0.2, ignored_exceptions=ignored).until(condition)


def click(element) -> bool:
    element.click()
    return True


def test_the_page_lists_jobs_live_and_draws_a_jobs_charts(browser, two_jobs, tiny_model_dir):
    from selenium.webdriver.common.by import By

    from .conftest import tiny_recipe_text

    service, _, _ = two_jobs
    browser.get(service.url + "/")
    wait(browser, lambda d: "first" in d.find_element(By.ID, "jobs").text)
    wait(browser, lambda d: "finished" in d.find_element(By.ID, "jobs").text)
    wait(browser, lambda d: d.find_elements(By.CSS_SELECTOR, "#profiles a[href*='format=kvpress']"))

    # A job submitted through the API while the page is open appears without a reload.
    with service.client() as http:
        late = http.post("/jobs", content=tiny_recipe_text(tiny_model_dir, "late"),
                         params={"name": "late-arrival"}).json()
        try:
            wait(browser, lambda d: "late-arrival" in d.find_element(By.ID, "jobs").text, timeout=15)
        finally:
            http.post(f"/jobs/{late['id']}/cancel")

    wait(browser, lambda d: click(d.find_element(By.LINK_TEXT, "first")))
    wait(browser, lambda d: d.execute_script(DRAWN_PIXELS, "#fitness-chart") > 500)
    wait(browser, lambda d: d.execute_script(DRAWN_PIXELS, "#budgets-chart") > 500)
    methods = wait(browser, lambda d: {row.find_elements(By.TAG_NAME, "td")[1].text
                                       for row in d.find_elements(By.CSS_SELECTOR, "#comparison tbody tr")})
    assert methods == {"evolved", "uniform"}
    if os.environ.get("EVOLALLOC_SCREENSHOT"):
        browser.save_screenshot(os.environ["EVOLALLOC_SCREENSHOT"])
