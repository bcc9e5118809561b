//! An HTML page (`.html`): its visible text and title through the HTML5 parser.
#![no_main]
libfuzzer_sys::fuzz_target!(|data: &[u8]| lector_fuzz::ingest("html", data));
