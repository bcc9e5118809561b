//! Multi-hop options shared by `lector ask` and `lector eval hotpot`, and how a multi-hop
//! answer's chain is printed.

use crate::table::print_table;
use clap::{Args, ValueEnum};
use lector_pipeline::multihop::{Decomposition, HopOptions, HopTrace, PathWeights, SecondHop};

#[derive(Args, Clone)]
pub struct HopArgs {
    /// Retrieval hops: 2 follows bridges from the first hop's passages to second passages and
    /// reads passage pairs; comparison and yes/no questions are decided from sub-answers.
    #[arg(long, default_value_t = 1, value_parser = clap::value_parser!(u8).range(1..=2))]
    pub hops: u8,
    /// With --hops 2: how the second hop searches from a first-hop passage (dense needs an index
    /// with passage vectors).
    #[arg(long, value_enum, default_value_t = SecondHopArg::Lexical)]
    second_hop: SecondHopArg,
    /// With --hops 2: first-hop passages expanded.
    #[arg(value_parser = crate::values::at_least_one, long, default_value_t = HopOptions::default().beam)]
    beam: usize,
    /// With --hops 2: passage pairs read.
    #[arg(value_parser = crate::values::at_least_one, long, default_value_t = HopOptions::default().paths)]
    paths: usize,
    /// With --hops 2: stop after the first hop when its answer's confidence (1 - no-answer
    /// probability) reaches this (bridge questions only).
    #[arg(value_parser = crate::values::unit_interval, long, value_name = "P")]
    stop_confidence: Option<f64>,
    /// With --hops 2: weights of a passage pair's evidence: first-hop rank, second-hop rank,
    /// link, title named in the question, second passage's first-hop rank (see
    /// lector_pipeline::multihop::PathWeights).
    #[arg(long, value_name = "W,W,W,W,W", value_parser = parse_weights)]
    path_weights: Option<PathWeights>,
    /// With --hops 2: how bridge questions are split into sub-questions: `rules` (the first
    /// "the N of E" phrase is asked first), `llm` (the generator of the
    /// --generator-model/--endpoint options writes them) or `none` (the passage pairs alone).
    /// Comparison and yes/no sub-questions always come from rules.
    #[arg(long, default_value = "rules", value_parser = str::parse::<Decomposition>)]
    pub decompose: Decomposition,
}

/// Five non-negative weights, comma-separated, in `PathWeights`' order.
fn parse_weights(text: &str) -> Result<PathWeights, String> {
    let values = text
        .split(',')
        .map(|v| crate::values::non_negative(v.trim()))
        .collect::<Result<Vec<f64>, String>>()?;
    match values[..] {
        [first, second, link, named, alone] => Ok(PathWeights {
            first,
            second,
            link,
            named,
            alone,
        }),
        _ => Err(format!(
            "`{text}` is not five comma-separated weights (first, second, link, named, alone)"
        )),
    }
}

#[derive(Clone, Copy, ValueEnum)]
enum SecondHopArg {
    Lexical,
    Dense,
    Both,
}

impl HopArgs {
    /// The pipeline's multi-hop options.
    pub fn options(&self) -> HopOptions {
        HopOptions {
            hops: usize::from(self.hops),
            beam: self.beam,
            paths: self.paths,
            second_hop: match self.second_hop {
                SecondHopArg::Lexical => SecondHop::Lexical,
                SecondHopArg::Dense => SecondHop::Dense,
                SecondHopArg::Both => SecondHop::Both,
            },
            stop_confidence: self.stop_confidence,
            weights: self.path_weights.unwrap_or_default(),
            ..HopOptions::default()
        }
    }
}

/// The question type, the pairs read and the chain of sub-answers.
pub fn print_trace(trace: &HopTrace) {
    println!();
    let stopped = if trace.stopped {
        format!(
            ", stopped after hop 1 (confidence {:.3})",
            trace.first_confidence
        )
    } else {
        String::new()
    };
    println!(
        "multi-hop: {:?} question, {} hop(s){stopped}",
        trace.kind, trace.hops
    );
    let name = |p: &lector_pipeline::multihop::PassageId| {
        p.title.clone().unwrap_or_else(|| p.doc_id.clone())
    };
    if !trace.paths.is_empty() {
        let rows: Vec<Vec<String>> = trace
            .paths
            .iter()
            .enumerate()
            .map(|(i, p)| {
                vec![
                    (i + 1).to_string(),
                    format!("{:.3}", p.score),
                    name(&p.first),
                    name(&p.second),
                    if p.linked { "yes" } else { "" }.into(),
                ]
            })
            .collect();
        println!("passage pairs read:");
        print_table(&["rank", "score", "first", "second", "linked"], &rows);
    }
    if !trace.chain.is_empty() {
        let rows: Vec<Vec<String>> = trace
            .chain
            .iter()
            .map(|s| {
                vec![
                    s.question.clone(),
                    s.answer.clone(),
                    name(&s.passage),
                    format!("{:.3}", s.score),
                ]
            })
            .collect();
        println!("chain:");
        print_table(&["sub-question", "answer", "passage", "score"], &rows);
    }
}

/// "hop 1 12.3 ms, hop 2 45.6 ms".
pub fn hop_times(trace: &HopTrace) -> String {
    trace
        .hop_ms
        .iter()
        .enumerate()
        .map(|(i, t)| format!("hop {} {t:.1} ms", i + 1))
        .collect::<Vec<_>>()
        .join(", ")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn path_weights_are_five_non_negative_numbers() {
        let w = parse_weights("1, 2,0.5,0,3").unwrap();
        assert_eq!(
            (w.first, w.second, w.link, w.named, w.alone),
            (1.0, 2.0, 0.5, 0.0, 3.0)
        );
        assert!(parse_weights("1,2").unwrap_err().contains("five"));
        assert!(parse_weights("1,2,3,4,-1").is_err());
    }
}
