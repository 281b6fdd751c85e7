//! HTML building blocks: escaping, the shared layout and CSS, the live
//! chart's inline script, and the URL-encoded form and query parsing
//! (hand-written so that any input yields a map, never a panic or an
//! extractor rejection before the CSRF check).

use std::collections::BTreeMap;
use std::fmt::Write as _;

use sluice_core::civil::{civil_from_days, days_from_civil};

/// `s` safe inside HTML text and double- or single-quoted attributes.
pub fn esc(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for c in s.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&#39;"),
            c => out.push(c),
        }
    }
    out
}

/// `s` percent-encoded for a URL path segment or query value.
pub fn url(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for b in s.bytes() {
        if b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.' | b'~') {
            out.push(char::from(b));
        } else {
            let _ = write!(out, "%{b:02X}");
        }
    }
    out
}

/// Decodes `application/x-www-form-urlencoded` pairs (also a query
/// string); a repeated name keeps its first value, bad escapes stay as
/// written, invalid UTF-8 is replaced.
pub fn parse_form(input: &[u8]) -> BTreeMap<String, String> {
    let mut out = BTreeMap::new();
    for pair in input.split(|&b| b == b'&') {
        if pair.is_empty() {
            continue;
        }
        let mut parts = pair.splitn(2, |&b| b == b'=');
        let name = decode(parts.next().unwrap_or_default());
        let value = decode(parts.next().unwrap_or_default());
        out.entry(name).or_insert(value);
    }
    out
}

fn decode(raw: &[u8]) -> String {
    let mut bytes = Vec::with_capacity(raw.len());
    let mut i = 0;
    while i < raw.len() {
        match raw[i] {
            b'+' => bytes.push(b' '),
            b'%' => {
                let hex = raw.get(i + 1..i + 3).and_then(|h| {
                    std::str::from_utf8(h)
                        .ok()
                        .and_then(|h| u8::from_str_radix(h, 16).ok())
                });
                if let Some(b) = hex {
                    bytes.push(b);
                    i += 2;
                } else {
                    bytes.push(b'%');
                }
            }
            b => bytes.push(b),
        }
        i += 1;
    }
    String::from_utf8_lossy(&bytes).into_owned()
}

/// The shared style sheet (inline: the dashboard serves no other files).
const CSS: &str = "\
body{font-family:system-ui,sans-serif;margin:0;color:#1d2330;background:#f4f6f9}\
header{background:#1d2a44;color:#fff;padding:.6em 1.2em;display:flex;gap:1.2em;align-items:center}\
header a{color:#cfe0ff;text-decoration:none}header a:hover{text-decoration:underline}\
header b{color:#fff;margin-right:1em}header form{margin-left:auto}\
main{padding:1em 1.6em}h1{font-size:1.4em}h2{font-size:1.1em;margin-top:1.6em}\
table{border-collapse:collapse;background:#fff;margin:.4em 0 1em}\
th,td{border:1px solid #d5dbe5;padding:.25em .6em;text-align:left;vertical-align:top;font-size:.92em}\
th{background:#e9eef6}td.n{text-align:right;font-variant-numeric:tabular-nums}\
.err{background:#fde8e8;border:1px solid #e0a0a0;padding:.5em 1em;color:#7a1010}\
.ok{background:#e6f6e6;border:1px solid #9c9;padding:.5em 1em}\
form.inline{display:inline}fieldset{background:#fff;border:1px solid #d5dbe5;margin:.6em 0}\
input,button,select{font-size:.95em;margin:.15em}pre{background:#fff;border:1px solid #d5dbe5;\
padding:.6em;white-space:pre-wrap;word-break:break-all;max-width:60em}\
svg{background:#fff;border:1px solid #d5dbe5}.in{stroke:#1f6fd1}.out{stroke:#d1741f}";

/// A whole page: navigation, `title`, `body` (already escaped HTML), and
/// a logout button when `user` is logged in.
pub fn layout(title: &str, user: Option<&str>, csrf: &str, body: &str) -> String {
    let logout = user.map_or(String::new(), |u| {
        format!(
            "<form method=post action=/logout><span>{}</span> \
             <input type=hidden name=csrf value=\"{}\"><button>Log out</button></form>",
            esc(u),
            esc(csrf)
        )
    });
    format!(
        "<!DOCTYPE html><html lang=en><head><meta charset=utf-8>\
         <meta name=viewport content=\"width=device-width\">\
         <title>{t} · Sluice</title><style>{CSS}</style></head><body>\
         <header><b>Sluice</b><a href=/>Cluster</a><a href=/topics>Topics</a>\
         <a href=/groups>Groups</a><a href=/messages>Messages</a>\
         <a href=/timers>Timers</a>{logout}</header><main><h1>{t}</h1>{body}</main></body></html>",
        t = esc(title),
    )
}

/// A hidden CSRF field for a form of this session.
pub fn csrf_field(csrf: &str) -> String {
    format!("<input type=hidden name=csrf value=\"{}\">", esc(csrf))
}

/// An error box with `message` escaped.
pub fn error_box(message: &str) -> String {
    format!("<p class=err>{}</p>", esc(message))
}

/// A table: `head` cells and rows of already escaped cells; a cell
/// starting with `#` is right-aligned (a number) with the `#` dropped.
pub fn table(head: &[&str], rows: &[Vec<String>]) -> String {
    let mut out = String::from("<table><tr>");
    for h in head {
        let _ = write!(out, "<th>{}</th>", esc(h));
    }
    out.push_str("</tr>");
    for row in rows {
        out.push_str("<tr>");
        for cell in row {
            match cell.strip_prefix('#') {
                Some(n) => {
                    let _ = write!(out, "<td class=n>{n}</td>");
                }
                None => {
                    let _ = write!(out, "<td>{cell}</td>");
                }
            }
        }
        out.push_str("</tr>");
    }
    out.push_str("</table>");
    out
}

/// A number cell for [`table`].
pub fn num(n: impl std::fmt::Display) -> String {
    format!("#{n}")
}

/// The live throughput chart: an SVG the inline script redraws from
/// `/api/stats` once a second (messages/s in and out, last two minutes).
pub const CHART: &str = r#"<h2>Throughput (msgs/s, live)</h2>
<p><span style="color:#1f6fd1">■</span> In: <b id=rin>–</b> · <span style="color:#d1741f">■</span> Out: <b id=rout>–</b> (last two minutes)</p>
<svg id=chart width=600 height=160 viewBox="0 0 600 160" role=img aria-label="throughput chart">
<polyline class=in id=lin fill=none stroke-width=2 points=""/>
<polyline class=out id=lout fill=none stroke-width=2 points=""/>
<text x=4 y=14 font-size=11 id=lmax>0</text></svg>
<noscript><p>The live chart needs JavaScript; every other part of the dashboard works without it.</p></noscript>
<script>
(function(){var last=null,pin=[],pout=[],N=120;
function pts(a,max){return a.map(function(v,i){return (600-(a.length-1-i)*600/(N-1)).toFixed(1)+","+(155-v*145/max).toFixed(1)}).join(" ")}
function draw(){var max=Math.max(1,Math.max.apply(null,pin.concat(pout)));
document.getElementById("lin").setAttribute("points",pts(pin,max));
document.getElementById("lout").setAttribute("points",pts(pout,max));
document.getElementById("lmax").textContent=max.toFixed(0)+" msgs/s";}
function tick(){fetch("/api/stats",{cache:"no-store"}).then(function(r){return r.json()}).then(function(s){
var now=Date.now();if(last){var dt=Math.max(.001,(now-last.t)/1000);
var i=Math.max(0,(s.messages_in_total-last.i)/dt),o=Math.max(0,(s.messages_out_total-last.o)/dt);
pin.push(i);pout.push(o);if(pin.length>N){pin.shift();pout.shift();}
document.getElementById("rin").textContent=i.toFixed(1);document.getElementById("rout").textContent=o.toFixed(1);draw();}
last={t:now,i:s.messages_in_total,o:s.messages_out_total};}).catch(function(){});}
tick();setInterval(tick,1000);})();
</script>"#;

/// `ms` since the epoch as `YYYY-MM-DD HH:MM:SS` (UTC); `—` for 0 or less.
pub fn format_time(ms: i64) -> String {
    if ms <= 0 {
        return "—".to_owned();
    }
    let secs = ms / 1000;
    let (days, rem) = (secs.div_euclid(86_400), secs.rem_euclid(86_400));
    let (y, m, d) = civil_from_days(days);
    format!(
        "{y:04}-{m:02}-{d:02} {:02}:{:02}:{:02}",
        rem / 3600,
        rem % 3600 / 60,
        rem % 60
    )
}

/// A reset time: `earliest` (0), `latest` (-1), milliseconds since the
/// epoch, or `YYYY-MM-DD[T ]HH:MM[:SS]` in UTC.
pub fn parse_time(input: &str) -> Option<i64> {
    let input = input.trim();
    match input {
        "earliest" => return Some(0),
        "latest" => return Some(-1),
        _ => {}
    }
    if let Ok(ms) = input.parse::<i64>() {
        return (ms >= -1).then_some(ms);
    }
    let (date, time) = input.split_once(['T', ' ']).unwrap_or((input, "00:00"));
    let mut date_parts = date.split('-').map(|p| p.parse::<i64>().ok());
    let year = date_parts.next()??;
    let month = date_parts.next()??;
    let day = date_parts.next()??;
    let mut time_parts = time.split(':').map(|p| p.parse::<i64>().ok());
    let hour = time_parts.next()??;
    let minute = time_parts.next()??;
    let second = time_parts.next().flatten().unwrap_or(0);
    let valid = (1970..=9999).contains(&year)
        && (1..=12).contains(&month)
        && (1..=31).contains(&day)
        && (0..24).contains(&hour)
        && (0..60).contains(&minute)
        && (0..60).contains(&second);
    valid.then(|| {
        ((days_from_civil(year, month, day) * 24 + hour) * 60 + minute) * 60_000 + second * 1000
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn escapes_markup_and_quotes() {
        assert_eq!(
            esc("<a href='x'>\"&\"</a>"),
            "&lt;a href=&#39;x&#39;&gt;&quot;&amp;&quot;&lt;/a&gt;"
        );
    }

    #[test]
    fn forms_decode_and_never_panic_on_bad_input() {
        let f = parse_form(b"a=1+2&b=%41%zz%&a=dup&=x&c&d=%FF");
        assert_eq!(f["a"], "1 2");
        assert_eq!(f["b"], "A%zz%");
        assert_eq!(f["c"], "");
        assert_eq!(f["d"], "\u{FFFD}");
        assert_eq!(url("%RETRY%g 1"), "%25RETRY%25g%201");
    }

    #[test]
    fn times_round_trip_in_utc() {
        let ms = parse_time("2026-12-02T10:47:05").expect("valid");
        assert_eq!(ms, 1_796_208_425_000);
        assert_eq!(format_time(ms), "2026-12-02 10:47:05");
        assert_eq!(parse_time("2024-02-29 00:00"), Some(1_709_164_800_000));
        assert_eq!(parse_time("latest"), Some(-1));
        assert_eq!(parse_time("12"), Some(12));
        for bad in [
            "",
            "-5",
            "2026-13-01T00:00",
            "2026-1",
            "x",
            "2026-01-01T25:00",
        ] {
            assert_eq!(parse_time(bad), None, "{bad}");
        }
    }
}
