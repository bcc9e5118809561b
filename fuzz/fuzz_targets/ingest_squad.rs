//! A SQuAD dataset file (`.json`): one document per paragraph.
#![no_main]
libfuzzer_sys::fuzz_target!(|data: &[u8]| lector_fuzz::ingest("json", data));
