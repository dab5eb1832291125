"""The console's charts under a running load: the points drawn agree with
the metrics endpoint's counters within a sampling interval, and the page
says what the charts cover across several daemons."""

from __future__ import annotations

import threading
import time

from selenium.webdriver.common.by import By

from conftest import Daemon
from test_console import open_queue, wait

LOAD_ROUNDS_MAX = 100_000


def run_load(daemon: Daemon, queue: str, stop: threading.Event) -> None:
    """Pushes two items and pops one (direct) per round until told to stop."""
    for round_ in range(LOAD_ROUNDS_MAX):
        if stop.is_set():
            return
        daemon.call("POST", f"/v1/queues/{queue}/items", f"job-{round_}-a".encode())
        daemon.call("POST", f"/v1/queues/{queue}/items", f"job-{round_}-b".encode())
        daemon.call("POST", f"/v1/queues/{queue}/pop")


def polyline(browser, chart: str, series: str):
    found = browser.find_elements(
        By.CSS_SELECTOR, f'.charts-panel [data-chart="{chart}"] polyline[data-series="{series}"]')
    return found[0] if found else None


def attr(browser, chart: str, series: str, name: str):
    line = polyline(browser, chart, series)
    value = line.get_attribute(name) if line else None
    return float(value) if value not in (None, "") else None


def test_charts_match_the_metrics_counters_under_load(daemon: Daemon, browser) -> None:
    stop = threading.Event()
    load = threading.Thread(target=run_load, args=(daemon, "load", stop), daemon=True)
    load.start()
    try:
        wait(browser, lambda d: daemon.stats("load")["depth"] > 0, "the load")
        open_queue(browser, daemon, "load")
        assert "this daemon's only" in browser.find_element(By.CSS_SELECTOR, ".chart-note").text
        # Points drawn: a rate needs two samples.
        wait(browser, lambda d: (attr(d, "traffic", "pushed", "data-points") or 0) >= 2, "two push/s points")
        for name in ("depth", "leased", "delayed"):
            assert polyline(browser, "items", name) is not None, name
        for _ in range(3):
            # A sample taken after the first read of the counters, before the
            # second, sits between them: the chart is within one sample of them.
            pushed_before = daemon.metric("hotq_pushed_items_total", queue="load")
            direct_before = daemon.metric("hotq_pops_total", queue="load", path="direct")
            read_at_ms = time.time() * 1000
            wait(browser, lambda d: (attr(d, "traffic", "pushed", "data-last-at") or 0) > read_at_ms,
                 "a sample after the counters were read")
            pushed = attr(browser, "traffic", "pushed", "data-count")
            direct = attr(browser, "traffic", "popped_direct", "data-count")
            pushed_after = daemon.metric("hotq_pushed_items_total", queue="load")
            direct_after = daemon.metric("hotq_pops_total", queue="load", path="direct")
            assert pushed_before <= pushed <= pushed_after, (pushed_before, pushed, pushed_after)
            assert direct_before <= direct <= direct_after, (direct_before, direct, direct_after)
            assert attr(browser, "traffic", "pushed", "data-last") > 0
    finally:
        stop.set()
        load.join(timeout=60)
    # Load stopped: the depth drawn comes to the API's depth (the store's).
    depth = daemon.stats("load")["depth"]
    wait(browser, lambda d: attr(d, "items", "depth", "data-last") == depth, f"the depth {depth} drawn")
    # The overview charts the whole daemon and the busiest queue.
    browser.get(f"{daemon.url}/ui")
    wait(browser, lambda d: "Busiest: load" in d.find_element(By.ID, "busiest").text, "the busiest queue's charts")
    wait(browser, lambda d: (attr(d, "items", "depth", "data-points") or 0) >= 1, "the daemon's depth drawn")
    status, history = daemon.call("GET", "/v1/history?kind=fifo")
    assert status == 200 and history["samples"], history
    assert daemon.call("GET", "/v1/history?kind=nope")[0] == 400
    assert daemon.call("GET", "/v1/history?queue=bad%20name")[0] == 400
