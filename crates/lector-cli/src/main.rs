//! `lector`: question answering with its evidence, and the evaluation to back it.
//! A thin binary: each subcommand parses its arguments and calls into the library crates.

mod ask;
mod calibrate;
mod eval;
mod generate;
mod hops;
mod index;
mod keys;
mod label;
mod models;
mod questions;
mod read;
mod report;
mod search;
mod serve;
mod store;
mod table;
mod train;
mod values;

use clap::{Parser, Subcommand};

// mimalloc: 30-45% faster than the system allocator for the reader's many short-lived tensors.
#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

#[derive(Parser)]
#[command(
    name = "lector",
    version,
    about = "Question answering that shows its evidence"
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
    /// Arithmetic of the reader's and embedder's matrix products: f32, bf16 (inputs and weights
    /// rounded to bfloat16, float32 sums; about twice as fast where the CPU has AVX512-BF16), or
    /// int8 (weights quantized per column, inputs per row, exact integer sums; where the CPU has
    /// AVX-VNNI or AVX-512 VNNI). With bf16 and int8 the reader reads near-tied questions again
    /// in float32 (see `read --recheck-margin`) and embeddings differ slightly
    /// [default: $LECTOR_PRECISION, else f32].
    #[arg(long, global = true, value_enum)]
    precision: Option<Precision>,
}

#[derive(Clone, Copy, clap::ValueEnum)]
enum Precision {
    F32,
    Bf16,
    Int8,
}

/// `--precision`, else `$LECTOR_PRECISION`, else f32.
fn set_precision(flag: Option<Precision>) -> anyhow::Result<()> {
    let precision = match (flag, std::env::var("LECTOR_PRECISION").ok().as_deref()) {
        (Some(p), _) => p,
        (None, None | Some("") | Some("f32")) => Precision::F32,
        (None, Some("bf16")) => Precision::Bf16,
        (None, Some("int8")) => Precision::Int8,
        (None, Some(other)) => {
            anyhow::bail!("LECTOR_PRECISION is `{other}`: expected f32, bf16 or int8")
        }
    };
    lector_models::set_precision(match precision {
        Precision::F32 => lector_models::Precision::F32,
        Precision::Bf16 => lector_models::Precision::Bf16,
        Precision::Int8 => lector_models::Precision::Int8,
    });
    Ok(())
}

/// Rust ignores SIGPIPE, so printing into a closed pipe (`lector search ... | head`) fails with
/// an error and a panic in `println!`; a command-line tool should end quietly there instead,
/// as `cat` does.
fn restore_sigpipe() {
    #[cfg(unix)]
    // SAFETY: called in `main` right after parsing, before any thread exists; SIG_DFL is a valid handler.
    unsafe {
        libc::signal(libc::SIGPIPE, libc::SIG_DFL);
    }
}

#[derive(Subcommand)]
enum Command {
    /// Evaluate predictions: SQuAD EM/F1, ROUGE, retrieval metrics, paired comparisons.
    #[command(subcommand)]
    Eval(eval::EvalCommand),
    /// Extract answer spans from a context with a question-answering reader.
    Read(read::ReadArgs),
    /// Fetch and list the models lector uses.
    #[command(subcommand)]
    Models(models::ModelsCommand),
    /// Build and maintain a passage index: add files, stats, remove documents.
    #[command(subcommand)]
    Index(index::IndexCommand),
    /// Search an index: ranked passages with scores and snippets.
    Search(search::SearchArgs),
    /// Answer a question from an index: retrieve passages, read them, aggregate, show the evidence.
    Ask(ask::AskArgs),
    /// Choose the no-answer threshold on SQuAD v2.0 data and store it with the index.
    Calibrate(calibrate::CalibrateArgs),
    /// A test set from the index's documents: questions proposed by rule or by a language
    /// model, kept when the reader recovers the answer and retrieval finds the passage (SQuAD JSON).
    GenerateQuestions(questions::GenerateQuestionsArgs),
    /// Serve the HTTP API and the web page: ask, search, add and remove documents.
    Serve(serve::ServeArgs),
    /// Named keys with scopes and tenants for `serve --keys`.
    #[command(subcommand)]
    Keys(keys::KeysCommand),
    /// Labels made on the server's labelling page: export them as SQuAD v2.0 training data.
    #[command(subcommand)]
    Label(label::LabelCommand),
    /// Fine-tune a reader on your own labelled questions.
    #[command(subcommand)]
    Train(train::TrainCommand),
    /// Reports over a server's query log: drift between two time windows.
    #[command(subcommand)]
    Report(report::ReportCommand),
    /// Reads one PDF or Word file sent on standard input, for `lector serve`, which runs it
    /// with memory and CPU limits (lector_ingest::serve_worker); not for people.
    #[command(hide = true)]
    IngestWorker,
}

fn main() {
    let cli = Cli::parse();
    // A server writes to its reading workers' pipes, which a dead worker closes: it must get
    // EPIPE there, not be stopped by SIGPIPE.
    if !matches!(cli.command, Command::Serve(_)) {
        restore_sigpipe();
    }
    let result = set_precision(cli.precision).and_then(|()| match cli.command {
        Command::Eval(cmd) => eval::run(cmd),
        Command::Read(args) => read::run(args),
        Command::Models(cmd) => models::run(cmd),
        Command::Index(cmd) => index::run(cmd),
        Command::Search(args) => search::run(args),
        Command::Ask(args) => ask::run(args),
        Command::Keys(cmd) => keys::run(cmd),
        Command::Calibrate(args) => calibrate::run(args),
        Command::GenerateQuestions(args) => questions::run(args),
        Command::Serve(args) => serve::run(args),
        Command::Label(cmd) => label::run(cmd),
        Command::Train(cmd) => train::run(cmd),
        Command::Report(cmd) => report::run(cmd),
        Command::IngestWorker => {
            lector_ingest::serve_worker(std::io::stdin().lock(), std::io::stdout().lock())
                .map_err(Into::into)
        }
    });
    if let Err(err) = result {
        eprintln!("error: {err:#}");
        std::process::exit(2);
    }
}
