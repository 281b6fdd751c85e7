//! RocketMQ 4.x delay levels: `messageDelayLevel` as a space-separated list
//! of durations with units `s`, `m`, `h`, `d` (level 1 is the first). A
//! level above the last one is clamped to the last.

/// The default of `messageDelayLevel`.
pub const DEFAULT_DELAY_LEVELS: &str = "1s 5s 10s 30s 1m 2m 3m 4m 5m 6m 7m 8m 9m 10m 20m 30m 1h 2h";

/// Most levels a configuration may name (one schedule queue and task each).
pub const DELAY_LEVELS_MAX: usize = 64;

/// Parsed delay levels, in milliseconds, level 1 first.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DelayLevels {
    delays_ms: Vec<u64>,
}

impl DelayLevels {
    /// Parses `"1s 5s 10s 1m 1h 1d"`; at least one level, each a positive
    /// whole number followed by one unit.
    pub fn parse(text: &str) -> Result<Self, String> {
        let mut delays_ms = Vec::new();
        for word in text.split_whitespace() {
            if delays_ms.len() == DELAY_LEVELS_MAX {
                return Err(format!("more than {DELAY_LEVELS_MAX} delay levels"));
            }
            let unit = word.chars().last().unwrap_or(' ');
            let number = &word[..word.len() - unit.len_utf8()];
            let unit_ms: u64 = match unit {
                's' => 1_000,
                'm' => 60_000,
                'h' => 3_600_000,
                'd' => 86_400_000,
                _ => return Err(format!("delay level {word:?}: unit must be s, m, h or d")),
            };
            let count: u64 = number
                .parse()
                .map_err(|_| format!("delay level {word:?}: not a whole number"))?;
            if count == 0 {
                return Err(format!("delay level {word:?} is zero"));
            }
            let ms = count
                .checked_mul(unit_ms)
                .ok_or_else(|| format!("delay level {word:?} is too long"))?;
            delays_ms.push(ms);
        }
        if delays_ms.is_empty() {
            return Err("no delay levels".to_owned());
        }
        Ok(Self { delays_ms })
    }

    /// How many levels there are (the highest level).
    pub fn count(&self) -> i32 {
        i32::try_from(self.delays_ms.len()).expect("invariant: at most DELAY_LEVELS_MAX levels")
    }

    /// `level` clamped to the highest level; `None` for levels below 1
    /// (no delay).
    pub fn clamp(&self, level: i32) -> Option<i32> {
        (level >= 1).then(|| level.min(self.count()))
    }

    /// The delay of `level` (clamped), or `None` for levels below 1.
    pub fn delay_ms(&self, level: i32) -> Option<u64> {
        let level = self.clamp(level)?;
        let index = usize::try_from(level - 1).expect("invariant: clamped level is positive");
        self.delays_ms.get(index).copied()
    }
}

impl Default for DelayLevels {
    fn default() -> Self {
        Self::parse(DEFAULT_DELAY_LEVELS).expect("invariant: the default levels parse")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn default_levels_are_rocketmqs_eighteen() {
        let l = DelayLevels::default();
        assert_eq!(l.count(), 18);
        assert_eq!(l.delay_ms(1), Some(1_000));
        assert_eq!(l.delay_ms(3), Some(10_000));
        assert_eq!(l.delay_ms(5), Some(60_000));
        assert_eq!(l.delay_ms(17), Some(3_600_000));
        assert_eq!(l.delay_ms(18), Some(7_200_000));
    }

    #[test]
    fn parses_every_unit() {
        let l = DelayLevels::parse(" 2s  3m 4h 1d ").expect("valid");
        assert_eq!(l.count(), 4);
        assert_eq!(l.delay_ms(1), Some(2_000));
        assert_eq!(l.delay_ms(2), Some(180_000));
        assert_eq!(l.delay_ms(3), Some(14_400_000));
        assert_eq!(l.delay_ms(4), Some(86_400_000));
    }

    #[test]
    fn levels_above_the_max_clamp_to_the_max_and_below_one_mean_none() {
        let l = DelayLevels::parse("1s 2s 3s").expect("valid");
        assert_eq!(l.clamp(7), Some(3));
        assert_eq!(l.delay_ms(99), Some(3_000));
        assert_eq!(l.clamp(0), None);
        assert_eq!(l.delay_ms(-1), None);
    }

    #[test]
    fn rejects_bad_levels() {
        for bad in [
            "",
            "   ",
            "5",
            "5x",
            "s",
            "-1s",
            "0s",
            "1.5s",
            "99999999999999999999d",
            "1é",
        ] {
            assert!(
                DelayLevels::parse(bad).is_err(),
                "{bad:?} should be rejected"
            );
        }
        let too_many = vec!["1s"; DELAY_LEVELS_MAX + 1].join(" ");
        assert!(DelayLevels::parse(&too_many).is_err());
    }
}
