//! The web page under its own security headers, in headless Chromium: it still answers with
//! the Content-Security-Policy `lector serve` sends (its inline script and style allowed by
//! hash), and it keeps the API key for the tab only unless the user ticks "remember": a new
//! browser session on the same profile has forgotten a key typed without it.

mod common;

use common::{browser_or_skip, dump_dom, index, serve};
use std::path::Path;

const QUESTION: &str = "?q=Which%20team%20won%20Super%20Bowl%2050%3F";

/// A fresh browser session on `profile` at `url`: the page's `data-state` once it settles.
fn state(browser: &Path, profile: &Path, url: &str) -> String {
    let dom = dump_dom(browser, profile, url, "<body");
    dom.split("data-state=\"")
        .nth(1)
        .and_then(|rest| rest.split('"').next())
        .expect("the page's state")
        .to_string()
}

#[test]
fn the_api_key_is_kept_for_the_tab_unless_remembered_in_headless_chromium() {
    let Some(browser) =
        browser_or_skip("the_api_key_is_kept_for_the_tab_unless_remembered_in_headless_chromium")
    else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let index = index(dir.path());
    let key_file = dir.path().join("key");
    std::fs::write(&key_file, "tab-s3cret\n").unwrap();
    let (mut server, addr) = serve(&index, &["--api-key-file", &key_file.to_string_lossy()]);
    let page = format!("http://{addr}/{QUESTION}");

    // Typed without "remember": the tab asks with it (the page runs under the policy)...
    let profile = dir.path().join("forgetting");
    let typed = format!("{page}#test-key=tab-s3cret");
    assert_eq!(state(&browser, &profile, &typed), "answered");
    // ...and the next browser session has no key: the server refuses the ask.
    assert_eq!(state(&browser, &profile, &page), "error");

    // Remembered: the next session still has it.
    let profile = dir.path().join("remembering");
    let remembered = format!("{page}#test-key=remember:tab-s3cret");
    assert_eq!(state(&browser, &profile, &remembered), "answered");
    assert_eq!(state(&browser, &profile, &page), "answered");
    server.kill_hard();
}
