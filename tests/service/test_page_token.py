"""The page on a service with a read token, in the real headless browser: the token field appears,
the token typed there is kept in this tab's sessionStorage and sent with every read (the tables
fill), it survives a reload, and a download link carries it too. Without it the page says why."""

from __future__ import annotations

import json

from evolalloc.core.allocation_file import allocation_to_json

from .conftest import TOKEN, ServiceProcess
from .test_api import a_profile
from .test_page import browser, pytestmark, wait  # noqa: F401 - the page tests' browser fixture and skip rule

READ_TOKEN = "read-token-0123456789abcdef"


def test_the_page_sends_the_read_token_typed_into_its_field(tmp_path, browser):  # noqa: F811
    from selenium.webdriver.common.by import By

    token_file = tmp_path / "read-token"
    token_file.write_text(READ_TOKEN + "\n")
    service = ServiceProcess(tmp_path / "runs", max_jobs=0, token=TOKEN,
                             extra=("--read-token-file", str(token_file))).start()
    try:
        with service.client(TOKEN) as writer:
            created = writer.post("/profiles", content=allocation_to_json(a_profile()),
                                  headers={"Content-Type": "application/json"})
            assert created.status_code == 201, created.text
        browser.get(service.url + "/")
        browser.execute_script("sessionStorage.clear()")
        browser.refresh()
        # Without the token: the reads are refused, the page says so and shows the field.
        wait(browser, lambda d: "Authorization" in d.find_element(By.ID, "status").text)
        field = wait(browser, lambda d: d.find_element(By.ID, "token") if d.find_element(By.ID, "token").is_displayed()
                     else None)
        field.send_keys(READ_TOKEN)
        browser.find_element(By.CSS_SELECTOR, "#token-form button").click()
        wait(browser, lambda d: d.find_elements(By.CSS_SELECTOR, "#profiles a[href*='format=kvpress']"))
        assert browser.find_element(By.ID, "status").text.startswith("updated")
        assert browser.execute_script("return sessionStorage.getItem('evolalloc-read-token')") == READ_TOKEN
        assert READ_TOKEN not in browser.current_url
        browser.refresh()  # the same tab keeps it
        wait(browser, lambda d: d.find_elements(By.CSS_SELECTOR, "#profiles a[href*='format=kvpress']"))

        # A download link is fetched with the token (a plain navigation would be a 401).
        browser.execute_cdp_cmd("Browser.setDownloadBehavior", {"behavior": "allow", "downloadPath": str(tmp_path)})
        browser.find_element(By.CSS_SELECTOR, "#profiles a[href*='format=kvpress']").click()
        saved = wait(browser, lambda d: [p for p in tmp_path.glob("*.json") if p.stat().st_size], timeout=30)
        exported = json.loads(saved[0].read_text())
        assert "error" not in exported and exported != {}
    finally:
        service.stop()
