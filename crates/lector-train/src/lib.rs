//! lector-train: fine-tuning extractive readers on SQuAD-format questions.
//!
//! ```no_run
//! # fn main() -> Result<(), lector_train::Error> {
//! use lector_train::{train_reader, ReaderRun, TrainFile};
//! let run = ReaderRun::new("models/reader-minilm-squad".into(), vec![TrainFile::parse("my-questions.json")?]);
//! let outcome = train_reader(&run, std::path::Path::new("my-reader"), false, &mut |_| {})?;
//! println!("{} steps", outcome.steps);
//! # Ok(()) }
//! ```
//!
//! - Windows are built by the reader's own code ([`lector_reader::window::question_windows`]),
//!   so training sees exactly the inputs inference reads; a window without the whole answer, and
//!   every window of an unanswerable question, targets [CLS].
//! - The network ([`model::Network`]) is written with candle tensor operations, whose autograd gives
//!   the gradients; loss, gradients and AdamW steps match PyTorch on tiny checkpoints of each
//!   architecture (tests/pytorch_parity.rs).
//! - A run is a function of its [`ReaderRun`] (seeded data order, dropout and head
//!   initialisation); checkpoints hold weights and optimiser moments, so a resumed run ends with
//!   the same weights as an uninterrupted one.

pub mod error;
pub mod examples;
pub mod features;
mod fingerprint;
mod fused;
pub mod loss;
pub mod model;
pub mod negatives;
pub mod optim;
pub mod reader;
pub mod retriever;
pub mod rng;
pub mod save;
pub mod train;

pub use error::{Error, Result};
pub use examples::TrainFile;
pub use features::WindowParams;
pub use negatives::Negatives;
pub use reader::{train_reader, ReaderRun};
pub use retriever::{train_retriever, RetrieverKind, RetrieverRun};
pub use save::DevScores;
pub use train::{read_run, Event, Outcome, Schedule, StepLog};
