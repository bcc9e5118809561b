//! Self-contained HTML reports: one file with inline CSS and SVG, no scripts, fonts or external links,
//! so it opens anywhere and can be attached to an issue or an e-mail as is.

use crate::calibration::ReliabilityBin;
use crate::error::{Error, Result};
use crate::stats::Interval;
use std::fmt::Write as _;
use std::path::Path;

/// One headline metric: a value with an optional confidence interval.
#[derive(Debug, Clone)]
pub struct Metric {
    pub name: String,
    pub value: f64,
    pub interval: Option<Interval>,
}

impl Metric {
    /// A metric shown with its interval.
    pub fn with_interval(name: impl Into<String>, interval: Interval) -> Metric {
        Metric {
            name: name.into(),
            value: interval.mean,
            interval: Some(interval),
        }
    }

    /// A metric shown as a plain value.
    pub fn plain(name: impl Into<String>, value: f64) -> Metric {
        Metric {
            name: name.into(),
            value,
            interval: None,
        }
    }
}

/// An HTML report built section by section.
#[derive(Debug, Clone)]
pub struct Report {
    title: String,
    sections: Vec<String>,
}

const CHART_WIDTH: f64 = 560.0;
const CHART_HEIGHT: f64 = 240.0;
const MARGIN_LEFT: f64 = 52.0;
const MARGIN_BOTTOM: f64 = 36.0;
const MARGIN_TOP: f64 = 12.0;
const MARGIN_RIGHT: f64 = 16.0;

impl Report {
    /// An empty report with a title.
    pub fn new(title: impl Into<String>) -> Report {
        Report {
            title: title.into(),
            sections: Vec::new(),
        }
    }

    /// A paragraph of plain text (escaped).
    pub fn note(&mut self, text: &str) -> &mut Report {
        self.sections
            .push(format!("<p class=\"note\">{}</p>", escape(text)));
        self
    }

    /// Headline metrics as large tiles: value and, when present, the interval and its level.
    pub fn metrics(&mut self, heading: &str, metrics: &[Metric], confidence: f64) -> &mut Report {
        let mut html = format!("<h2>{}</h2><div class=\"tiles\">", escape(heading));
        for m in metrics {
            let interval = m.interval.map_or(String::new(), |i| {
                format!(
                    "<div class=\"ci\">{:.0}% CI [{}, {}]</div>",
                    confidence * 100.0,
                    fmt_value(i.low),
                    fmt_value(i.high)
                )
            });
            let _ = write!(
                html,
                "<div class=\"tile\"><div class=\"name\">{}</div><div class=\"value\">{}</div>{interval}</div>",
                escape(&m.name),
                fmt_value(m.value)
            );
        }
        html.push_str("</div>");
        self.sections.push(html);
        self
    }

    /// A table with a header row.
    pub fn table(&mut self, heading: &str, header: &[&str], rows: &[Vec<String>]) -> &mut Report {
        let mut html = format!("<h2>{}</h2><table><tr>", escape(heading));
        for h in header {
            let _ = write!(html, "<th>{}</th>", escape(h));
        }
        html.push_str("</tr>");
        for row in rows {
            html.push_str("<tr>");
            for cell in row {
                let _ = write!(html, "<td>{}</td>", escape(cell));
            }
            html.push_str("</tr>");
        }
        html.push_str("</table>");
        self.sections.push(html);
        self
    }

    /// A histogram of `values` over `[low, high]` in `bins` equal bins.
    pub fn histogram(
        &mut self,
        heading: &str,
        values: &[f64],
        range: (f64, f64),
        bins: usize,
        x_label: &str,
    ) -> &mut Report {
        let counts = bin_counts(values, range, bins);
        let max_count = nice_ceiling(counts.iter().copied().max().unwrap_or(0).max(1) as f64);
        let (plot_w, plot_h) = plot_size();
        let bar_w = plot_w / bins as f64;
        let mut svg = svg_open(heading);
        for (i, &count) in counts.iter().enumerate() {
            let h = plot_h * count as f64 / max_count;
            let x = MARGIN_LEFT + i as f64 * bar_w;
            let y = MARGIN_TOP + plot_h - h;
            let lo = range.0 + (range.1 - range.0) * i as f64 / bins as f64;
            let _ = write!(
                svg,
                "<rect class=\"bar\" x=\"{x:.1}\" y=\"{y:.1}\" width=\"{:.1}\" height=\"{h:.1}\"><title>{} from {}: {count}</title></rect>",
                (bar_w - 1.0).max(0.5),
                escape(x_label),
                fmt_value(lo)
            );
        }
        axes(&mut svg, range, (0.0, max_count), x_label, "count");
        svg.push_str("</svg>");
        self.sections
            .push(format!("<h2>{}</h2>{svg}", escape(heading)));
        self
    }

    /// Two histograms of `[low, high]` in `bins` equal bins, overlaid: each bin holds one bar per
    /// series, side by side, as the share of that series' values (so series of different sizes,
    /// e.g. a signal before and after a change, compare), with a legend naming the series.
    pub fn histogram_pair(
        &mut self,
        heading: &str,
        series: [(&str, &[f64]); 2],
        range: (f64, f64),
        bins: usize,
        x_label: &str,
    ) -> &mut Report {
        let bins = bins.max(1);
        let shares: Vec<Vec<f64>> = series
            .iter()
            .map(|(_, values)| {
                let counts = bin_counts(values, range, bins);
                let total = counts.iter().sum::<usize>().max(1) as f64;
                counts.iter().map(|&c| c as f64 / total).collect()
            })
            .collect();
        let top = shares.iter().flatten().fold(0.0f64, |m, &v| m.max(v));
        let max_share = nice_ceiling(top.max(0.01));
        let (plot_w, plot_h) = plot_size();
        let bar_w = plot_w / bins as f64 / 2.0;
        let mut svg = svg_open(heading);
        for (k, ((name, _), shares)) in series.iter().zip(&shares).enumerate() {
            for (i, &share) in shares.iter().enumerate() {
                let h = plot_h * share / max_share;
                let x = MARGIN_LEFT + (2 * i + k) as f64 * bar_w;
                let lo = range.0 + (range.1 - range.0) * i as f64 / bins as f64;
                let _ = write!(
                    svg,
                    "<rect class=\"bar series{k}\" x=\"{x:.1}\" y=\"{:.1}\" width=\"{:.1}\" height=\"{h:.1}\"><title>{}: {} from {}: {}</title></rect>",
                    MARGIN_TOP + plot_h - h,
                    (bar_w - 0.5).max(0.5),
                    escape(name),
                    escape(x_label),
                    fmt_value(lo),
                    fmt_value(share)
                );
            }
            let _ = write!(
                svg,
                "<rect class=\"bar series{k}\" x=\"{:.1}\" y=\"{:.1}\" width=\"10\" height=\"10\"/><text class=\"label\" x=\"{:.1}\" y=\"{:.1}\">{}</text>",
                CHART_WIDTH - MARGIN_RIGHT - 110.0,
                MARGIN_TOP + 16.0 * k as f64,
                CHART_WIDTH - MARGIN_RIGHT - 95.0,
                MARGIN_TOP + 16.0 * k as f64 + 9.0,
                escape(name)
            );
        }
        axes(&mut svg, range, (0.0, max_share), x_label, "share");
        svg.push_str("</svg>");
        self.sections
            .push(format!("<h2>{}</h2>{svg}", escape(heading)));
        self
    }

    /// A line chart of `(x, y)` points, e.g. a recall@k curve; the y axis spans `[0, y_max]`.
    pub fn curve(
        &mut self,
        heading: &str,
        points: &[(f64, f64)],
        y_max: f64,
        x_label: &str,
        y_label: &str,
    ) -> &mut Report {
        let x_range = points
            .iter()
            .fold((f64::INFINITY, f64::NEG_INFINITY), |(lo, hi), &(x, _)| {
                (lo.min(x), hi.max(x))
            });
        let x_range = if x_range.0 < x_range.1 {
            x_range
        } else {
            (0.0, 1.0)
        };
        let (plot_w, plot_h) = plot_size();
        let to_px = |(x, y): (f64, f64)| {
            (
                MARGIN_LEFT + plot_w * (x - x_range.0) / (x_range.1 - x_range.0),
                MARGIN_TOP + plot_h * (1.0 - y / y_max),
            )
        };
        let mut svg = svg_open(heading);
        let path: Vec<String> = points
            .iter()
            .map(|&p| {
                let (x, y) = to_px(p);
                format!("{x:.1},{y:.1}")
            })
            .collect();
        let _ = write!(
            svg,
            "<polyline class=\"line\" points=\"{}\"/>",
            path.join(" ")
        );
        for &p in points {
            let (x, y) = to_px(p);
            let _ = write!(
                svg,
                "<circle class=\"dot\" cx=\"{x:.1}\" cy=\"{y:.1}\" r=\"2.5\"><title>{} {}: {}</title></circle>",
                escape(x_label),
                fmt_value(p.0),
                fmt_value(p.1)
            );
        }
        axes(&mut svg, x_range, (0.0, y_max), x_label, y_label);
        svg.push_str("</svg>");
        self.sections
            .push(format!("<h2>{}</h2>{svg}", escape(heading)));
        self
    }

    /// A reliability diagram: for each series (at most a few, e.g. raw scores and calibrated
    /// confidences), the accuracy of every non-empty confidence bin against the bin's mean
    /// confidence, joined by a line, with the diagonal a perfectly calibrated series would follow.
    /// A dot's area is proportional to the bin's share of its series' answers; its tooltip gives
    /// the bin's range, count, mean confidence and accuracy.
    pub fn reliability(
        &mut self,
        heading: &str,
        series: &[(&str, &[ReliabilityBin])],
    ) -> &mut Report {
        let (plot_w, plot_h) = plot_size();
        let to_px = |(x, y): (f64, f64)| {
            (
                MARGIN_LEFT + plot_w * x.clamp(0.0, 1.0),
                MARGIN_TOP + plot_h * (1.0 - y.clamp(0.0, 1.0)),
            )
        };
        let mut svg = svg_open(heading);
        let ((x0, y0), (x1, y1)) = (to_px((0.0, 0.0)), to_px((1.0, 1.0)));
        let _ = write!(
            svg,
            "<line class=\"diag\" x1=\"{x0:.1}\" y1=\"{y0:.1}\" x2=\"{x1:.1}\" y2=\"{y1:.1}\"/>"
        );
        for (k, (name, bins)) in series.iter().enumerate() {
            let total = bins.iter().map(|b| b.count).sum::<usize>().max(1) as f64;
            let filled: Vec<(&ReliabilityBin, (f64, f64))> = bins
                .iter()
                .filter_map(|b| Some((b, (b.confidence?, b.accuracy?))))
                .collect();
            let path: Vec<String> = filled
                .iter()
                .map(|(_, p)| {
                    let (x, y) = to_px(*p);
                    format!("{x:.1},{y:.1}")
                })
                .collect();
            let _ = write!(
                svg,
                "<polyline class=\"line series{k}\" points=\"{}\"/>",
                path.join(" ")
            );
            for (bin, point) in &filled {
                let (x, y) = to_px(*point);
                let radius = 2.0 + 8.0 * (bin.count as f64 / total).sqrt();
                let _ = write!(
                    svg,
                    "<circle class=\"dot series{k}\" cx=\"{x:.1}\" cy=\"{y:.1}\" r=\"{radius:.1}\"><title>{}: confidence {} to {}: {} answers, mean confidence {}, accuracy {}</title></circle>",
                    escape(name),
                    fmt_value(bin.low),
                    fmt_value(bin.high),
                    bin.count,
                    fmt_value(point.0),
                    fmt_value(point.1)
                );
            }
            let _ = write!(
                svg,
                "<rect class=\"bar series{k}\" x=\"{:.1}\" y=\"{:.1}\" width=\"10\" height=\"10\"/><text class=\"label\" x=\"{:.1}\" y=\"{:.1}\">{}</text>",
                MARGIN_LEFT + 10.0,
                MARGIN_TOP + 16.0 * k as f64,
                MARGIN_LEFT + 25.0,
                MARGIN_TOP + 16.0 * k as f64 + 9.0,
                escape(name)
            );
        }
        axes(&mut svg, (0.0, 1.0), (0.0, 1.0), "confidence", "accuracy");
        svg.push_str("</svg>");
        self.sections
            .push(format!("<h2>{}</h2>{svg}", escape(heading)));
        self
    }

    /// The whole report as one HTML document.
    pub fn to_html(&self) -> String {
        format!(
            "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\"><title>{title}</title><style>{STYLE}</style></head>\
             <body><h1>{title}</h1>{}<footer>Generated by lector.</footer></body></html>\n",
            self.sections.join("\n"),
            title = escape(&self.title)
        )
    }

    /// Writes the report to `path`.
    pub fn write(&self, path: &Path) -> Result<()> {
        std::fs::write(path, self.to_html()).map_err(|source| Error::Io {
            path: path.to_path_buf(),
            source,
        })
    }
}

const STYLE: &str = "body{font-family:system-ui,-apple-system,'Segoe UI',sans-serif;margin:2rem auto;max-width:60rem;color:#1d2430;padding:0 1rem}\
h1{font-size:1.6rem}h2{font-size:1.15rem;margin-top:2rem;border-bottom:1px solid #dde3ea;padding-bottom:.3rem}\
.tiles{display:flex;flex-wrap:wrap;gap:.8rem}.tile{border:1px solid #dde3ea;border-radius:8px;padding:.7rem 1rem;min-width:9rem}\
.tile .name{font-size:.8rem;color:#5b6675;text-transform:uppercase;letter-spacing:.04em}.tile .value{font-size:1.6rem;font-weight:600}\
.tile .ci{font-size:.8rem;color:#5b6675}table{border-collapse:collapse;margin-top:.5rem}\
th,td{border:1px solid #dde3ea;padding:.3rem .7rem;text-align:right}th:first-child,td:first-child{text-align:left}\
th{background:#f3f6f9}.bar{fill:#3d7bd9}.series1{fill:#e08a2e}.line{fill:none;stroke:#3d7bd9;stroke-width:2}.dot{fill:#1f4f99}\
.line.series1{stroke:#e08a2e}.dot.series1{fill:#b3661a}.diag{stroke:#8a94a3;stroke-dasharray:4 3}\
.axis{stroke:#5b6675;stroke-width:1}.tick{font-size:11px;fill:#5b6675}.label{font-size:12px;fill:#1d2430}\
.note{color:#5b6675}footer{margin-top:3rem;font-size:.8rem;color:#8a94a3}";

fn plot_size() -> (f64, f64) {
    (
        CHART_WIDTH - MARGIN_LEFT - MARGIN_RIGHT,
        CHART_HEIGHT - MARGIN_TOP - MARGIN_BOTTOM,
    )
}

fn svg_open(label: &str) -> String {
    format!(
        "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"{CHART_WIDTH}\" height=\"{CHART_HEIGHT}\" role=\"img\" aria-label=\"{}\">",
        escape(label)
    )
}

/// Draws both axes with five ticks each and their labels.
fn axes(svg: &mut String, x: (f64, f64), y: (f64, f64), x_label: &str, y_label: &str) {
    let (plot_w, plot_h) = plot_size();
    let bottom = MARGIN_TOP + plot_h;
    let _ = write!(
        svg,
        "<line class=\"axis\" x1=\"{MARGIN_LEFT}\" y1=\"{bottom}\" x2=\"{}\" y2=\"{bottom}\"/>\
         <line class=\"axis\" x1=\"{MARGIN_LEFT}\" y1=\"{MARGIN_TOP}\" x2=\"{MARGIN_LEFT}\" y2=\"{bottom}\"/>",
        MARGIN_LEFT + plot_w
    );
    for i in 0..=4 {
        let f = f64::from(i) / 4.0;
        let tx = MARGIN_LEFT + plot_w * f;
        let ty = bottom - plot_h * f;
        let _ = write!(
            svg,
            "<text class=\"tick\" x=\"{tx:.1}\" y=\"{:.1}\" text-anchor=\"middle\">{}</text>\
             <text class=\"tick\" x=\"{:.1}\" y=\"{:.1}\" text-anchor=\"end\">{}</text>",
            bottom + 14.0,
            fmt_value(x.0 + (x.1 - x.0) * f),
            MARGIN_LEFT - 5.0,
            ty + 4.0,
            fmt_value(y.0 + (y.1 - y.0) * f)
        );
    }
    let _ = write!(
        svg,
        "<text class=\"label\" x=\"{:.1}\" y=\"{:.1}\" text-anchor=\"middle\">{}</text>\
         <text class=\"label\" x=\"12\" y=\"{:.1}\" text-anchor=\"middle\" transform=\"rotate(-90 12 {:.1})\">{}</text>",
        MARGIN_LEFT + plot_w / 2.0,
        CHART_HEIGHT - 4.0,
        escape(x_label),
        MARGIN_TOP + plot_h / 2.0,
        MARGIN_TOP + plot_h / 2.0,
        escape(y_label)
    );
}

/// Counts of `values` per bin; the last bin includes the upper bound; values outside are clamped.
fn bin_counts(values: &[f64], (low, high): (f64, f64), bins: usize) -> Vec<usize> {
    let bins = bins.max(1);
    let mut counts = vec![0; bins];
    for &v in values.iter().filter(|v| v.is_finite()) {
        let f = ((v - low) / (high - low)).clamp(0.0, 1.0);
        counts[((f * bins as f64) as usize).min(bins - 1)] += 1;
    }
    counts
}

/// The smallest 1, 2 or 5 times a power of ten that is at least `v`, so axis ticks are round.
fn nice_ceiling(v: f64) -> f64 {
    let magnitude = 10f64.powf(v.log10().floor());
    [1.0, 2.0, 4.0, 5.0, 10.0]
        .iter()
        .map(|m| m * magnitude)
        .find(|&c| c >= v)
        .unwrap_or(v)
}

/// Compact number formatting for tiles and ticks.
fn fmt_value(v: f64) -> String {
    if v.is_nan() {
        "n/a".into()
    } else if v.fract() == 0.0 && v.abs() < 1e9 {
        format!("{v:.0}")
    } else if v.abs() >= 10.0 {
        format!("{v:.2}")
    } else {
        let text = format!("{v:.3}");
        text.trim_end_matches('0').trim_end_matches('.').to_string()
    }
}

/// Escapes text for HTML element content and attribute values.
fn escape(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&#39;"),
            _ => out.push(c),
        }
    }
    out
}

/// A number with two decimals, the way metric tables show percentages.
pub fn fmt2(value: f64) -> String {
    format!("{value:.2}")
}

/// A probability with four decimals, or in scientific notation when that would show nothing
/// (calibrated no-answer thresholds can be 1e-5).
pub fn fmt_prob(value: f64) -> String {
    if value != 0.0 && value.abs() < 0.001 {
        format!("{value:.3e}")
    } else {
        format!("{value:.4}")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn report_is_self_contained_and_escaped() {
        let mut report = Report::new("<script>alert(1)</script>");
        report
            .metrics("Headline", &[Metric::plain("F1", 75.08)], 0.95)
            .histogram(
                "F1 per question",
                &[0.0, 0.5, 1.0, 1.0],
                (0.0, 1.0),
                10,
                "F1",
            )
            .curve(
                "Recall@k",
                &[(1.0, 0.4), (5.0, 0.7), (20.0, 0.9)],
                1.0,
                "k",
                "recall",
            );
        let html = report.to_html();
        assert!(!html.contains("<script"));
        assert!(html.contains("&lt;script&gt;"));
        assert!(!html.contains("src=") && !html.contains("href="));
        assert_eq!(html.matches("<svg").count(), 2);
        assert_eq!(html.matches("class=\"bar\"").count(), 10);
    }

    #[test]
    fn histogram_pair_draws_shares_of_both_series_with_a_legend() {
        let mut report = Report::new("drift");
        // Series of different sizes: shares, not counts, set the bar heights.
        report.histogram_pair(
            "Question length",
            [
                ("before", &[1.0, 1.0]),
                ("after <new>", &[9.0, 9.0, 9.0, 1.0]),
            ],
            (0.0, 10.0),
            5,
            "words",
        );
        let html = report.to_html();
        assert_eq!(html.matches("<svg").count(), 1);
        // 5 bins per series plus one legend swatch each.
        assert_eq!(html.matches("class=\"bar series0\"").count(), 6);
        assert_eq!(html.matches("class=\"bar series1\"").count(), 6);
        assert!(html.contains(">after &lt;new&gt;</text>"));
        assert!(html.contains("before: words from 0: 1</title>"));
        assert!(html.contains("after &lt;new&gt;: words from 0: 0.25</title>"));
        assert!(html.contains("after &lt;new&gt;: words from 8: 0.75</title>"));
    }

    #[test]
    fn reliability_diagram_draws_the_diagonal_and_each_filled_bin() {
        let raw = crate::calibration::reliability(&[(0.95, true), (0.97, false), (0.9, false)], 10);
        let calibrated =
            crate::calibration::reliability(&[(0.3, true), (0.35, false), (0.7, false)], 10);
        let mut report = Report::new("calibration");
        report.reliability(
            "Reliability",
            &[("raw <score>", &raw), ("calibrated", &calibrated)],
        );
        let html = report.to_html();
        assert_eq!(html.matches("class=\"diag\"").count(), 1);
        // Raw: one filled bin (0.9 to 1); calibrated: two (0.3 to 0.4, 0.7 to 0.8).
        assert_eq!(html.matches("<circle class=\"dot series0\"").count(), 1);
        assert_eq!(html.matches("<circle class=\"dot series1\"").count(), 2);
        assert!(html.contains(
            "raw &lt;score&gt;: confidence 0.9 to 1: 3 answers, mean confidence 0.94, accuracy 0.333</title>"
        ));
        assert!(html.contains("calibrated: confidence 0.3 to 0.4: 2 answers"));
    }

    #[test]
    fn bins_include_both_ends() {
        assert_eq!(
            bin_counts(&[0.0, 0.05, 0.95, 1.0, 2.0], (0.0, 1.0), 10),
            vec![2, 0, 0, 0, 0, 0, 0, 0, 0, 3]
        );
    }
}
