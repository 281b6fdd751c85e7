//! How one typed-header field maps to an `extFields` entry: values are
//! rendered as Java's `toString()` would, required fields must be present,
//! `Option` fields may be absent.

use crate::{Error, ExtFields, Result};

/// A scalar that appears as a string in `extFields`.
pub trait FieldValue: Sized {
    /// Parses the wire text; `None` if it is not a valid value.
    fn parse(text: &str) -> Option<Self>;
    /// Appends the value as Java's `toString()` would render it.
    fn render_into(&self, out: &mut String);
}

impl FieldValue for String {
    fn parse(text: &str) -> Option<Self> {
        Some(text.to_owned())
    }
    fn render_into(&self, out: &mut String) {
        out.push_str(self);
    }
}

macro_rules! numeric_field {
    ($($ty:ty),*) => {$(
        impl FieldValue for $ty {
            fn parse(text: &str) -> Option<Self> {
                text.parse().ok()
            }
            fn render_into(&self, out: &mut String) {
                // The same digits as `Display` (and Java's `toString()`).
                out.push_str(itoa::Buffer::new().format(*self));
            }
        }
    )*};
}
numeric_field!(i32, i64);

impl FieldValue for bool {
    /// `true`/`false` in any case, and `1`/`0` as the C++ client sends
    /// (`unitMode: "0"`). Anything else is invalid rather than silently
    /// `false`.
    fn parse(text: &str) -> Option<Self> {
        if text.eq_ignore_ascii_case("true") || text == "1" {
            Some(true)
        } else if text.eq_ignore_ascii_case("false") || text == "0" {
            Some(false)
        } else {
            None
        }
    }
    fn render_into(&self, out: &mut String) {
        out.push_str(if *self { "true" } else { "false" });
    }
}

/// A typed-header field: reads itself from and writes itself to `extFields`.
pub trait HeaderField: Sized {
    /// Builds the field named `key` from its `extFields` value, `None` when
    /// the key is absent (`command_header!` finds every field's value in
    /// one pass over the entries, then builds each field with this).
    fn from_value(value: Option<&str>, key: &'static str) -> Result<Self>;
    /// Reads the field named `key`.
    fn read(ext: &ExtFields, key: &'static str) -> Result<Self> {
        Self::from_value(ext.get(key), key)
    }
    /// Writes the field under `key` (absent optional fields write nothing).
    fn write(&self, key: &'static str, ext: &mut ExtFields);
}

/// True when no key appears twice. `command_header!` asserts it at compile
/// time: its one-pass decode gives each key's value to one field only.
pub(crate) const fn keys_unique(keys: &[&str]) -> bool {
    let mut i = 0;
    while i < keys.len() {
        let mut j = i + 1;
        while j < keys.len() {
            if bytes_equal(keys[i].as_bytes(), keys[j].as_bytes()) {
                return false;
            }
            j += 1;
        }
        i += 1;
    }
    true
}

/// Byte-slice equality usable in a `const` context.
const fn bytes_equal(a: &[u8], b: &[u8]) -> bool {
    if a.len() != b.len() {
        return false;
    }
    let mut i = 0;
    while i < a.len() {
        if a[i] != b[i] {
            return false;
        }
        i += 1;
    }
    true
}

fn parse_present<T: FieldValue>(key: &'static str, text: &str) -> Result<T> {
    T::parse(text).ok_or_else(|| Error::InvalidField {
        field: key,
        value: text.to_owned(),
    })
}

impl<T: FieldValue> HeaderField for T {
    fn from_value(value: Option<&str>, key: &'static str) -> Result<Self> {
        let text = value.ok_or(Error::MissingField { field: key })?;
        parse_present(key, text)
    }
    fn write(&self, key: &'static str, ext: &mut ExtFields) {
        ext.insert_with(key, |out| self.render_into(out));
    }
}

impl<T: FieldValue> HeaderField for Option<T> {
    fn from_value(value: Option<&str>, key: &'static str) -> Result<Self> {
        value.map(|text| parse_present(key, text)).transpose()
    }
    fn write(&self, key: &'static str, ext: &mut ExtFields) {
        if let Some(value) = self {
            ext.insert_with(key, |out| value.render_into(out));
        }
    }
}

/// Test support: builds any field from a random seed, so a macro-generated
/// header can be built from a vector of seeds in property tests.
#[cfg(test)]
pub(crate) mod sample {
    /// Random material for one field.
    #[derive(Debug, Clone)]
    pub struct Seed {
        pub present: bool,
        pub text: String,
        pub number: i64,
    }

    pub trait Sample {
        fn sample(seed: &Seed) -> Self;
    }

    impl Sample for String {
        fn sample(seed: &Seed) -> Self {
            seed.text.clone()
        }
    }
    impl Sample for i64 {
        fn sample(seed: &Seed) -> Self {
            seed.number
        }
    }
    impl Sample for i32 {
        fn sample(seed: &Seed) -> Self {
            #[allow(clippy::cast_possible_truncation)]
            let v = seed.number as i32;
            v
        }
    }
    impl Sample for bool {
        fn sample(seed: &Seed) -> Self {
            seed.number % 2 == 0
        }
    }
    impl<T: Sample> Sample for Option<T> {
        fn sample(seed: &Seed) -> Self {
            seed.present.then(|| T::sample(seed))
        }
    }

    pub fn seeds(n: usize) -> impl proptest::strategy::Strategy<Value = Vec<Seed>> {
        use proptest::prelude::*;
        proptest::collection::vec(
            (any::<bool>(), ".{0,12}", any::<i64>()).prop_map(|(present, text, number)| Seed {
                present,
                text,
                number,
            }),
            n,
        )
    }
}
