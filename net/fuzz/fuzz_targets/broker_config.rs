//! Fuzz target: arbitrary text as a broker TOML file, parsed and turned
//! into a broker configuration. Nothing may panic: a bad file is an error.
#![no_main]

use libfuzzer_sys::fuzz_target;
use sluice_node::config_file::BrokerFile;

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    if let Ok(file) = BrokerFile::parse(text) {
        let _ = file.into_config();
    }
});
