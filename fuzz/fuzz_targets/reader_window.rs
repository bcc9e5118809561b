//! The reader's window builder with the shipped tokenizer: a question and a context (the input
//! after a 3-byte header of lengths, split at its first NUL) cut into model inputs as
//! `lector_reader` does. Every window must fit `max_seq_len`, map its positions back to the
//! context tokens it claims, and the windows together must cover the whole context in order.
#![no_main]
use lector_reader::window::{build_window, slice_encoding, special_tokens_for_pair, Layout};
use std::ops::Range;

libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    let Some(([seq, stride, max_question], rest)) = lector_fuzz::split_header::<3>(data) else {
        return;
    };
    // Small geometries, so that short inputs need several windows.
    let max_seq_len = usize::from(seq % 64) + 1;
    let doc_stride = usize::from(stride % 64);
    let max_question_len = usize::from(max_question % 32) + 1;
    let text = String::from_utf8_lossy(rest);
    let (question, context) = text.split_once('\0').unwrap_or((&text, ""));
    let tokenizer = lector_fuzz::reader_tokenizer();
    let encode = |s: &str| {
        tokenizer
            .encode(s, false)
            .expect("the tokenizer encodes any text")
    };
    let mut q = encode(question);
    if q.len() > max_question_len {
        q = slice_encoding(&q, 0..max_question_len);
    }
    let context = encode(context);
    let special = special_tokens_for_pair(tokenizer);
    let Ok(layout) = Layout::new(max_seq_len, doc_stride, q.len(), special) else {
        return;
    };
    let Ok(ranges) = layout.ranges(context.len()) else {
        return;
    };
    assert_covers(&ranges, context.len());
    let cls = tokenizer.token_to_id("[CLS]");
    for range in ranges {
        let window = build_window(tokenizer, &q, &context, range.clone(), cls)
            .expect("a window within the context builds");
        assert!(window.ids.len() <= max_seq_len, "{} ids", window.ids.len());
        assert_eq!(window.ids.len(), window.type_ids.len());
        assert_eq!(window.ids.len(), window.desired.len());
        for (k, expected) in range.clone().enumerate() {
            let pos = window.first_context_pos + k;
            assert_eq!(window.context_token(pos), Some(expected));
            assert_eq!(window.ids[pos], context.get_ids()[expected]);
        }
        assert_eq!(
            window.context_token(window.first_context_pos + range.len()),
            None
        );
    }
});

/// The ranges start at 0, end at `n`, move forward and leave no gap.
fn assert_covers(ranges: &[Range<usize>], n: usize) {
    assert_eq!(ranges.first().map(|r| r.start), Some(0));
    assert_eq!(ranges.last().map(|r| r.end), Some(n));
    for pair in ranges.windows(2) {
        assert!(pair[0].start < pair[1].start, "{ranges:?}");
        assert!(pair[1].start <= pair[0].end, "a gap in {ranges:?}");
    }
}
