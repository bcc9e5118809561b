//! Labelling logged questions: the labels, which logged question to label next, and their
//! export as SQuAD v2.0 training data ([`export_squad`], `lector label export`). The page and
//! routes that make labels (`GET /label`, `GET /v1/label/next`, `POST /v1/labels`) are
//! `lector-server`'s.
//!
//! Labels live beside the query log, in `DIR/labels.jsonl` ([`store`]): one JSON line per
//! label, appended and fsynced before the route answers. Which logged question comes next is
//! [`sample`]'s choice; [`export`] turns the labels into a SQuAD file whose contexts are the
//! documents' full texts.

pub mod export;
pub mod sample;
pub mod store;

pub use export::{char_slice, export_squad, DocumentSource, Export};
pub use sample::{margin, normalise_question, order, Queue, Sample};
pub use store::{
    read_labels, Label, LabelCounts, LabelError, LabelStore, LabelVerdict, LABELS_FILE,
};
