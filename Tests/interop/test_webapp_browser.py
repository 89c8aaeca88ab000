"""The web app in a real Chromium (Selenium): the tour of SPEC §5 from the landing page, a
second user in a second browser profile, the forgot-password path, and a CSRF refusal.
Screenshots of the main pages go to the artifacts directory (and one more on failure)."""

import os
import re
import time

import pytest
import requests
from selenium.webdriver.common.by import By

from browser import navigation_wait, new_browser, wait_for
from conftest import outbox_code, unique_email, verify_email_in_browser

ARTIFACTS = os.environ.get("TODO_ARTIFACTS", "artifacts")
PASSWORD = "Web-Passw0rd"


@pytest.fixture()
def browsers(request):
    opened = []

    def open_browser(width=1100):
        driver = new_browser(width)
        opened.append(driver)
        return driver

    yield open_browser
    report = getattr(request.node, "rep_call", None)
    for index, driver in enumerate(opened):
        if report is not None and report.failed:
            os.makedirs(ARTIFACTS, exist_ok=True)
            driver.save_screenshot(os.path.join(ARTIFACTS, f"failure-{request.node.name}-{index}.png"))
        driver.quit()


@pytest.fixture()
def web():
    url = os.environ.get("TODO_WEB_URL")
    if not url:
        pytest.fail("TODO_WEB_URL is not set: scripts/test passes the web app's URL")
    return url.rstrip("/")


def shot(driver, name):
    os.makedirs(ARTIFACTS, exist_ok=True)
    driver.save_screenshot(os.path.join(ARTIFACTS, f"web-{name}.png"))


def until(driver, condition, timeout=20):
    """Waits for a condition across page loads (elements of the old page go stale mid-check)."""
    return navigation_wait(driver, timeout).until(condition)


def sign_up(driver, web, email, name="Web User"):
    driver.get(web)
    driver.find_element(By.ID, "signUp").click()
    wait_for(driver, "attributeVerification")
    verify_email_in_browser(driver, email)
    driver.find_element(By.ID, "newPassword").send_keys(PASSWORD)
    driver.find_element(By.ID, "reenterPassword").send_keys(PASSWORD)
    driver.find_element(By.ID, "displayName").send_keys(name)
    driver.find_element(By.ID, "continue").click()
    wait_for(driver, "addForm")


def add(driver, title):
    field = driver.find_element(By.ID, "title")
    field.clear()
    field.send_keys(title)
    driver.find_element(By.ID, "add").click()
    until(driver, lambda d: title in titles(d) or d.find_elements(By.ID, "error"))


def titles(driver):
    return [item.get_attribute("data-title") for item in driver.find_elements(By.CSS_SELECTOR, "#tasks li")]


def task(driver, title):
    return driver.find_element(By.CSS_SELECTOR, f'#tasks li[data-title="{title}"]')


def test_the_tour_in_chromium(browsers, web):
    driver = browsers()
    email = unique_email("web")
    driver.get(web)
    for button in ("signUp", "signIn", "signInFacebook"):
        assert driver.find_element(By.ID, button).is_displayed()
    shot(driver, "landing")
    sign_up(driver, web, email)
    assert driver.find_element(By.TAG_NAME, "h1").text == "My tasks"
    assert driver.find_element(By.ID, "emptyList").is_displayed()
    for title in ("Buy milk", "Walk the dog", "Water the plants"):
        add(driver, title)
    assert titles(driver) == ["Water the plants", "Walk the dog", "Buy milk"]
    assert driver.find_element(By.ID, "summary").text == "3 open, 0 done"

    task(driver, "Buy milk").find_element(By.CSS_SELECTOR, "form.toggle button").click()
    until(driver, lambda d: d.find_element(By.ID, "summary").text == "2 open, 1 done")
    item = task(driver, "Walk the dog")
    item.find_element(By.TAG_NAME, "summary").click()
    field = item.find_element(By.CSS_SELECTOR, "form.rename input[name=title]")
    field.clear()
    field.send_keys("Walk the cat")
    item.find_element(By.CSS_SELECTOR, "form.rename button").click()
    until(driver, lambda d: "Walk the cat" in titles(d))
    item = task(driver, "Water the plants")
    item.find_element(By.TAG_NAME, "summary").click()
    item.find_element(By.CSS_SELECTOR, "form.delete button").click()
    until(driver, lambda d: "Water the plants" not in titles(d))
    assert titles(driver) == ["Walk the cat", "Buy milk"]
    shot(driver, "tasks")

    driver.find_element(By.ID, "filterDone").click()
    until(driver, lambda d: titles(d) == ["Buy milk"])
    driver.find_element(By.ID, "filterOpen").click()
    until(driver, lambda d: titles(d) == ["Walk the cat"])
    shot(driver, "tasks-open")
    # Un-complete from the Done filter.
    driver.find_element(By.ID, "filterDone").click()
    until(driver, lambda d: titles(d) == ["Buy milk"])
    task(driver, "Buy milk").find_element(By.CSS_SELECTOR, "form.toggle button").click()
    until(driver, lambda d: d.find_elements(By.ID, "emptyFilter"))
    driver.find_element(By.ID, "filterAll").click()
    until(driver, lambda d: d.find_element(By.ID, "summary").text == "2 open, 0 done")

    driver.find_element(By.ID, "navClaims").click()
    claims = wait_for(driver, "claims").text
    assert email in claims and "Web User" in claims
    shot(driver, "claims")

    driver.find_element(By.ID, "signOut").click()
    wait_for(driver, "signedOut")
    shot(driver, "signed-out")
    driver.get(web + "/todos")
    wait_for(driver, "signIn")  # back on the landing page

    driver.find_element(By.ID, "signIn").click()
    wait_for(driver, "localAccountForm")  # the identity service asks again: its session ended too
    driver.find_element(By.ID, "email").send_keys(email)
    driver.find_element(By.ID, "password").send_keys(PASSWORD)
    driver.find_element(By.ID, "next").click()
    wait_for(driver, "addForm")
    assert titles(driver) == ["Walk the cat", "Buy milk"]

    # Narrow screens: nothing needs horizontal scrolling.
    driver.set_window_size(320, 800)
    assert driver.execute_script("return document.documentElement.scrollWidth") <= 320
    shot(driver, "tasks-320px")


def test_a_second_user_in_another_browser_sees_an_empty_list(browsers, web):
    first = browsers()
    sign_up(first, web, unique_email("first"))
    add(first, "first user's task")
    second = browsers()
    sign_up(second, web, unique_email("second"), name="Second User")
    assert titles(second) == []
    assert second.find_element(By.ID, "emptyList").is_displayed()
    first.refresh()
    assert titles(first) == ["first user's task"]


def test_forgot_password_resets_and_signs_in(browsers, web, server):
    driver = browsers()
    email = unique_email("forgot")
    sign_up(driver, web, email)
    add(driver, "kept across the reset")
    driver.find_element(By.ID, "signOut").click()
    wait_for(driver, "signedOut")

    driver.find_element(By.ID, "signIn").click()
    wait_for(driver, "forgotPassword").click()
    wait_for(driver, "resetEmail")
    driver.find_element(By.ID, "email").send_keys(email)
    driver.find_element(By.ID, "sendCode").click()
    wait_for(driver, "resetCode")
    driver.find_element(By.ID, "verificationCode").send_keys(outbox_code(requests.Session(), server.base, email))
    driver.find_element(By.ID, "verifyCode").click()
    wait_for(driver, "resetPassword")
    driver.find_element(By.ID, "newPassword").send_keys("New-Passw0rd")
    driver.find_element(By.ID, "reenterPassword").send_keys("New-Passw0rd")
    driver.find_element(By.ID, "continue").click()
    wait_for(driver, "addForm")
    assert titles(driver) == ["kept across the reset"]
    shot(driver, "after-reset")


def test_a_form_with_a_forged_csrf_token_is_refused(browsers, web):
    driver = browsers()
    sign_up(driver, web, unique_email("csrf"))
    driver.find_element(By.ID, "title").send_keys("should not be stored")
    # WebDriver scripts are not subject to the page's CSP; the page itself runs none.
    driver.execute_script("document.querySelector('#addForm input[name=csrf_token]').value = 'forged'")
    driver.find_element(By.ID, "add").click()
    problem = wait_for(driver, "problem")
    assert driver.find_element(By.TAG_NAME, "h1").text == "This form has expired"
    assert "not sent" in problem.text
    shot(driver, "csrf-refused")
    driver.get(web + "/todos")
    wait_for(driver, "addForm")
    assert titles(driver) == []
