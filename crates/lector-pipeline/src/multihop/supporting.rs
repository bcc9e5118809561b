//! HotpotQA supporting-fact prediction: the sentences a multi-hop answer rests on, named as the
//! official metric wants them (a paragraph title and a sentence index).

use super::{HopTrace, PassageId, Support};
use lector_eval::hotpot::{Paragraph, Question, SupportingFact};
use lector_index::Index;

/// The sentences the answer of `trace` rests on: each support span's sentence; when the spans
/// cover one paragraph only, the first sentence of the best-ranked other paragraph joins them
/// (HotpotQA answers rest on two paragraphs).
///
/// `index` holds the paragraphs as documents whose id is the paragraph's title and whose text
/// is [`Paragraph::text`], so a span's character offset maps to a sentence of `question`'s
/// paragraph. A span in a paragraph that is not one of `question`'s (the open setting) names
/// that document's first sentence: sentences are not stored in the index.
pub fn supporting_facts(
    trace: &HopTrace,
    question: &Question,
    index: &Index,
) -> Vec<SupportingFact> {
    let mut facts: Vec<SupportingFact> = Vec::new();
    for support in &trace.support {
        let title = &support.passage.doc_id;
        let fact = match question.context.iter().find(|p| &p.title == title) {
            Some(paragraph) => {
                let offset = passage_start(index, &support.passage) + support.start;
                Some(fact_at(paragraph, offset))
            }
            None => fact_in_index(index, support),
        };
        if let Some(fact) = fact {
            push_unique(&mut facts, fact);
        }
    }
    add_second_paragraph(trace, &mut facts);
    facts
}

/// When every fact is in one paragraph, the first sentence of the best-ranked other one.
fn add_second_paragraph(trace: &HopTrace, facts: &mut Vec<SupportingFact>) {
    let titles: Vec<&str> = facts.iter().map(|f| f.title.as_str()).collect();
    if !titles.iter().all(|t| *t == titles[0]) {
        return;
    }
    let other = trace
        .ranking
        .iter()
        .find(|p| !titles.contains(&p.doc_id.as_str()));
    if let Some(other) = other {
        push_unique(
            facts,
            SupportingFact {
                title: other.doc_id.clone(),
                sentence: 0,
            },
        );
    }
}

fn push_unique(facts: &mut Vec<SupportingFact>, fact: SupportingFact) {
    if !facts.contains(&fact) {
        facts.push(fact);
    }
}

/// The character offset of a passage in its document.
fn passage_start(index: &Index, passage: &PassageId) -> usize {
    index
        .document(&passage.doc_id)
        .and_then(|d| d.passages.get(passage.passage).map(|s| s.char_start))
        .unwrap_or(0)
}

/// The sentence of `paragraph` holding character `offset` of its text.
fn fact_at(paragraph: &Paragraph, offset: usize) -> SupportingFact {
    let mut end = 0;
    let mut sentence = 0;
    for (i, s) in paragraph.sentences.iter().enumerate() {
        end += s.chars().count();
        sentence = i;
        if offset < end {
            break;
        }
    }
    SupportingFact {
        title: paragraph.title.clone(),
        sentence,
    }
}

/// A support span's document's first sentence, when its paragraph is not one of the question's.
fn fact_in_index(index: &Index, support: &Support) -> Option<SupportingFact> {
    index
        .document(&support.passage.doc_id)
        .map(|d| SupportingFact {
            title: d.id.to_string(),
            sentence: 0,
        })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_offset_falls_in_the_sentence_that_holds_it() {
        let paragraph = Paragraph {
            title: "T".into(),
            sentences: vec!["Ab é.".into(), " Cd.".into(), " Ef.".into()],
        };
        // "Ab é." is 5 characters (6 bytes): offset 5 is the space opening sentence 1.
        assert_eq!(fact_at(&paragraph, 4).sentence, 0);
        assert_eq!(fact_at(&paragraph, 5).sentence, 1);
        assert_eq!(fact_at(&paragraph, 9).sentence, 2);
        // Past the end: the last sentence.
        assert_eq!(fact_at(&paragraph, 99).sentence, 2);
    }
}
