"""The admin console (SPEC §2.13) in Chromium at 375 px wide, without running any script of
ours (the console has none): an admin made with `users add --role admin` signs in through the
tenant's own flow, creates and disables an account, reads the sign-in log and one sign-in's
steps, and finds the change in the audit log; a form posted from another origin, even with the
right CSRF token, changes nothing. Screenshots go to artifacts/."""

import os
import subprocess
import threading
from http.server import BaseHTTPRequestHandler, HTTPServer
from pathlib import Path

import pytest
from selenium.webdriver.common.by import By

from browser import navigation_wait, new_browser, wait_for
from conftest import unique_email

ARTIFACTS = os.environ.get("TODO_ARTIFACTS", "artifacts")
WIDTH = 375


def shot(driver, name):
    os.makedirs(ARTIFACTS, exist_ok=True)
    driver.save_screenshot(os.path.join(ARTIFACTS, f"admin-{name}.png"))


def fits(driver):
    """Nothing on the page needs scrolling sideways (tables scroll inside their own box)."""
    return driver.execute_script("return document.documentElement.scrollWidth") <= WIDTH


@pytest.fixture()
def console_browser(request):
    driver = new_browser()
    driver.set_window_size(WIDTH, 900)
    yield driver
    report = getattr(request.node, "rep_call", None)
    if report is not None and report.failed:
        shot(driver, f"failure-{request.node.name}")
    driver.quit()


def test_an_admin_manages_users_and_reads_the_logs_at_375_px(server, console_browser):
    driver = console_browser
    data = str(Path(os.environ["TODO_SETTINGS"]).parent)
    admin = unique_email("admin")
    command = [os.environ["TODO_SERVER_BIN"], "users", "add", "--data-dir", data, "--email", admin, "--name", "Ada Admin",
               "--password-stdin", "--role", "admin"]
    # The server's own store: its PostgreSQL in the PostgreSQL run.
    if os.environ.get("TODO_SERVER_DATABASE_URL"):
        command += ["--database-url", os.environ["TODO_SERVER_DATABASE_URL"]]
    subprocess.run(command, input="Console-Pass1\n", capture_output=True, text=True, check=True, timeout=60)

    driver.get(f"{server.base}/admin")
    wait_for(driver, "email")  # the tenant's own sign-in page
    driver.find_element(By.ID, "email").send_keys(admin)
    driver.find_element(By.ID, "password").send_keys("Console-Pass1")
    driver.find_element(By.ID, "next").click()
    wait_for(driver, "users")
    assert "Sign out Ada Admin" in driver.page_source
    assert fits(driver)
    shot(driver, "users-375px")

    # Create an account through the form, then disable it.
    member = unique_email("member")
    form = driver.find_element(By.ID, "create")
    form.find_element(By.NAME, "email").send_keys(member)
    form.find_element(By.NAME, "name").send_keys("Mem Ber")
    form.find_element(By.NAME, "password").send_keys("Member-Pass1")
    form.find_element(By.CSS_SELECTOR, "button[type=submit]").click()
    wait_for(driver, "oid")
    oid = driver.find_element(By.ID, "oid").text
    assert driver.find_element(By.ID, "notice").text == "Account created."
    driver.find_element(By.ID, "disable").click()
    # The same page comes back changed: wait for the new one, not the old one's elements.
    navigation_wait(driver).until(
        lambda d: d.find_element(By.ID, "state").text.startswith("disabled"))
    assert driver.find_element(By.ID, "notice").text.startswith("Account disabled")
    assert fits(driver)
    shot(driver, "user-375px")

    # The sign-in log: the admin's own sign-in, and its steps.
    driver.get(f"{server.base}/admin/sign-ins?user={admin}")
    wait_for(driver, "signins")
    assert fits(driver)
    shot(driver, "sign-ins-375px")
    driver.find_element(By.CSS_SELECTOR, "#signins tbody a").click()
    wait_for(driver, "steps")
    assert "completed" in driver.find_element(By.ID, "steps").text
    shot(driver, "sign-in-steps-375px")

    # The audit log names the admin as the one who disabled the account.
    driver.get(f"{server.base}/admin/audit?category=UserManagement")
    wait_for(driver, "audit")
    rows = [row.text for row in driver.find_elements(By.CSS_SELECTOR, "#audit tbody tr")]
    assert any("Update user" in row and admin in row and "AccountEnabled: false" in row for row in rows), rows
    assert fits(driver)
    shot(driver, "audit-375px")

    # "Run user flow": the tenant's flow, then the ID token decoded here, verified.
    driver.get(f"{server.base}/admin/flows")
    driver.find_element(By.ID, "run-B2C_1_susi").click()
    wait_for(driver, "email")
    driver.find_element(By.ID, "email").send_keys(admin)
    driver.find_element(By.ID, "password").send_keys("Console-Pass1")
    driver.find_element(By.ID, "next").click()
    wait_for(driver, "claims")
    assert driver.find_element(By.ID, "verified").text.startswith("Signature, issuer, audience, lifetime and nonce verified")
    assert "B2C_1_susi" in driver.find_element(By.ID, "claims").text
    shot(driver, "run-user-flow-375px")

    # A page on another origin posts the console's own form, with the right token: refused.
    driver.get(f"{server.base}/admin/audit?category=UserManagement")
    wait_for(driver, "audit")
    csrf = driver.find_element(By.NAME, "csrf").get_attribute("value")
    page = (f"<!DOCTYPE html><form method='post' action='{server.base}/admin/users/{oid}/enable'>"
            f"<input type='hidden' name='csrf' value='{csrf}'><button id='go'>Win a prize</button></form>").encode()

    class Attacker(BaseHTTPRequestHandler):
        def do_GET(self):
            self.send_response(200)
            self.send_header("Content-Type", "text/html")
            self.send_header("Content-Length", str(len(page)))
            self.end_headers()
            self.wfile.write(page)

        def log_message(self, *args):
            pass

    attacker = HTTPServer(("127.0.0.1", 0), Attacker)
    threading.Thread(target=attacker.serve_forever, daemon=True).start()
    try:
        driver.get(f"http://127.0.0.1:{attacker.server_address[1]}/")
        driver.find_element(By.ID, "go").click()
        wait_for(driver, "message")
        assert "did not come from your console session" in driver.page_source or "Sign in" in driver.page_source
    finally:
        attacker.shutdown()
    driver.get(f"{server.base}/admin/users/{oid}")
    wait_for(driver, "state")
    assert driver.find_element(By.ID, "state").text.startswith("disabled"), "the cross-site post changed the account"
