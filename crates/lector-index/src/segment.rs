//! Immutable segments: the documents, passages and postings added by one commit (or a merge).
//!
//! A segment file is `LXSEG001` followed by three sections, all numbers LEB128 varints:
//! documents (id, title?, text, date?, metadata JSON?, 16-byte content hash, first passage,
//! passage count), passages (document, byte start/end, char start/end, term count), and the
//! postings: terms in byte order, each with its passages (delta-coded, ascending) and term
//! frequencies. The manifest records each file's length and CRC-32, checked on open.

use crate::analysis::Analyzer;
use crate::codec::{DecodeResult, Decoder, Encoder};
use crate::document::{ContentHash, Document};
use crate::passage::{ChunkConfig, Span};
use std::collections::HashMap;
use std::sync::OnceLock;

const MAGIC: &[u8; 8] = b"LXSEG001";

/// A stored document (text included: passages are slices of it).
#[derive(Debug, Clone)]
pub(crate) struct StoredDoc {
    pub id: String,
    pub title: Option<String>,
    pub text: String,
    pub date: Option<String>,
    pub metadata: Option<String>,
    pub hash: ContentHash,
    pub first_passage: u32,
    pub passages: u32,
}

/// A stored passage: its document (index in the segment), span, and length in terms.
#[derive(Debug, Clone, Copy)]
pub(crate) struct StoredPassage {
    pub doc: u32,
    pub span: Span,
    pub len: u32,
}

/// One segment in memory.
#[derive(Debug, Default)]
pub(crate) struct Segment {
    pub docs: Vec<StoredDoc>,
    pub passages: Vec<StoredPassage>,
    /// Term -> index into `postings`.
    pub terms: HashMap<String, u32>,
    /// Per term: (passage, term frequency), passages ascending.
    pub postings: Vec<Vec<(u32, u32)>>,
    /// Each document's metadata parsed, on first use by a filter.
    parsed_metadata: OnceLock<Vec<Option<serde_json::Value>>>,
}

impl Segment {
    /// Document `d`'s metadata as JSON (parsed once per segment, when a filter first asks).
    pub fn metadata(&self, d: usize) -> Option<&serde_json::Value> {
        let parsed = self.parsed_metadata.get_or_init(|| {
            self.docs
                .iter()
                .map(|doc| {
                    let text = doc.metadata.as_deref()?;
                    serde_json::from_str(text).ok()
                })
                .collect()
        });
        parsed[d].as_ref()
    }

    /// Chunks and analyses `docs` into a new segment; with `tfidf`, the passages' hashed
    /// n-grams are posted too ([`crate::tfidf`]).
    pub fn build<'a>(
        docs: impl IntoIterator<Item = &'a Document>,
        analyzer: &Analyzer,
        chunking: ChunkConfig,
        tfidf: bool,
    ) -> Self {
        let mut segment = Segment::default();
        let mut terms = Vec::new();
        let mut ngrams = Vec::new();
        for doc in docs {
            let doc_index = segment.docs.len() as u32;
            let (spans, headings) = crate::docstore::spans_and_headings(doc, chunking);
            segment.docs.push(StoredDoc {
                id: doc.id.clone(),
                title: doc.title.clone(),
                text: doc.text.clone(),
                date: doc.date.clone(),
                metadata: doc.metadata.as_ref().map(|m| m.to_string()),
                hash: doc.content_hash(),
                first_passage: segment.passages.len() as u32,
                passages: spans.len() as u32,
            });
            for (n, span) in spans.into_iter().enumerate() {
                terms.clear();
                ngrams.clear();
                let heading = headings.get(n).and_then(Option::as_deref);
                for part in crate::docstore::indexed_parts(doc, span, heading) {
                    analyzer.analyze_into(part, &mut terms);
                    if tfidf {
                        ngrams.extend(crate::tfidf::keys(part));
                    }
                }
                segment.push_passage(doc_index, span, &terms, &ngrams);
            }
        }
        segment
    }

    /// Posts a passage's analysed `terms` (its BM25 length) and its n-gram keys (not counted in
    /// the length).
    fn push_passage(&mut self, doc: u32, span: Span, terms: &[String], ngrams: &[String]) {
        let passage = self.passages.len() as u32;
        self.passages.push(StoredPassage {
            doc,
            span,
            len: terms.len() as u32,
        });
        let mut counts: HashMap<&str, u32> = HashMap::new();
        for term in terms.iter().chain(ngrams) {
            *counts.entry(term).or_default() += 1;
        }
        for (term, tf) in counts {
            let id = self.term_id(term);
            self.postings[id as usize].push((passage, tf));
        }
    }

    fn term_id(&mut self, term: &str) -> u32 {
        if let Some(&id) = self.terms.get(term) {
            return id;
        }
        let id = self.postings.len() as u32;
        self.terms.insert(term.to_string(), id);
        self.postings.push(Vec::new());
        id
    }

    /// A new segment with the live documents of `parts` (in order), postings remapped without
    /// re-analysing any text.
    pub fn merge(parts: &[(&Segment, &[bool])]) -> Segment {
        let mut out = Segment::default();
        for (segment, deleted) in parts {
            let mut new_passage: Vec<Option<u32>> = vec![None; segment.passages.len()];
            for (d, doc) in segment.docs.iter().enumerate() {
                if deleted[d] {
                    continue;
                }
                let doc_index = out.docs.len() as u32;
                let mut copy = doc.clone();
                copy.first_passage = out.passages.len() as u32;
                out.docs.push(copy);
                for p in doc.first_passage..doc.first_passage + doc.passages {
                    new_passage[p as usize] = Some(out.passages.len() as u32);
                    out.passages.push(StoredPassage {
                        doc: doc_index,
                        ..segment.passages[p as usize]
                    });
                }
            }
            for (term, &id) in &segment.terms {
                let moved: Vec<(u32, u32)> = segment.postings[id as usize]
                    .iter()
                    .filter_map(|&(p, tf)| new_passage[p as usize].map(|np| (np, tf)))
                    .collect();
                if !moved.is_empty() {
                    let target = out.term_id(term);
                    out.postings[target as usize].extend(moved);
                }
            }
        }
        out
    }

    /// The segment file's bytes.
    pub fn encode(&self) -> Vec<u8> {
        let mut e = Encoder::default();
        e.raw(MAGIC);
        e.varint(self.docs.len() as u64);
        for doc in &self.docs {
            e.str(&doc.id);
            e.opt_str(doc.title.as_deref());
            e.str(&doc.text);
            e.opt_str(doc.date.as_deref());
            e.opt_str(doc.metadata.as_deref());
            e.raw(&doc.hash);
            e.varint(doc.first_passage.into());
            e.varint(doc.passages.into());
        }
        e.varint(self.passages.len() as u64);
        for p in &self.passages {
            for v in [
                p.doc as usize,
                p.span.byte_start,
                p.span.byte_end,
                p.span.char_start,
                p.span.char_end,
                p.len as usize,
            ] {
                e.varint(v as u64);
            }
        }
        self.encode_postings(&mut e);
        e.bytes
    }

    fn encode_postings(&self, e: &mut Encoder) {
        let mut terms: Vec<(&String, &u32)> = self.terms.iter().collect();
        terms.sort();
        e.varint(terms.len() as u64);
        for (term, &id) in terms {
            let list = &self.postings[id as usize];
            e.str(term);
            e.varint(list.len() as u64);
            let mut previous = 0;
            for &(passage, tf) in list {
                e.varint((passage - previous).into());
                e.varint(tf.into());
                previous = passage;
            }
        }
    }

    /// Parses a segment file, checking every count and offset against what it describes.
    pub fn decode(bytes: &[u8]) -> DecodeResult<Segment> {
        let mut d = Decoder::new(bytes);
        if d.raw(MAGIC.len())? != MAGIC {
            return Err("not a lector segment file (bad magic)".into());
        }
        let mut segment = Segment::default();
        for _ in 0..d.varint()? {
            segment.docs.push(decode_doc(&mut d)?);
        }
        for _ in 0..d.varint()? {
            segment
                .passages
                .push(decode_passage(&mut d, &segment.docs)?);
        }
        for _ in 0..d.varint()? {
            let term = d.str()?;
            let list = decode_postings(&mut d, segment.passages.len())?;
            segment.terms.insert(term, segment.postings.len() as u32);
            segment.postings.push(list);
        }
        if !d.is_done() {
            return Err("trailing bytes after the postings".into());
        }
        Ok(segment)
    }
}

fn decode_doc(d: &mut Decoder) -> DecodeResult<StoredDoc> {
    Ok(StoredDoc {
        id: d.str()?,
        title: d.opt_str()?,
        text: d.str()?,
        date: d.opt_str()?,
        metadata: d.opt_str()?,
        hash: d.raw(16)?.try_into().expect("16 bytes"),
        first_passage: d.u32()?,
        passages: d.u32()?,
    })
}

fn decode_passage(d: &mut Decoder, docs: &[StoredDoc]) -> DecodeResult<StoredPassage> {
    let doc = d.u32()?;
    let mut v = [0usize; 4];
    for slot in &mut v {
        *slot = d.varint()? as usize;
    }
    let span = Span {
        byte_start: v[0],
        byte_end: v[1],
        char_start: v[2],
        char_end: v[3],
    };
    let text = &docs
        .get(doc as usize)
        .ok_or("passage of a missing document")?
        .text;
    if span.byte_start > span.byte_end || text.get(span.byte_start..span.byte_end).is_none() {
        return Err(format!(
            "passage span {}..{} outside its document",
            span.byte_start, span.byte_end
        ));
    }
    Ok(StoredPassage {
        doc,
        span,
        len: d.u32()?,
    })
}

fn decode_postings(d: &mut Decoder, passages: usize) -> DecodeResult<Vec<(u32, u32)>> {
    let n = d.varint()? as usize;
    let mut list = Vec::with_capacity(n.min(passages));
    let mut passage = 0u64;
    for _ in 0..n {
        passage += d.varint()?;
        if passage as usize >= passages {
            return Err("posting of a missing passage".into());
        }
        list.push((passage as u32, d.u32()?));
    }
    Ok(list)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::analysis::AnalyzerConfig;

    fn docs() -> Vec<Document> {
        let mut a = Document::new("a", "Cells divide. Mitosis makes two cells.");
        a.title = Some("Cell division".into());
        a.metadata = Some(serde_json::json!({"source": "test"}));
        vec![a, Document::new("b", "Genomes vary. 東京 has many cells.")]
    }

    #[test]
    fn encode_decode_round_trip() {
        let analyzer = Analyzer::new(AnalyzerConfig::default());
        let segment = Segment::build(
            &docs(),
            &analyzer,
            ChunkConfig {
                words: 3,
                overlap: 0,
                sections: false,
                headings: false,
            },
            true,
        );
        let bytes = segment.encode();
        let back = Segment::decode(&bytes).unwrap();
        assert_eq!(back.encode(), bytes);
        assert_eq!(
            back.docs[0].metadata.as_deref(),
            Some(r#"{"source":"test"}"#)
        );
        let cell = back.terms["cell"] as usize;
        // "cell" is in the title, so in every passage of `a`, and in the last passage of `b`.
        let mut expected: Vec<u32> = (0..back.docs[0].passages).collect();
        expected.push(back.passages.len() as u32 - 1);
        assert_eq!(
            back.postings[cell].iter().map(|p| p.0).collect::<Vec<_>>(),
            expected
        );
        for cut in [0, 7, bytes.len() / 2, bytes.len() - 1] {
            assert!(Segment::decode(&bytes[..cut]).is_err());
        }
    }

    #[test]
    fn merge_drops_deleted_documents() {
        let analyzer = Analyzer::new(AnalyzerConfig::default());
        let all = docs();
        let first = Segment::build(&all[..1], &analyzer, ChunkConfig::default(), false);
        let second = Segment::build(&all[1..], &analyzer, ChunkConfig::default(), false);
        let merged = Segment::merge(&[(&first, &[true]), (&second, &[false])]);
        assert_eq!(merged.docs.len(), 1);
        assert_eq!(merged.docs[0].id, "b");
        assert!(!merged.terms.contains_key("mitosi"));
        let direct = Segment::build(&all[1..], &analyzer, ChunkConfig::default(), false);
        assert_eq!(merged.encode(), direct.encode());
    }

    #[test]
    fn section_chunking_follows_the_metadata_only_when_set() {
        let analyzer = Analyzer::new(AnalyzerConfig::default());
        let text = "# Install\nRun the installer now.\n## Linux\nUse apt.";
        let mut doc = Document::new("m.md", text);
        doc.metadata = Some(serde_json::json!({"sections": [
            {"start": 2, "level": 1, "title": "Install"},
            {"start": 36, "level": 2, "title": "Linux"},
        ]}));
        assert!(text[36..].starts_with("Linux"));
        let passages = |sections| {
            let chunking = ChunkConfig {
                sections,
                ..ChunkConfig::default()
            };
            let segment = Segment::build([&doc], &analyzer, chunking, false);
            segment
                .passages
                .iter()
                .map(|p| text[p.span.byte_start..p.span.byte_end].to_string())
                .collect::<Vec<_>>()
        };
        assert_eq!(
            passages(true),
            ["Install\nRun the installer now.", "Linux\nUse apt."]
        );
        assert_eq!(passages(false), [text]);

        // With `headings`, the parent heading's terms are in the Linux passage too.
        let mut install = Vec::new();
        analyzer.analyze_into("Install", &mut install);
        let postings = |headings| {
            let chunking = ChunkConfig {
                sections: true,
                headings,
                ..ChunkConfig::default()
            };
            let segment = Segment::build([&doc], &analyzer, chunking, false);
            let term = segment.terms[&install[0]] as usize;
            segment.postings[term]
                .iter()
                .map(|p| p.0)
                .collect::<Vec<_>>()
        };
        assert_eq!(postings(false), [0]);
        assert_eq!(postings(true), [0, 1]);
    }
}
