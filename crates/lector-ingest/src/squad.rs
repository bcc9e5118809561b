//! A SQuAD dataset as documents: one per paragraph, id `<article title>#<paragraph index>`,
//! titled by its article (underscores shown as spaces). Parsed by lector-eval's SQuAD parser, the
//! one lector has.

use crate::document::Document;
use crate::error::{invalid, Result};
use lector_eval::squad;
use std::path::Path;

/// The paragraphs of the SQuAD dataset `text` (read from `path`, named in errors).
pub(crate) fn paragraphs(text: &str, path: &Path) -> Result<Vec<Document>> {
    let articles = squad::parse_file(path, text)
        .and_then(|file| file.into_articles(path))
        .map_err(|e| match e {
            lector_eval::Error::Parse {
                line,
                column,
                message,
                ..
            } => invalid(path, Some(line), format!("column {column}: {message}")),
            other => invalid(path, None, strip_path(&other.to_string(), path)),
        })?;
    let mut docs = Vec::new();
    for (a, article) in articles.into_iter().enumerate() {
        let title = match article.title {
            t if t.is_empty() => format!("article {a}"),
            t => t,
        };
        for (p, paragraph) in article.paragraphs.into_iter().enumerate() {
            let mut doc = Document::new(format!("{title}#{p}"), paragraph.context);
            doc.title = Some(title.replace('_', " "));
            docs.push(doc);
        }
    }
    Ok(docs)
}

/// `message` without the leading `path: ` that lector-eval's errors carry (ours adds its own).
fn strip_path(message: &str, path: &Path) -> String {
    let prefix = format!("{}: ", path.display());
    message.strip_prefix(&prefix).unwrap_or(message).to_string()
}
