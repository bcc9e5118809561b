//! Plain-text tables for human output (`--json` gives the machine form).

/// Prints `rows` under `header`, columns padded to their widest cell; numbers right-aligned.
pub fn print_table(header: &[&str], rows: &[Vec<String>]) {
    let mut widths: Vec<usize> = header.iter().map(|h| h.chars().count()).collect();
    for row in rows {
        for (w, cell) in widths.iter_mut().zip(row) {
            *w = (*w).max(cell.chars().count());
        }
    }
    let header: Vec<String> = header.iter().map(|h| h.to_string()).collect();
    println!("{}", format_row(&header, &widths));
    let rule: Vec<String> = widths.iter().map(|w| "-".repeat(*w)).collect();
    println!("{}", rule.join("  "));
    for row in rows {
        println!("{}", format_row(row, &widths));
    }
}

fn format_row(cells: &[String], widths: &[usize]) -> String {
    let padded: Vec<String> = cells
        .iter()
        .zip(widths)
        .map(|(cell, &w)| {
            if looks_numeric(cell) {
                format!("{cell:>w$}")
            } else {
                format!("{cell:<w$}")
            }
        })
        .collect();
    padded.join("  ").trim_end().to_string()
}

fn looks_numeric(cell: &str) -> bool {
    !cell.is_empty() && cell.parse::<f64>().is_ok()
}

pub use lector_eval::report::{fmt2, fmt_prob};
