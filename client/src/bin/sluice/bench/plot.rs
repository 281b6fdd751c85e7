//! SVG pictures of a run for `--report`: pure functions from data to
//! text, with no scripts, fonts or anything fetched. Two charts: latency
//! against percentile on a "nines" scale, and msg/s over the seconds of
//! the run with the warm-up shaded.

use std::fmt::Write as _;

use super::stats::{fmt_rate, fmt_us};

/// Chart size in SVG user units (pixels).
pub const WIDTH: f64 = 800.0;
pub const HEIGHT: f64 = 320.0;
const LEFT: f64 = 80.0;
const RIGHT: f64 = 24.0;
const TOP: f64 = 40.0;
const BOTTOM: f64 = 48.0;
/// Horizontal gridlines above zero.
const Y_TICKS: u32 = 4;

/// One series of a chart.
#[derive(Clone, Debug)]
pub struct Line<'a> {
    pub label: &'a str,
    /// A CSS colour.
    pub colour: &'a str,
    /// `(x, y)`; points with a non-finite coordinate are skipped.
    pub points: Vec<(f64, f64)>,
}

/// Text with `&`, `<`, `>`, `"` and `'` escaped for XML.
pub fn escape(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for c in s.chars() {
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

/// `0%`, `90%`, `99%`, `99.9%`, `99.99%` … for `nines` nines.
pub fn nines_label(nines: u32) -> String {
    match nines {
        0 => "0%".to_owned(),
        1 => "90%".to_owned(),
        n => format!(
            "99{}{}%",
            if n > 2 { "." } else { "" },
            "9".repeat(n as usize - 2)
        ),
    }
}

/// Latency (µs) against percentile, `x` in nines (see `Recorder::curve`).
pub fn latency(lines: &[Line]) -> String {
    let x_max = x_extent(lines).max(1.0).ceil();
    #[expect(
        clippy::cast_possible_truncation,
        clippy::cast_sign_loss,
        reason = "a few nines"
    )]
    let ticks = (0..=x_max as u32)
        .map(|n| (f64::from(n), nines_label(n)))
        .collect();
    draw(&Chart {
        title: "Latency by percentile",
        x_label: "percentile",
        y_label: "latency",
        x_max,
        x_ticks: ticks,
        y_fmt: fmt_us,
        lines,
        shade: None,
    })
}

/// Messages per second against seconds since the start, the first
/// `warmup` seconds shaded; the x axis spans at least `run` seconds.
pub fn throughput(lines: &[Line], warmup: f64, run: f64) -> String {
    let x_max = x_extent(lines).max(finite_or_zero(run)).max(1.0);
    let step = [1.0, 2.0, 5.0, 10.0, 15.0, 30.0, 60.0, 120.0, 300.0, 600.0]
        .into_iter()
        .find(|s| x_max / s <= 10.0)
        .unwrap_or(3600.0);
    let mut ticks = Vec::new();
    let mut t = 0.0;
    while t <= x_max + 1e-9 {
        ticks.push((t, format!("{t:.0}s")));
        t += step;
    }
    let warmup = finite_or_zero(warmup);
    draw(&Chart {
        title: "Throughput over time",
        x_label: "seconds since start",
        y_label: "msg/s",
        x_max,
        x_ticks: ticks,
        y_fmt: fmt_rate,
        lines,
        shade: (warmup > 0.0).then_some((0.0, warmup.min(x_max), "warm-up")),
    })
}

/// The two charts stacked in one standalone SVG document.
pub fn stacked(top: &str, bottom: &str) -> String {
    format!(
        "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n\
         <svg xmlns=\"http://www.w3.org/2000/svg\" width=\"{WIDTH}\" height=\"{h}\" \
         viewBox=\"0 0 {WIDTH} {h}\">\n<g>{top}</g>\n\
         <g transform=\"translate(0,{HEIGHT})\">{bottom}</g>\n</svg>\n",
        h = 2.0 * HEIGHT
    )
}

fn finite_or_zero(x: f64) -> f64 {
    if x.is_finite() {
        x
    } else {
        0.0
    }
}

fn finite<'a>(lines: &'a [Line<'a>]) -> impl Iterator<Item = (f64, f64)> + 'a {
    lines
        .iter()
        .flat_map(|l| l.points.iter().copied())
        .filter(|(x, y)| x.is_finite() && y.is_finite())
}

fn x_extent(lines: &[Line]) -> f64 {
    finite(lines).map(|(x, _)| x).fold(0.0, f64::max)
}

struct Chart<'a> {
    title: &'a str,
    x_label: &'a str,
    y_label: &'a str,
    x_max: f64,
    x_ticks: Vec<(f64, String)>,
    y_fmt: fn(f64) -> String,
    lines: &'a [Line<'a>],
    /// `(from, to, label)` in x units.
    shade: Option<(f64, f64, &'a str)>,
}

/// Maps data to the plot area; a zero, negative or non-finite extent maps
/// everything to the lower edge.
struct Scale {
    x_max: f64,
    y_max: f64,
}

impl Scale {
    fn x(&self, x: f64) -> f64 {
        LEFT + ratio(x, self.x_max) * (WIDTH - LEFT - RIGHT)
    }

    fn y(&self, y: f64) -> f64 {
        HEIGHT - BOTTOM - ratio(y, self.y_max) * (HEIGHT - TOP - BOTTOM)
    }
}

fn ratio(v: f64, max: f64) -> f64 {
    let r = v / max;
    if r.is_finite() && max > 0.0 {
        r.clamp(0.0, 1.0)
    } else {
        0.0
    }
}

fn draw(c: &Chart) -> String {
    let y_max = finite(c.lines).map(|(_, y)| y).fold(0.0, f64::max);
    let s = Scale {
        x_max: c.x_max,
        y_max,
    };
    let mut svg = format!(
        "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"{WIDTH}\" height=\"{HEIGHT}\" \
         viewBox=\"0 0 {WIDTH} {HEIGHT}\" font-family=\"sans-serif\" font-size=\"12\">\n\
         <title>{t}</title>\n<rect width=\"{WIDTH}\" height=\"{HEIGHT}\" fill=\"white\"/>\n\
         <text x=\"{LEFT}\" y=\"22\" font-size=\"15\" font-weight=\"bold\">{t}</text>\n",
        t = escape(c.title)
    );
    if let Some((from, to, label)) = c.shade {
        let (x0, x1) = (s.x(from), s.x(to));
        let _ = writeln!(
            svg,
            "<rect class=\"warmup\" x=\"{x0:.1}\" y=\"{TOP}\" width=\"{:.1}\" height=\"{:.1}\" \
             fill=\"#e4e4e4\"/><text x=\"{:.1}\" y=\"{:.1}\" fill=\"#777\">{}</text>",
            x1 - x0,
            HEIGHT - TOP - BOTTOM,
            x0 + 4.0,
            TOP + 14.0,
            escape(label)
        );
    }
    axes(&mut svg, c, &s);
    if finite(c.lines).next().is_none() {
        let _ = writeln!(
            svg,
            "<text class=\"nodata\" x=\"{:.1}\" y=\"{:.1}\" text-anchor=\"middle\" \
             fill=\"#777\">no data</text>",
            (LEFT + WIDTH - RIGHT) / 2.0,
            (TOP + HEIGHT - BOTTOM) / 2.0
        );
    }
    for (i, line) in c.lines.iter().enumerate() {
        series(&mut svg, line, &s, c.lines.len() - i);
    }
    svg.push_str("</svg>\n");
    svg
}

fn axes(svg: &mut String, c: &Chart, s: &Scale) {
    let (x0, x1, y0, y1) = (LEFT, WIDTH - RIGHT, HEIGHT - BOTTOM, TOP);
    for i in 0..=Y_TICKS {
        let v = s.y_max * f64::from(i) / f64::from(Y_TICKS);
        let y = y0 - f64::from(i) / f64::from(Y_TICKS) * (y0 - y1);
        let _ = writeln!(
            svg,
            "<line x1=\"{x0}\" y1=\"{y:.1}\" x2=\"{x1}\" y2=\"{y:.1}\" stroke=\"#ddd\"/>\
             <text x=\"{:.1}\" y=\"{:.1}\" text-anchor=\"end\">{}</text>",
            x0 - 6.0,
            y + 4.0,
            escape(&(c.y_fmt)(v))
        );
    }
    for (x, label) in &c.x_ticks {
        let px = s.x(*x);
        let _ = writeln!(
            svg,
            "<line x1=\"{px:.1}\" y1=\"{y0}\" x2=\"{px:.1}\" y2=\"{:.1}\" stroke=\"#999\"/>\
             <text x=\"{px:.1}\" y=\"{:.1}\" text-anchor=\"middle\">{}</text>",
            y0 + 5.0,
            y0 + 18.0,
            escape(label)
        );
    }
    let _ = writeln!(
        svg,
        "<path d=\"M{x0},{y1} V{y0} H{x1}\" fill=\"none\" stroke=\"#333\"/>\n\
         <text x=\"{:.1}\" y=\"{:.1}\" text-anchor=\"middle\">{}</text>\n\
         <text x=\"16\" y=\"{:.1}\" text-anchor=\"middle\" \
         transform=\"rotate(-90 16 {:.1})\">{}</text>",
        f64::midpoint(x0, x1),
        HEIGHT - 10.0,
        escape(c.x_label),
        f64::midpoint(y0, y1),
        f64::midpoint(y0, y1),
        escape(c.y_label)
    );
}

/// Draws `line` with its legend entry `from_right` places (1 = last) from
/// the right.
fn series(svg: &mut String, line: &Line, s: &Scale, from_right: usize) {
    let mut points = String::new();
    for (x, y) in line
        .points
        .iter()
        .filter(|(x, y)| x.is_finite() && y.is_finite())
    {
        if !points.is_empty() {
            points.push(' ');
        }
        let _ = write!(points, "{:.1},{:.1}", s.x(*x), s.y(*y));
    }
    let colour = escape(line.colour);
    if !points.is_empty() {
        let _ = writeln!(
            svg,
            "<polyline fill=\"none\" stroke=\"{colour}\" stroke-width=\"1.8\" points=\"{points}\"/>"
        );
    }
    // The legend sits in the title row, right of the title, off the data.
    #[expect(clippy::cast_precision_loss, reason = "a few series")]
    let lx = WIDTH - RIGHT - 170.0 * from_right as f64;
    let ly = 22.0;
    let _ = writeln!(
        svg,
        "<rect x=\"{lx}\" y=\"{:.1}\" width=\"12\" height=\"4\" fill=\"{colour}\"/>\
         <text x=\"{:.1}\" y=\"{ly:.1}\">{}</text>",
        ly - 6.0,
        lx + 18.0,
        escape(line.label)
    );
}

#[cfg(test)]
mod tests {
    use super::*;

    fn line(points: Vec<(f64, f64)>) -> Line<'static> {
        Line {
            label: "sent",
            colour: "#1f77b4",
            points,
        }
    }

    /// The `points` attribute of every polyline.
    fn polylines(svg: &str) -> Vec<Vec<(f64, f64)>> {
        svg.split("<polyline")
            .skip(1)
            .map(|p| {
                let attr = p.split("points=\"").nth(1).expect("points");
                let attr = &attr[..attr.find('"').expect("closing quote")];
                attr.split(' ')
                    .map(|xy| {
                        let (x, y) = xy.split_once(',').expect("x,y");
                        (x.parse().expect("x"), y.parse().expect("y"))
                    })
                    .collect()
            })
            .collect()
    }

    #[test]
    fn throughput_has_one_point_per_sample_and_labels_the_max() {
        let points: Vec<_> = (1..=5)
            .map(|t| (f64::from(t), 1000.0 * f64::from(t)))
            .collect();
        let svg = throughput(&[line(points)], 2.0, 5.0);
        assert!(svg.starts_with("<svg") && svg.trim_end().ends_with("</svg>"));
        let lines = polylines(&svg);
        assert_eq!(lines.len(), 1);
        assert_eq!(lines[0].len(), 5);
        // Later seconds are higher rates: smaller y in SVG.
        assert!(lines[0]
            .windows(2)
            .all(|w| w[0].0 < w[1].0 && w[0].1 > w[1].1));
        // The top gridline is labelled with the max rate; x reaches 5 s.
        assert!(svg.contains(">5.0k</text>"), "{svg}");
        assert!(svg.contains(">5s</text>"), "{svg}");
        assert!(svg.contains("class=\"warmup\""), "{svg}");
        assert!(!svg.contains("no data"));
    }

    #[test]
    fn latency_axis_is_labelled_in_nines_and_with_the_max() {
        let points = vec![(0.0, 10.0), (1.0, 20.0), (2.0, 40.0), (3.0, 2500.0)];
        let svg = latency(&[line(points)]);
        for label in ["0%", "90%", "99%", "99.9%"] {
            assert!(svg.contains(&format!(">{label}</text>")), "{label}: {svg}");
        }
        assert!(svg.contains(">2.50 ms</text>"), "{svg}");
        assert_eq!(polylines(&svg)[0].len(), 4);
        assert!(!svg.contains("warmup"));
        assert_eq!(nines_label(5), "99.999%");
    }

    #[test]
    fn empty_series_give_a_valid_svg_saying_no_data() {
        for svg in [latency(&[]), throughput(&[line(Vec::new())], 0.0, 0.0)] {
            assert!(svg.starts_with("<svg") && svg.trim_end().ends_with("</svg>"));
            assert!(svg.contains("no data"), "{svg}");
            assert!(!svg.contains("<polyline"), "{svg}");
            assert!(!svg.contains("NaN") && !svg.contains("inf"), "{svg}");
        }
    }

    #[test]
    fn nan_and_zero_values_scale_safely() {
        let svg = throughput(
            &[line(vec![
                (1.0, 0.0),
                (2.0, f64::NAN),
                (f64::INFINITY, 5.0),
                (3.0, 0.0),
            ])],
            f64::NAN,
            f64::NAN,
        );
        assert!(!svg.contains("NaN") && !svg.contains("inf"), "{svg}");
        let lines = polylines(&svg);
        assert_eq!(lines[0].len(), 2, "non-finite points are skipped");
        // All-zero rates sit on the x axis.
        assert!(lines[0]
            .iter()
            .all(|(_, y)| (*y - (HEIGHT - BOTTOM)).abs() < 1e-9));
    }

    #[test]
    fn text_is_escaped() {
        assert_eq!(escape(r#"a<b>&"c'"#), "a&lt;b&gt;&amp;&quot;c&#39;");
        let mut l = line(vec![(1.0, 1.0)]);
        l.label = "<script>";
        let svg = throughput(&[l], 0.0, 1.0);
        assert!(svg.contains("&lt;script&gt;") && !svg.contains("<script>"));
    }

    #[test]
    fn stacked_holds_both_charts() {
        let doc = stacked(&latency(&[]), &throughput(&[], 0.0, 1.0));
        assert!(doc.starts_with("<?xml"));
        assert_eq!(doc.matches("<svg").count(), 3);
        assert!(doc.contains("translate(0,320)"));
    }
}
