//! Fuzz target: SQL92 message selectors. The input is an expression, a NUL,
//! then a properties string; the expression is compiled and, if it
//! compiles, evaluated over the properties. Nothing may panic.
#![no_main]

use libfuzzer_sys::fuzz_target;
use sluice_node::broker::filter::sql92::Sql92;

fuzz_target!(|data: &[u8]| {
    let (expr, props) = match data.iter().position(|&b| b == 0) {
        Some(at) => (&data[..at], &data[at + 1..]),
        None => (data, &b""[..]),
    };
    let Ok(expr) = std::str::from_utf8(expr) else {
        return;
    };
    if let Ok(sql) = Sql92::compile(expr) {
        let _ = sql.matches_properties(props);
        let _ = sql.matches(|key| (key == "a").then_some("1"));
    }
});
