"""Chromium for the browser tests (Selenium): a fresh profile per driver, headless."""

import os

from selenium import webdriver
from selenium.common.exceptions import StaleElementReferenceException, WebDriverException
from selenium.webdriver.chrome.options import Options
from selenium.webdriver.chrome.service import Service
from selenium.webdriver.common.by import By
from selenium.webdriver.support import expected_conditions as ready
from selenium.webdriver.support.ui import WebDriverWait


def new_browser(width=1100):
    options = Options()
    options.binary_location = os.environ.get("CHROMIUM_BINARY", "/usr/bin/chromium")
    # Each driver gets its own fresh profile: two drivers are two people's browsers.
    for argument in ("--headless=new", "--no-sandbox", "--disable-dev-shm-usage", f"--window-size={width},900"):
        options.add_argument(argument)
    driver = webdriver.Chrome(service=Service(os.environ.get("CHROMEDRIVER", "/usr/bin/chromedriver")), options=options)
    driver.set_page_load_timeout(30)
    return driver


def navigation_wait(driver, timeout=20):
    """A wait whose checks may run while a page is being replaced: Chromium reports an element of
    the old page as stale or (mid-navigation) as "not in the document"; both mean "look again"."""
    return WebDriverWait(driver, timeout, ignored_exceptions=(StaleElementReferenceException, WebDriverException))


def wait_for(driver, element_id, timeout=20):
    return navigation_wait(driver, timeout).until(ready.presence_of_element_located((By.ID, element_id)))
