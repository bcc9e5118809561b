//! The labelling page at `GET /label`, the next question to label (`GET /v1/label/next`) and
//! stored labels (`POST /v1/labels`). The labels themselves, the order questions come in and
//! their SQuAD export are [`lector_querylog::label`]'s. The routes answer 404 when the server
//! keeps no query log.

pub mod routes;

pub use routes::{next, page, save, Labelling, PAGE};
