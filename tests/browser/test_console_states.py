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


def test_send_and_peek_from_a_queue_page(daemon: Daemon, browser) -> None:
    push(daemon, "inbox", b"already here")
    status, body = daemon.call("PUT", "/v1/queues/inbox/settings", {"dedup_window_ms": 60000})
    assert status == 200, body
    open_queue(browser, daemon, "inbox")
    # A message with a group and a dedup id.
    browser.find_element(By.ID, "send-body").send_keys("sent from the console")
    browser.find_element(By.ID, "send-group").send_keys("tenant-7")
    browser.find_element(By.ID, "send-dedup").send_keys("msg-1")
    click(browser, "#send-submit")
    wait(browser, lambda d: text_of(d, "#send-result") == "sent", "the push's answer")
    items = daemon.call("GET", "/v1/queues/inbox/items")[1]["items"]
    assert [(i["payload"], i["group"]) for i in items] == [("already here", None), ("sent from the console", "tenant-7")]
    # The same dedup id again: the API stores nothing, and the page says so.
    click(browser, "#send-submit")
    wait(browser, lambda d: text_of(d, "#send-result") == "a duplicate: nothing stored", "the duplicate")
    assert daemon.stats("inbox")["depth"] == 2
    # A delayed one: not visible, counted as delayed.
    for field in ("send-group", "send-dedup"):
        browser.find_element(By.ID, field).clear()
    browser.find_element(By.ID, "send-delay").send_keys("600000")
    click(browser, "#send-submit")
    wait(browser, lambda d: text_of(d, "#send-result").startswith("sent, visible in"), "the delayed push")
    assert daemon.stats("inbox")["delayed"] == 1
    # The API's own checks: an empty body is refused, with its message.
    browser.find_element(By.ID, "send-body").clear()
    browser.find_element(By.ID, "send-delay").clear()
    click(browser, "#send-submit")
    error = wait(browser, lambda d: text_of(d, "#send-error"), "the refusal")
    status, answer = daemon.call("POST", "/v1/queues/inbox/items", b"")
    assert status == 400 and answer["error"]["message"] == error, (status, answer, error)
    # Peek the next 2: what the listing answers, and nothing is taken.
    box = browser.find_element(By.ID, "peek-n")
    box.clear()
    box.send_keys("2")
    click(browser, "#peek-submit")
    ids = wait(browser, lambda d: [r.get_attribute("data-item") for r in d.find_elements(By.CSS_SELECTOR, "#peek-items tr[data-item]")] or None, "the peek")
    assert ids == [i["id"] for i in items]
    assert daemon.stats("inbox")["depth"] == 2 and daemon.stats("inbox")["leased"] == 0
    # A limit the API refuses shows its message.
    box.clear()
    box.send_keys("1000")
    click(browser, "#peek-submit")
    wait(browser, lambda d: "limit" in text_of(d, "#peek-error"), "the refused limit")


def test_send_to_a_priority_queue(daemon: Daemon, browser) -> None:
    daemon.call("POST", "/v1/pqueues/alerts/items?priority=5", b"five")
    browser.get(f"{daemon.url}/ui#/queue/priority/alerts")
    wait(browser, lambda d: d.find_elements(By.ID, "send-priority"), "the send form")
    browser.find_element(By.ID, "send-body").send_keys("urgent")
    browser.find_element(By.ID, "send-priority").send_keys("1")
    click(browser, "#send-submit")
    wait(browser, lambda d: text_of(d, "#send-result") == "sent", "the push's answer")
    items = daemon.call("GET", "/v1/pqueues/alerts/items")[1]["items"]
    assert [(i["payload"], i["priority"]) for i in items] == [("urgent", 1), ("five", 5)]
    click(browser, "#peek-submit")
    wait(browser, lambda d: [r.get_attribute("data-item") for r in d.find_elements(By.CSS_SELECTOR, "#peek-items tr[data-item]")]
         == [i["id"] for i in items], "the peek, lowest priority first")
