//! Java's `String.hashCode` (over UTF-16 code units, wrapping) and the
//! ConsumeQueue tagsCode derived from it. Must match the JVM bit for bit:
//! clients filter by comparing these hashes.

/// Java `String.hashCode`: `h = 31 * h + unit` over UTF-16 code units, wrapping.
pub fn java_string_hash(s: &str) -> i32 {
    java_string_hash_extend(0, s)
}

/// Continues a Java `String.hashCode` of a prefix, `h`, over `s`: the hash
/// of the concatenation, without building it. ASCII (one UTF-16 unit per
/// byte) takes a byte loop, four bytes per step.
pub fn java_string_hash_extend(h: i32, s: &str) -> i32 {
    let step = |h: i32, unit: i32| h.wrapping_mul(31).wrapping_add(unit);
    if !s.is_ascii() {
        return s.encode_utf16().fold(h, |h, unit| step(h, i32::from(unit)));
    }
    // Four steps of `31 * h + b` are `31^4 * h + (31^3 b0 + 31^2 b1 + 31 b2
    // + b3)` (wrapping arithmetic is a ring): the bytes' part does not wait
    // for `h`, so the chain of multiplies is a quarter as long.
    let mut chunks = s.as_bytes().chunks_exact(4);
    let mut h = h;
    for c in &mut chunks {
        let part = i32::from(c[0]) * 29_791 + i32::from(c[1]) * 961 + i32::from(c[2]) * 31;
        h = h.wrapping_mul(923_521).wrapping_add(part + i32::from(c[3]));
    }
    chunks
        .remainder()
        .iter()
        .fold(h, |h, &b| step(h, i32::from(b)))
}

/// The ConsumeQueue tagsCode of a TAGS value: its Java hash sign-extended to
/// i64, and 0 for an empty tag.
pub fn tags_code(tags: &str) -> i64 {
    if tags.is_empty() {
        return 0;
    }
    i64::from(java_string_hash(tags))
}

#[cfg(test)]
mod tests {
    use super::*;

    // Golden values computed independently (Python over UTF-16-BE units).
    #[test]
    fn java_string_hash_matches_jvm_values() {
        assert_eq!(java_string_hash(""), 0);
        assert_eq!(java_string_hash("TagA"), 2_598_919);
        assert_eq!(java_string_hash("hello"), 99_162_322);
        assert_eq!(java_string_hash("中文"), 646_394);
    }

    #[test]
    fn extending_a_hash_equals_hashing_the_concatenation() {
        for (a, b) in [("Topic", "#key-1"), ("", ""), ("a😀", "b中文"), ("中", "x")] {
            let whole = format!("{a}{b}");
            let extended = java_string_hash_extend(java_string_hash(a), b);
            assert_eq!(extended, java_string_hash(&whole), "{whole}");
        }
    }

    #[test]
    fn four_bytes_per_step_equals_one_byte_per_step() {
        let bytes_one_by_one = |h: i32, s: &str| {
            s.bytes()
                .fold(h, |h, b| h.wrapping_mul(31).wrapping_add(i32::from(b)))
        };
        let text = "BenchTopic#7F0000011C4A18B4AAC2713A51F30000~\x7f polygenelubricants";
        for start in 0..12 {
            for end in start..text.len() {
                let s = &text[start..end];
                for h in [0, 1, -1, i32::MIN, 123_456_789] {
                    assert_eq!(
                        java_string_hash_extend(h, s),
                        bytes_one_by_one(h, s),
                        "{s:?} from {h}"
                    );
                }
            }
        }
    }

    #[test]
    fn java_string_hash_wraps_like_int_arithmetic() {
        assert_eq!(java_string_hash("polygenelubricants"), i32::MIN);
    }

    #[test]
    fn java_string_hash_uses_utf16_surrogate_pairs() {
        // U+1F600 is the surrogate pair D83D DE00: 0xD83D * 31 + 0xDE00.
        assert_eq!(java_string_hash("😀"), 0xD83D * 31 + 0xDE00);
        assert_eq!(java_string_hash("😀"), 1_772_899);
        assert_eq!(java_string_hash("a😀b"), 57_849_694);
    }

    #[test]
    fn tags_code_sign_extends_and_is_zero_for_empty() {
        assert_eq!(tags_code(""), 0);
        assert_eq!(tags_code("TagA"), 2_598_919);
        assert_eq!(tags_code("polygenelubricants"), -2_147_483_648_i64);
    }
}
