//! Java's `String.hashCode` (over UTF-16 code units, wrapping) and the
//! ConsumeQueue tagsCode derived from it. Must match the JVM bit for bit:
//! clients filter by comparing these hashes.

/// Java `String.hashCode`: `h = 31 * h + unit` over UTF-16 code units, wrapping.
pub fn java_string_hash(s: &str) -> i32 {
    s.encode_utf16().fold(0_i32, |h, unit| {
        h.wrapping_mul(31).wrapping_add(i32::from(unit))
    })
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
