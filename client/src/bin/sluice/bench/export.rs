//! `--report FILE`: the run as pictures. `.html` is one self-contained page
//! (inline SVG and CSS, nothing fetched) with the latency and throughput
//! charts and the summary as a table; `.svg` is the two charts stacked.

use std::fmt::Write as _;
use std::path::{Path, PathBuf};

use anyhow::{bail, Context};

use super::plot::{self, escape, Line};
use super::progress::{rates, Trace};
use super::report::Summary;

const SEND_COLOUR: &str = "#1f77b4";
const RECV_COLOUR: &str = "#d62728";

/// What `--report` writes, by the file's extension.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    Html,
    Svg,
}

/// Where and what to write.
#[derive(Clone, Debug)]
pub struct Target {
    pub path: PathBuf,
    pub kind: Kind,
}

impl Target {
    /// The target for `path`; an extension other than `.html`/`.htm` or
    /// `.svg` (any case) is refused.
    pub fn of(path: &Path) -> anyhow::Result<Self> {
        let ext = path
            .extension()
            .and_then(|e| e.to_str())
            .map(str::to_ascii_lowercase);
        let kind = match ext.as_deref() {
            Some("html" | "htm") => Kind::Html,
            Some("svg") => Kind::Svg,
            _ => bail!(
                "--report {}: unknown report type; the file must end in .html or .svg",
                path.display()
            ),
        };
        Ok(Self {
            path: path.to_owned(),
            kind,
        })
    }

    /// Writes the report of a run.
    pub fn write(&self, summary: &Summary, pictures: &Pictures) -> anyhow::Result<()> {
        let (latency, throughput) = pictures.charts(summary.setup.duration_s);
        let text = match self.kind {
            Kind::Html => html(summary, &latency, &throughput),
            Kind::Svg => plot::stacked(&latency, &throughput),
        };
        std::fs::write(&self.path, text)
            .with_context(|| format!("writing the report {}", self.path.display()))
    }
}

/// What a run hands over for its report besides the summary.
#[derive(Clone, Debug, Default)]
pub struct Pictures {
    pub trace: Trace,
    /// `Recorder::curve` of the send latency (produce, e2e).
    pub send_curve: Option<Vec<(f64, f64)>>,
    /// `Recorder::curve` of the end-to-end latency (e2e).
    pub e2e_curve: Option<Vec<(f64, f64)>>,
}

impl Pictures {
    /// The latency and throughput SVGs; the run was `warm-up + duration_s`.
    fn charts(&self, duration_s: f64) -> (String, String) {
        let mut curves = Vec::new();
        if let Some(c) = &self.send_curve {
            curves.push(line("send latency", SEND_COLOUR, c.clone()));
        }
        if let Some(c) = &self.e2e_curve {
            curves.push(line("end-to-end latency", RECV_COLOUR, c.clone()));
        }
        let t = &self.trace;
        let mut flows = Vec::new();
        if t.has_send {
            flows.push(line(
                "sent msg/s",
                SEND_COLOUR,
                rates(&t.samples, |s| s.sent),
            ));
        }
        if t.has_recv {
            flows.push(line(
                "received msg/s",
                RECV_COLOUR,
                rates(&t.samples, |s| s.recv),
            ));
        }
        let warmup = t.warmup.as_secs_f64();
        (
            plot::latency(&curves),
            plot::throughput(&flows, warmup, warmup + duration_s),
        )
    }
}

fn line(label: &'static str, colour: &'static str, points: Vec<(f64, f64)>) -> Line<'static> {
    Line {
        label,
        colour,
        points,
    }
}

/// The page: title, the summary table, both charts.
fn html(summary: &Summary, latency: &str, throughput: &str) -> String {
    let lines = summary.human();
    let title = lines.first().map_or("sluice bench", String::as_str);
    let mut page = format!(
        "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n\
         <title>{t}</title>\n<style>\nbody {{ font-family: sans-serif; margin: 2em; }}\n\
         table {{ border-collapse: collapse; margin-bottom: 1.5em; }}\n\
         th, td {{ text-align: left; padding: 0.2em 0.8em; border-bottom: 1px solid #ddd; }}\n\
         figure {{ margin: 0 0 1.5em 0; }}\n</style>\n</head>\n<body>\n<h1>{t}</h1>\n",
        t = escape(title)
    );
    page.push_str(&table(lines.get(1..).unwrap_or_default()));
    for svg in [latency, throughput] {
        let _ = write!(page, "<figure>\n{svg}</figure>\n");
    }
    page.push_str("</body>\n</html>\n");
    page
}

/// The human summary's lines as rows: `label: figures` splits into a
/// header cell and a value cell.
fn table(lines: &[String]) -> String {
    let mut out = String::from("<table class=\"summary\">\n");
    for l in lines {
        let l = l.trim();
        let _ = match l.split_once(": ") {
            Some((k, v)) => writeln!(out, "<tr><th>{}</th><td>{}</td></tr>", escape(k), escape(v)),
            None => writeln!(out, "<tr><td colspan=\"2\">{}</td></tr>", escape(l)),
        };
    }
    out.push_str("</table>\n");
    out
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::super::progress::Sample;
    use super::super::report::Setup;
    use super::super::stats::Meter;
    use super::*;

    #[test]
    fn only_html_and_svg_are_accepted() {
        let kind = |p: &str| Target::of(Path::new(p)).map(|t| t.kind);
        assert_eq!(kind("a/run.html").expect("html"), Kind::Html);
        assert_eq!(kind("RUN.SVG").expect("svg"), Kind::Svg);
        let err = kind("run.png").expect_err("png").to_string();
        assert!(
            err.contains("run.png") && err.contains(".html or .svg"),
            "{err}"
        );
        assert!(kind("report").is_err());
    }

    #[test]
    fn html_page_has_table_and_both_charts() {
        let meter = Meter::default();
        meter.add(1234, 1234 * 16, true);
        let summary = Summary {
            setup: Setup {
                bench: "produce",
                topic: "T<&>".to_owned(),
                duration_s: 2.0,
                ..Setup::default()
            },
            sent: Some(meter.flow(Duration::from_secs(2))),
            ..Summary::default()
        };
        let samples = (1..=2)
            .map(|s| Sample {
                at: Duration::from_secs(s),
                sent: 600 * s,
                recv: 0,
            })
            .collect();
        let pictures = Pictures {
            trace: Trace {
                samples,
                has_send: true,
                ..Trace::default()
            },
            send_curve: Some(vec![(0.0, 5.0), (1.0, 9.0)]),
            e2e_curve: None,
        };
        let (lat, thr) = pictures.charts(2.0);
        let page = html(&summary, &lat, &thr);
        assert!(page.starts_with("<!DOCTYPE html>"));
        assert_eq!(page.matches("<svg").count(), 2);
        assert_eq!(page.matches("<polyline").count(), 2);
        assert!(
            page.contains("<tr><th>sent</th><td>1234 msgs in 1 requests over 2.00 s"),
            "{page}"
        );
        assert!(page.contains("T&lt;&amp;&gt;") && !page.contains("T<&>"));
        // Self-contained: no scripts, and the only URL is the SVG namespace.
        assert!(!page.contains("<script"));
        assert_eq!(
            page.matches("http").count(),
            page.matches("http://www.w3.org/2000/svg\"").count()
        );
    }
}
