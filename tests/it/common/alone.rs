//! A test that must have its process to itself runs in a child process of
//! this test binary. The metrics recorder is process-global: installed
//! once, with the first daemon's queue-label cap, and summing every
//! daemon's counters (a queue's too, when two tests name the same queue).
//! So is the console's traffic tally. A test that reads them would see
//! the other tests' daemons if it shared the process.
//!
//! The test starts `if !common::alone::here(module_path!(), "its_name").await { return; }`:
//! in the test run, that runs the child and checks it passed exactly one
//! test; in the child, it returns true and the test's body runs.

use std::time::Duration;

/// Set on the child only: the test it runs.
const ALONE_ENV: &str = "HOTQ_TEST_ALONE";
/// How long the child may take (far above the slowest such test).
const CHILD_BOUND: Duration = Duration::from_secs(600);

/// The name this binary's harness knows test `name` of `module` (a
/// `module_path!()`) by, to run it alone with `--exact`: the module path
/// without the crate's name.
pub fn test_name(module: &str, name: &str) -> String {
    let module = module.split_once("::").map_or("", |(_, inner)| inner);
    format!("{module}::{name}")
}

/// True in the child process that runs test `name` of `module` (the
/// caller's `module_path!()`) alone: the caller runs its body. False
/// after running that child and asserting it passed: the caller returns.
pub async fn here(module: &str, name: &str) -> bool {
    let test = test_name(module, name);
    if std::env::var(ALONE_ENV).as_deref() == Ok(test.as_str()) {
        return true;
    }
    let child = tokio::process::Command::new(std::env::current_exe().unwrap())
        .args([test.as_str(), "--exact", "--nocapture", "--test-threads=1"])
        .env(ALONE_ENV, &test)
        .kill_on_drop(true)
        .output();
    let output = tokio::time::timeout(CHILD_BOUND, child)
        .await
        .unwrap_or_else(|_| panic!("{test} alone took over {CHILD_BOUND:?}"))
        .unwrap();
    let stdout = String::from_utf8_lossy(&output.stdout);
    println!("{stdout}");
    eprintln!("{}", String::from_utf8_lossy(&output.stderr));
    assert!(output.status.success(), "{test} alone: {}", output.status);
    assert!(
        stdout.contains("test result: ok. 1 passed;"),
        "{test} alone ran exactly one test"
    );
    false
}
