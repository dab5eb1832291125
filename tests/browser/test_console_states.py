"""The console's states are true: the group head is where the API's
tables put it, a dead letter's deliveries agree with "Died after", a table
says "Loading…" until its first answer, ids, receipts and payloads are
there whole, leases show their payload, and an error banner shows while
the daemon errs or is unreachable, gone once it answers again. Then send
and peek from a queue page, checked against the API."""

from __future__ import annotations

from selenium.webdriver.common.by import By

from conftest import Daemon
from test_console import click, open_queue, push, wait

# Installed before the page's own scripts: holds the page's calls until
# released (for the state before the first answer), or answers them as a
# failing daemon would, 503 or no answer (for the banner).
FETCH_SHIM = """
(() => {
  const realFetch = window.fetch.bind(window);
  window.__holding = false;
  window.__held = [];
  window.__fault = null;
  window.__release = () => { window.__holding = false; window.__held.splice(0).forEach((go) => go()); };
  window.fetch = (path, init) => {
    const api = String(path).startsWith("/v1/");
    if (api && window.__fault === "503") {
      return Promise.resolve(new Response(
        '{"error":{"code":"unavailable","message":"the store is busy"}}',
        { status: 503, headers: { "Content-Type": "application/json" } }));
    }
    if (api && window.__fault === "down") return Promise.reject(new TypeError("Failed to fetch"));
    if (!window.__holding) return realFetch(path, init);
    return new Promise((resolve) => window.__held.push(() => resolve(realFetch(path, init))));
  };
})();
"""


def shim(browser, holding: bool) -> None:
    source = FETCH_SHIM + ("window.__holding = true;" if holding else "")
    browser.execute_cdp_cmd("Page.addScriptToEvaluateOnNewDocument", {"source": source})


def text_of(browser, selector: str) -> str:
    found = browser.find_elements(By.CSS_SELECTOR, selector)
    return found[0].text if found else ""


def test_a_group_head_shows_where_it_is(daemon: Daemon, browser) -> None:
    push(daemon, "orders", b"order-1", b"order-2", group="alice")
    push(daemon, "orders", b"order-3", group="bob")
    status, leased = daemon.call("POST", "/v1/queues/orders/pop?lease_ms=600000")
    assert status == 200 and leased[0]["group"] == "alice", leased
    # The API: alice's head is leased, bob's is visible.
    items = daemon.call("GET", "/v1/queues/orders/items")[1]["items"]
    assert [item["group"] for item in items] == ["bob"], items
    leases = daemon.call("GET", "/v1/queues/orders/leases")[1]["leases"]
    assert [lease["group"] for lease in leases] == ["alice"], leases
    open_queue(browser, daemon, "orders")
    wait(browser, lambda d: text_of(d, '#groups tr[data-group="alice"] td[data-col="head"]') == "leased", "alice leased")
    assert text_of(browser, '#groups tr[data-group="bob"] td[data-col="head"]') == "visible"


def test_a_dead_letters_deliveries_agree_with_died_after(daemon: Daemon, browser) -> None:
    status, body = daemon.call("PUT", "/v1/queues/mail/settings", {"max_deliveries": 1})
    assert status == 200, body
    push(daemon, "mail", b"bounce")
    status, leased = daemon.call("POST", "/v1/queues/mail/pop?lease_ms=60000")
    status, body = daemon.call("POST", f"/v1/queues/mail/nack/{leased[0]['receipt']}")
    assert body["outcome"] == "dead_lettered", body
    dead = daemon.call("GET", "/v1/queues/mail.dead/items")[1]["items"][0]
    assert dead["dead_letter_deliveries"] == 1, dead
    open_queue(browser, daemon, "mail.dead")
    row = f'#items tr[data-item="{dead["id"]}"]'
    wait(browser, lambda d: text_of(d, f'{row} td[data-col="died-after"]') == "1×", "Died after 1×")
    assert text_of(browser, f'{row} td[data-col="deliveries"]') == "1"
    # And on the source queue's page, in its dead-letter panel.
    open_queue(browser, daemon, "mail")
    row = f'#dlq-items tr[data-item="{dead["id"]}"]'
    wait(browser, lambda d: text_of(d, f'{row} td[data-col="deliveries"]') == "1", "the DLQ panel's deliveries")


def test_loading_before_the_first_answer_then_the_answer(daemon: Daemon, browser) -> None:
    push(daemon, "emails", b"hello")
    shim(browser, holding=True)
    browser.get(f"{daemon.url}/ui")
    wait(browser, lambda d: text_of(d, "#queues tr.loading") == "Loading…", "the loading row")
    assert "No queues" not in browser.find_element(By.ID, "main").text
    browser.execute_script("window.__release()")
    wait(browser, lambda d: d.find_elements(By.CSS_SELECTOR, '#queues tr[data-queue="emails"]'), "the queue")
    assert not browser.find_elements(By.CSS_SELECTOR, "#queues tr.loading")
    # A queue page too: its tiles and tables until their answers.
    browser.execute_script("window.__holding = true")
    browser.get(f"{daemon.url}/ui#/queue/fifo/emails")
    wait(browser, lambda d: text_of(d, "#tiles") == "Loading…", "the loading tiles")
    for table in ("items", "leases", "groups"):
        assert text_of(browser, f"#{table} tr.loading") == "Loading…", table
    browser.execute_script("window.__release()")
    wait(browser, lambda d: text_of(d, '[data-tile="depth"] .value') == "1", "the depth")
    wait(browser, lambda d: text_of(d, "#leases") == "No leases in flight.", "the leases' answer")


def test_ids_receipts_and_payloads_are_whole_and_leases_show_payloads(daemon: Daemon, browser) -> None:
    push(daemon, "work", b'{"job":"resize","image":"cat.png"}', b"second")
    status, leased = daemon.call("POST", "/v1/queues/work/pop?lease_ms=600000")
    receipt = leased[0]["receipt"]
    item = daemon.call("GET", "/v1/queues/work/items")[1]["items"][0]
    lease = daemon.call("GET", "/v1/queues/work/leases")[1]["leases"][0]
    assert lease["payload"] == '{"job":"resize","image":"cat.png"}' and lease["encoding"] == "text", lease
    browser.execute_cdp_cmd("Browser.grantPermissions", {
        "origin": daemon.url, "permissions": ["clipboardReadWrite", "clipboardSanitizedWrite"]})
    open_queue(browser, daemon, "work")
    lease_row = f'#leases tr[data-receipt="{receipt}"]'
    wait(browser, lambda d: text_of(d, f"{lease_row} td.payload") == lease["payload"], "the lease's payload")
    item_row = f'#items tr[data-item="{item["id"]}"]'
    wait(browser, lambda d: d.find_elements(By.CSS_SELECTOR, item_row), "the item")
    for selector, whole in ((f"{item_row} td.id .copy", item["id"]), (f"{lease_row} td.id .copy", receipt),
                            (f"{item_row} td.payload .copy", "second")):
        element = browser.find_element(By.CSS_SELECTOR, selector)
        assert element.get_attribute("textContent") == whole, selector
        assert element.value_of_css_property("user-select") == "all", selector
    # The copy button puts the whole receipt on the clipboard.
    click(browser, f"{lease_row} td.id .copy-button")
    wait(browser, lambda d: "copied" in d.find_element(By.CSS_SELECTOR, f"{lease_row} td.id .copy-button")
         .get_attribute("class"), "the copy")
    copied = browser.execute_async_script(
        "const done = arguments[0]; navigator.clipboard.readText().then(done, (e) => done('error: ' + e))")
    assert copied == receipt


def test_an_error_banner_while_the_daemon_errs_gone_when_it_answers(daemon: Daemon, browser) -> None:
    push(daemon, "jobs", b"a")
    shim(browser, holding=False)
    browser.get(f"{daemon.url}/ui")
    wait(browser, lambda d: d.find_elements(By.CSS_SELECTOR, '#queues tr[data-queue="jobs"]'), "the overview")
    banner = browser.find_element(By.ID, "banner")
    assert not banner.is_displayed()
    browser.execute_script("window.__fault = '503'")
    wait(browser, lambda d: banner.is_displayed() and "503" in banner.text and "the store is busy" in banner.text,
         "the 503 banner")
    browser.execute_script("window.__fault = null")
    wait(browser, lambda d: not banner.is_displayed(), "the banner gone")
    browser.execute_script("window.__fault = 'down'")
    wait(browser, lambda d: banner.is_displayed() and "does not answer" in banner.text, "the unreachable banner")
    browser.execute_script("window.__fault = null")
    wait(browser, lambda d: not banner.is_displayed(), "the banner gone again")
    # And for real: the daemon stopped.
    daemon.stop()
    wait(browser, lambda d: banner.is_displayed() and "does not answer" in banner.text, "the banner, daemon gone")
