//! Labelling logged questions: the page at `GET /label`, the next question to label
//! (`GET /v1/label/next`), stored labels (`POST /v1/labels`), and their export as SQuAD v2.0
//! training data ([`export_squad`], `lector label export`).
//!
//! Labels live beside the query log, in `DIR/labels.jsonl` ([`store`]): one JSON line per
//! label, appended and fsynced before the route answers. Which logged question comes next is
//! [`sample`]'s choice; [`export`] turns the labels into a SQuAD file whose contexts are the
//! documents' full texts. The routes answer 404 when the server keeps no query log.

pub mod export;
pub mod routes;
pub mod sample;
pub mod store;

pub use export::{export_squad, DocumentSource, Export};
pub use routes::{next, page, save, Labelling, PAGE};
pub use sample::{margin, normalise_question, order, Queue, Sample};
pub use store::{read_labels, Label, LabelError, LabelStore, LabelVerdict, LABELS_FILE};
