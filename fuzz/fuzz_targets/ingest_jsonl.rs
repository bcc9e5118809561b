//! A JSON-lines file (`.jsonl`): lector's `{id, title?, text, date?, metadata?}` records and
//! BEIR's `{_id, title, text}` corpus lines, read one bounded line at a time.
#![no_main]
libfuzzer_sys::fuzz_target!(|data: &[u8]| lector_fuzz::ingest("jsonl", data));
