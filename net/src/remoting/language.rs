//! `LanguageCode`: the client language tag carried in every header, by
//! name in JSON headers and by byte in ROCKETMQ binary headers.

/// The language of the peer that built a command.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Default)]
pub enum LanguageCode {
    /// Java (the reference client and server).
    #[default]
    Java,
    /// C++.
    Cpp,
    /// .NET.
    Dotnet,
    /// Python.
    Python,
    /// Delphi.
    Delphi,
    /// Erlang.
    Erlang,
    /// Ruby.
    Ruby,
    /// Anything else; unknown names and bytes decode to this.
    Other,
    /// HTTP proxy.
    Http,
    /// Go.
    Go,
    /// PHP.
    Php,
    /// Open Messaging.
    Oms,
    /// Rust.
    Rust,
    /// Node.js.
    NodeJs,
}

const ALL: [(LanguageCode, &str); 14] = [
    (LanguageCode::Java, "JAVA"),
    (LanguageCode::Cpp, "CPP"),
    (LanguageCode::Dotnet, "DOTNET"),
    (LanguageCode::Python, "PYTHON"),
    (LanguageCode::Delphi, "DELPHI"),
    (LanguageCode::Erlang, "ERLANG"),
    (LanguageCode::Ruby, "RUBY"),
    (LanguageCode::Other, "OTHER"),
    (LanguageCode::Http, "HTTP"),
    (LanguageCode::Go, "GO"),
    (LanguageCode::Php, "PHP"),
    (LanguageCode::Oms, "OMS"),
    (LanguageCode::Rust, "RUST"),
    (LanguageCode::NodeJs, "NODE_JS"),
];

impl LanguageCode {
    /// Every language, in wire-byte order.
    pub const ALL: [LanguageCode; 14] = {
        let mut out = [LanguageCode::Java; 14];
        let mut i = 0;
        while i < 14 {
            out[i] = ALL[i].0;
            i += 1;
        }
        out
    };

    /// The byte used by the ROCKETMQ binary header.
    pub fn as_u8(self) -> u8 {
        // The enum is declared in wire order, so the discriminant is the byte.
        self as u8
    }

    /// Decodes a binary-header byte; unknown bytes become [`LanguageCode::Other`].
    pub fn from_u8(byte: u8) -> Self {
        ALL.get(usize::from(byte))
            .map_or(Self::Other, |(code, _)| *code)
    }

    /// The name used by JSON headers (`"JAVA"`, `"CPP"`, ...).
    pub fn name(self) -> &'static str {
        ALL[usize::from(self.as_u8())].1
    }

    /// Decodes a JSON-header name; unknown names become [`LanguageCode::Other`].
    pub fn from_name(name: &str) -> Self {
        ALL.iter()
            .find(|(_, n)| *n == name)
            .map_or(Self::Other, |(code, _)| *code)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bytes_and_names_round_trip() {
        for (i, code) in LanguageCode::ALL.iter().enumerate() {
            assert_eq!(usize::from(code.as_u8()), i);
            assert_eq!(LanguageCode::from_u8(code.as_u8()), *code);
            assert_eq!(LanguageCode::from_name(code.name()), *code);
        }
        assert_eq!(LanguageCode::Go.as_u8(), 9);
        assert_eq!(LanguageCode::from_u8(200), LanguageCode::Other);
        assert_eq!(LanguageCode::from_name("COBOL"), LanguageCode::Other);
    }
}
