//! BEIR queries (`queries.jsonl`: `{_id, text, metadata?}` per line) as `lector eval retrieval`
//! reads them.
#![no_main]
use lector_eval::retrieval::read_queries;

libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    let path = lector_fuzz::scratch_file("jsonl", data);
    if let Ok(queries) = read_queries(&path) {
        for query in queries {
            assert!(!query.id.is_empty(), "a query without an id");
        }
    }
});
