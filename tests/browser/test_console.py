"""The web console in a real headless Chromium against the real daemon:
what it shows is what the API reports, and its buttons change what the
API then reports. Every wait is bounded (WAIT_S) and waits for an event
on the page or in the API, never for a fixed time."""

from __future__ import annotations

import base64
import os
import threading
from pathlib import Path
from typing import Callable, Dict, List

from selenium.common.exceptions import StaleElementReferenceException
from selenium.webdriver.common.by import By
from selenium.webdriver.support.ui import WebDriverWait

from conftest import REPO, Daemon

WAIT_S = 30


def wait(browser, condition: Callable, what: str):
    # The page re-renders its tables on every refresh: an element read
    # mid-render is looked up again.
    return WebDriverWait(
        browser, WAIT_S, poll_frequency=0.05, ignored_exceptions=(StaleElementReferenceException,)
    ).until(
        lambda driver: condition(driver), message=f"timed out waiting for {what}"
    )


def push(daemon: Daemon, queue: str, *payloads: bytes, group: str = "") -> None:
    suffix = f"?group={group}" if group else ""
    for payload in payloads:
        status, body = daemon.call("POST", f"/v1/queues/{queue}/items{suffix}", payload)
        assert status == 201, body


def click(browser, selector: str) -> None:
    """Clicks the element `selector` names, looking it up again if a refresh replaced it."""
    wait(browser, lambda d: d.find_element(By.CSS_SELECTOR, selector).click() or True, f"a click on {selector}")


def cell(browser, queue: str, column: str) -> str:
    rows = browser.find_elements(By.CSS_SELECTOR, f'#queues tr[data-queue="{queue}"] td[data-col="{column}"]')
    return rows[0].text if rows else ""


def confirm(browser) -> None:
    wait(browser, lambda d: d.find_element(By.ID, "modal").is_displayed(), "the confirmation")
    browser.find_element(By.ID, "dialog-ok").click()
    wait(browser, lambda d: not d.find_element(By.ID, "modal").is_displayed(), "the dialog to close")


def notice(browser) -> str:
    return wait(
        browser,
        lambda d: d.find_element(By.ID, "notice").is_displayed() and d.find_element(By.ID, "notice").text,
        "the action's answer",
    )


def open_queue(browser, daemon: Daemon, queue: str) -> None:
    browser.get(f"{daemon.url}/ui#/queue/fifo/{queue}")
    wait(browser, lambda d: d.find_elements(By.CSS_SELECTOR, '[data-tile="depth"]'), "the queue page")


def test_overview_lists_queues_with_the_depths_the_api_reports(daemon: Daemon, browser) -> None:
    depths = {"emails": 3, "images": 7, "reports": 1}
    for queue, depth in depths.items():
        push(daemon, queue, *[f"{queue}-{i}".encode() for i in range(depth)])
    browser.get(f"{daemon.url}/ui")
    for queue in depths:
        api_depth = daemon.stats(queue)["depth"]
        assert api_depth == depths[queue]
        wait(browser, lambda d: cell(d, queue, "depth") == str(api_depth), f"{queue}'s depth {api_depth}")
    # Live: a push shows up without reloading the page.
    push(daemon, "emails", b"one more")
    wait(browser, lambda d: cell(d, "emails", "depth") == "4", "the refreshed depth")
    # The prefix filter pages through the store from the prefix on.
    box = browser.find_element(By.ID, "filter")
    box.send_keys("im")
    wait(
        browser,
        lambda d: [r.get_attribute("data-queue") for r in d.find_elements(By.CSS_SELECTOR, "#queues tr[data-queue]")]
        == ["images"],
        "only images listed",
    )


def test_a_queue_page_shows_its_items_and_leases(daemon: Daemon, browser) -> None:
    push(daemon, "work", b"first job", b"second job", b"\xff\x00binary")
    status, leased = daemon.call("POST", "/v1/queues/work/pop?lease_ms=600000")
    assert status == 200, leased
    receipt = leased[0]["receipt"]
    open_queue(browser, daemon, "work")
    status, listing = daemon.call("GET", "/v1/queues/work/items")
    assert status == 200 and len(listing["items"]) == 2, listing
    payloads = wait(
        browser,
        lambda d: [e.text for e in d.find_elements(By.CSS_SELECTOR, "#items td.payload")] or None,
        "two items",
    )
    assert len(payloads) == 2, payloads
    assert payloads[0] == "second job"
    assert payloads[1].startswith("hex") and "ff0062696e617279" in payloads[1], payloads
    wait(browser, lambda d: d.find_elements(By.CSS_SELECTOR, f'#leases tr[data-receipt="{receipt}"]'), "the lease")
    # Releasing the lease through its button is a nack: the item is back.
    click(browser, f'#leases tr[data-receipt="{receipt}"] button.release')
    confirm(browser)
    assert "is back in work" in notice(browser)
    stats = daemon.stats("work")
    assert (stats["depth"], stats["leased"]) == (3, 0), stats
    # Deleting one item through its button deletes exactly that item.
    first = listing["items"][0]["id"]
    click(browser, f'#items tr[data-item="{first}"] button.delete-item')
    confirm(browser)
    assert "Deleted one item" in notice(browser)
    status, after = daemon.call("GET", "/v1/queues/work/items")
    assert first not in [item["id"] for item in after["items"]] and len(after["items"]) == 2, after


def test_pause_resume_purge_and_redrive_through_the_buttons(daemon: Daemon, browser) -> None:
    push(daemon, "jobs", b"a", b"b", b"c")
    open_queue(browser, daemon, "jobs")
    click(browser, "#act-pause")
    confirm(browser)
    assert "paused" in notice(browser)
    assert daemon.stats("jobs")["paused"] is True
    assert daemon.call("POST", "/v1/queues/jobs/pop")[0] == 204, "a paused queue hands nothing out"
    click(browser, "#act-resume")
    confirm(browser)
    assert "resumed" in notice(browser)
    assert daemon.stats("jobs")["paused"] is False

    click(browser, "#act-purge")
    confirm(browser)
    assert "Purged 3 items" in notice(browser)
    assert daemon.stats("jobs")["depth"] == 0

    # Two dead letters: out of deliveries after one nack each.
    status, body = daemon.call("PUT", "/v1/queues/mail/settings", {"max_deliveries": 1})
    assert status == 200, body
    push(daemon, "mail", b"bounce-1", b"bounce-2")
    status, leased = daemon.call("POST", "/v1/queues/mail/pop?max=2&lease_ms=60000")
    for item in leased:
        status, body = daemon.call("POST", f"/v1/queues/mail/nack/{item['receipt']}")
        assert status == 200 and body["outcome"] == "dead_lettered", body
    assert daemon.stats("mail.dead")["depth"] == 2
    open_queue(browser, daemon, "mail.dead")
    origins = wait(
        browser,
        lambda d: [e.text for e in d.find_elements(By.CSS_SELECTOR, "#items tr[data-item] td a")] or None,
        "the dead letters",
    )
    assert origins == ["mail", "mail"], origins
    click(browser, "#act-redrive")
    confirm(browser)
    assert "Redrove 2 items" in notice(browser)
    assert daemon.stats("mail.dead")["depth"] == 0
    assert daemon.stats("mail")["depth"] == 2


def test_a_priority_queue_page_has_leases_settings_dead_letters_and_purge(daemon: Daemon, browser) -> None:
    status, body = daemon.call("PUT", "/v1/pqueues/alerts/settings", {"max_deliveries": 1})
    assert status == 200, body
    for priority, payload in ((3, b"disk 91%"), (1, b"db down"), (9, b"cert expires")):
        status, body = daemon.call("POST", f"/v1/pqueues/alerts/items?priority={priority}", payload)
        assert status == 201, body
    # The lowest priority, leased then nacked: out of deliveries, a dead letter.
    status, leased = daemon.call("POST", "/v1/pqueues/alerts/pop?end=min&max=2&lease_ms=600000")
    assert status == 200 and len(leased) == 2, leased
    status, body = daemon.call("POST", f"/v1/pqueues/alerts/nack/{leased[0]['receipt']}")
    assert status == 200 and body["outcome"] == "dead_lettered", body
    held = leased[1]["receipt"]
    browser.get(f"{daemon.url}/ui#/queue/priority/alerts")
    wait(browser, lambda d: d.find_elements(By.CSS_SELECTOR, f'#leases tr[data-receipt="{held}"]'), "the lease")
    wait(browser, lambda d: d.find_element(By.ID, "setting-max_deliveries").get_attribute("value") == "1",
         "the stored setting")
    # The dead letter, in alerts.dead (a FIFO queue), links back to the priority queue.
    link = wait(browser, lambda d: d.find_elements(By.CSS_SELECTOR, "#dlq-items tr[data-item] td a"), "the dead letter")
    assert link[0].text == "alerts" and link[0].get_attribute("href").endswith("#/queue/priority/alerts")
    assert not browser.find_elements(By.ID, "groups"), "priority queues have no groups"
    click(browser, "#act-purge")
    confirm(browser)
    assert "Purged 1 item" in notice(browser)
    status, stats = daemon.call("GET", "/v1/pqueues/alerts")
    assert (stats["depth"], stats["leased"]) == (0, 1), stats


def test_with_a_token_nothing_is_shown_without_it(daemon_with_token: Daemon, browser) -> None:
    daemon = daemon_with_token
    push(daemon, "secret-queue", b"classified")
    assert daemon.call("GET", "/v1/queues", token=None)[0] == 401
    assert daemon.call("GET", "/v1/queues/secret-queue/items", token=None)[0] == 401
    browser.get(f"{daemon.url}/ui")
    wait(browser, lambda d: d.find_element(By.ID, "modal").is_displayed(), "the token prompt")
    assert "secret-queue" not in browser.page_source
    box = browser.find_element(By.ID, "token-input")
    box.send_keys("wrong")
    browser.find_element(By.ID, "dialog-ok").click()
    wait(browser, lambda d: "refused" in d.find_element(By.ID, "dialog-text").text, "the refusal")
    assert "secret-queue" not in browser.page_source
    box = browser.find_element(By.ID, "token-input")
    box.clear()
    box.send_keys(daemon.token)
    browser.find_element(By.ID, "dialog-ok").click()
    wait(browser, lambda d: cell(d, "secret-queue", "depth") == "1", "the queue once the token is given")
    # Kept for the session: a reload asks no more.
    browser.refresh()
    wait(browser, lambda d: cell(d, "secret-queue", "depth") == "1", "the queue after a reload")
    assert not browser.find_element(By.ID, "modal").is_displayed()


def seed_for_screenshots(daemon: Daemon) -> None:
    """A small, plausible store: several queues, leases, groups, dead letters, a paused one."""
    daemon.call("PUT", "/v1/queues/emails/settings", {"max_deliveries": 2, "default_lease_ms": 30000})
    for i in range(14):
        push(daemon, "emails", f'{{"to":"user{i}@example.com","template":"welcome","locale":"en"}}'.encode())
    status, leased = daemon.call("POST", "/v1/queues/emails/pop?max=3&lease_ms=120000")
    for item in leased[:1]:
        daemon.call("POST", f"/v1/queues/emails/nack/{item['receipt']}")
    status, leased = daemon.call("POST", "/v1/queues/emails/pop?max=2&lease_ms=1")
    for _ in range(2):
        status, again = daemon.call("POST", "/v1/queues/emails/pop?max=2&lease_ms=60000")
        for item in again or []:
            daemon.call("POST", f"/v1/queues/emails/nack/{item['receipt']}")
    for i in range(5):
        push(daemon, "orders", f'{{"order":{1000 + i},"total_cents":{1999 + i * 100}}}'.encode(), group=f"customer-{i % 2}")
    push(daemon, "thumbnails", *[bytes([0x89, 0x50, 0x4E, 0x47, i, 0, 0xFF]) * 20 for i in range(40)])
    push(daemon, "reports", *[f"report-{i}".encode() for i in range(3)])
    daemon.call("POST", "/v1/queues/reports/pause")
    daemon.call("POST", "/v1/pqueues/alerts/items?priority=5", b"disk 91% on db-2")
    for name in ("audit-log", "webhooks"):
        push(daemon, name, *[f"{name}-event-{i}".encode() for i in range(2)])


def screenshot_load(daemon: Daemon, stop: threading.Event) -> None:
    """Pushes, pops under a lease, acks most and nacks some, until told to stop."""
    for round_ in range(100_000):
        if stop.is_set():
            return
        push(daemon, "emails", *[f'{{"to":"user{round_}-{i}@example.com"}}'.encode() for i in range(3)])
        push(daemon, "orders", f'{{"order":{round_}}}'.encode(), group=f"customer-{round_ % 3}")
        status, leased = daemon.call("POST", "/v1/queues/emails/pop?max=2&lease_ms=60000")
        for i, item in enumerate(leased if status == 200 else []):
            verb = "nack" if (round_ + i) % 5 == 0 else "ack"
            daemon.call("POST", f"/v1/queues/emails/{verb}/{item['receipt']}")
        daemon.call("POST", "/v1/queues/orders/pop")
        stop.wait(0.05 if round_ % 40 < 20 else 0.15)  # a load that varies


def fit_to_page(browser) -> None:
    """Sizes the window to the page's content, for a screenshot without empty space."""
    bottom = browser.execute_script("return Math.ceil(document.querySelector('main').getBoundingClientRect().bottom)")
    inner = browser.execute_script("return window.innerHeight")
    outer = browser.get_window_size()["height"]
    browser.set_window_size(1360, min(bottom + (outer - inner) + 4, 2400))
    wait(browser, lambda d: d.execute_script("return window.innerHeight") >= min(bottom, 2000), "the resize")


def test_a_fair_queue_shows_its_largest_tenants(daemon: Daemon, browser) -> None:
    # Two pushes, as two tenants make them (one batch naming both keys
    # would tie the quiet item with the head, which the backlog reads as
    # taken until the head moves on).
    for key, count in (("noisy", 3), ("quiet", 1)):
        items = [{"item": "eA==", "fair_key": key}] * count
        status, body = daemon.call("POST", "/v1/queues/tenants/items:batch", items)
        assert status == 201, body
    assert [(k["key"], k["items"]) for k in daemon.stats("tenants")["fair_backlog"]] == [("noisy", 3), ("quiet", 1)]
    open_queue(browser, daemon, "tenants")
    shown = wait(
        browser,
        lambda d: [e.text for e in d.find_elements(By.CSS_SELECTOR, '[data-tile="fair"] .value')] or None,
        "the tenants tile",
    )
    assert shown == ["noisy 3 · quiet 1"], shown


def tile_text(browser, tile: str) -> str:
    found = browser.find_elements(By.CSS_SELECTOR, f'[data-tile="{tile}"] .value')
    return found[0].text if found else ""


def test_limits_set_through_the_settings_form_are_saved_and_shown(daemon: Daemon, browser) -> None:
    push(daemon, "limited", b"a", b"b", b"c")
    open_queue(browser, daemon, "limited")
    wait(browser, lambda d: d.find_elements(By.ID, "setting-leases_max"), "the settings form")
    assert not browser.find_elements(By.CSS_SELECTOR, '[data-tile="rate-limit"], [data-tile="leases-limit"]'), \
        "no limit tiles without limits"

    # A refused value: the daemon's reason under the form, nothing saved.
    browser.find_element(By.ID, "setting-leases_max").send_keys("0")
    click(browser, "#settings-save")
    error = wait(browser, lambda d: d.find_element(By.ID, "settings-error").text, "the refusal")
    assert "leases_max must be an integer from 1 to 1000000" in error, error
    status, settings = daemon.call("GET", "/v1/queues/limited/settings")
    assert status == 200 and settings["stored"] == {}, settings

    field = browser.find_element(By.ID, "setting-leases_max")
    field.clear()
    field.send_keys("10")
    browser.find_element(By.ID, "setting-pop_rate_max").send_keys("1000")
    click(browser, "#settings-save")
    wait(browser, lambda d: d.find_element(By.ID, "settings-saved").text == "saved", "the save")
    status, settings = daemon.call("GET", "/v1/queues/limited/settings")
    assert status == 200, settings
    assert settings["stored"] == {"leases_max": 10, "pop_rate_max": 1000}, settings
    # The burst nobody set, a tenth of a second's worth, is the field's default.
    burst = browser.find_element(By.ID, "setting-pop_rate_burst")
    assert (burst.get_attribute("value"), burst.get_attribute("placeholder")) == ("", "100 (default)")

    # The limits in force, next to the stats: the leases against the limit.
    status, leased = daemon.call("POST", "/v1/queues/limited/pop?max=2&lease_ms=600000")
    assert status == 200 and len(leased) == 2, leased
    wait(browser, lambda d: tile_text(d, "leases-limit") == "2 / 10", "the leases against leases_max")
    assert tile_text(browser, "rate-limit") == "1,000/s (burst 100)"


def test_screenshots(daemon: Daemon, browser) -> None:
    """Saves docs/console-overview.png and docs/console-queue.png (only
    when HOTQ_CONSOLE_SCREENSHOTS names a directory)."""
    directory = os.environ.get("HOTQ_CONSOLE_SCREENSHOTS")
    if not directory:
        return
    seed_for_screenshots(daemon)
    # A load while the charts fill: their points come from the sampler,
    # one per 10 s step, so this runs about a minute.
    stop = threading.Event()
    load = threading.Thread(target=screenshot_load, args=(daemon, stop), daemon=True)
    load.start()
    try:
        browser.get(f"{daemon.url}/ui")
        wait(browser, lambda d: cell(d, "emails", "depth") != "", "the overview")
        WebDriverWait(browser, 120, poll_frequency=0.5).until(
            lambda d: len(d.find_elements(By.CSS_SELECTOR, '#busiest [data-chart="traffic"] polyline[data-points="6"]')) > 0,
            message="six points of traffic")
        wait(browser, lambda d: cell(d, "emails", "push") not in ("", "–"), "a rate")
    finally:
        stop.set()
        load.join(timeout=60)
    fit_to_page(browser)
    browser.save_screenshot(str(Path(directory) / "console-overview.png"))
    # The queue page's top: its tiles, charts and first items (its 50 items
    # would make a tall, heavy image).
    browser.set_window_size(1360, 1100)
    open_queue(browser, daemon, "emails")
    wait(browser, lambda d: d.find_elements(By.CSS_SELECTOR, '[data-chart="traffic"] polyline[data-last]'), "charts")
    wait(browser, lambda d: d.find_elements(By.CSS_SELECTOR, "#leases tr[data-receipt]"), "leases")
    browser.save_screenshot(str(Path(directory) / "console-queue.png"))
