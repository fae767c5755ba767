//! Sizes and durations as a policy file spells them: `512MiB`, `30s`.
//!
//! Only unambiguous units are accepted. `512MB` is refused rather than guessed at
//! (decimal or binary?), and so is `30 s`, so that a typo never silently becomes a
//! limit ten times looser than meant. Both parse inside serde, so a bad value is
//! reported with the file, line and column of the key it sits under.

use serde::{de, Deserialize, Deserializer, Serialize, Serializer};
use std::fmt;
use std::time::Duration;

/// A number of bytes, written with an IEC unit: `B`, `KiB`, `MiB`, `GiB`, `TiB`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, PartialOrd, Ord)]
pub struct ByteSize(pub u64);

const BYTE_UNITS: &[(&str, u64)] = &[
    ("B", 1),
    ("KiB", 1 << 10),
    ("MiB", 1 << 20),
    ("GiB", 1 << 30),
    ("TiB", 1 << 40),
];

impl ByteSize {
    pub fn bytes(self) -> u64 {
        self.0
    }

    pub fn parse(text: &str) -> Result<ByteSize, String> {
        let (number, unit) = split_number(text)?;
        let Some(&(_, factor)) = BYTE_UNITS.iter().find(|(name, _)| *name == unit) else {
            let hint = match unit.to_ascii_lowercase().as_str() {
                "kb" | "k" => " (did you mean `KiB`?)",
                "mb" | "m" => " (did you mean `MiB`?)",
                "gb" | "g" => " (did you mean `GiB`?)",
                "tb" | "t" => " (did you mean `TiB`?)",
                "" => " (a size needs a unit, e.g. `512MiB`)",
                _ => "",
            };
            return Err(format!(
                "invalid size `{text}`: unknown unit `{unit}`{hint}; use B, KiB, MiB, GiB or TiB"
            ));
        };
        let bytes = number * factor as f64;
        if !(bytes.is_finite() && bytes >= 0.0 && bytes <= u64::MAX as f64) {
            return Err(format!("invalid size `{text}`: out of range"));
        }
        Ok(ByteSize(bytes.round() as u64))
    }
}

impl fmt::Display for ByteSize {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for &(name, factor) in BYTE_UNITS.iter().rev() {
            if self.0 >= factor && self.0.is_multiple_of(factor) {
                return write!(f, "{}{}", self.0 / factor, name);
            }
        }
        write!(f, "{}B", self.0)
    }
}

/// A wall-clock duration, written `250ms`, `30s`, `2m` or `1h`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, PartialOrd, Ord)]
pub struct HumanDuration(pub Duration);

const DURATION_UNITS: &[(&str, f64)] = &[("ms", 0.001), ("s", 1.0), ("m", 60.0), ("h", 3600.0)];

impl HumanDuration {
    pub fn parse(text: &str) -> Result<HumanDuration, String> {
        let (number, unit) = split_number(text)?;
        let Some(&(_, factor)) = DURATION_UNITS.iter().find(|(name, _)| *name == unit) else {
            let hint = if unit.is_empty() {
                " (a duration needs a unit, e.g. `30s`)"
            } else {
                ""
            };
            return Err(format!(
                "invalid duration `{text}`: unknown unit `{unit}`{hint}; use ms, s, m or h"
            ));
        };
        let seconds = number * factor;
        if !(seconds.is_finite() && (0.0..=86_400.0 * 365.0).contains(&seconds)) {
            return Err(format!("invalid duration `{text}`: out of range"));
        }
        Ok(HumanDuration(Duration::from_secs_f64(seconds)))
    }
}

impl fmt::Display for HumanDuration {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let ms = self.0.as_millis();
        if !ms.is_multiple_of(1000) {
            write!(f, "{ms}ms")
        } else if ms.is_multiple_of(3_600_000) && ms > 0 {
            write!(f, "{}h", ms / 3_600_000)
        } else if ms.is_multiple_of(60_000) && ms > 0 {
            write!(f, "{}m", ms / 60_000)
        } else {
            write!(f, "{}s", ms / 1000)
        }
    }
}

/// Splits `512MiB` into (512.0, "MiB"), refusing blanks inside and a missing number.
fn split_number(text: &str) -> Result<(f64, &str), String> {
    let split = text
        .find(|c: char| !(c.is_ascii_digit() || c == '.'))
        .unwrap_or(text.len());
    let (number, unit) = text.split_at(split);
    if unit.starts_with(char::is_whitespace) {
        return Err(format!(
            "invalid value `{text}`: no space is allowed between the number and its unit (write `{}{}`)",
            number,
            unit.trim()
        ));
    }
    let value: f64 = number
        .parse()
        .map_err(|_| format!("invalid value `{text}`: expected a number followed by a unit"))?;
    Ok((value, unit))
}

macro_rules! text_serde {
    ($type:ty, $what:literal) => {
        impl<'de> Deserialize<'de> for $type {
            fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
                struct Visitor;
                impl de::Visitor<'_> for Visitor {
                    type Value = $type;
                    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                        f.write_str($what)
                    }
                    fn visit_str<E: de::Error>(self, v: &str) -> Result<$type, E> {
                        <$type>::parse(v).map_err(E::custom)
                    }
                    fn visit_u64<E: de::Error>(self, v: u64) -> Result<$type, E> {
                        <$type>::parse(&v.to_string()).map_err(E::custom)
                    }
                    fn visit_i64<E: de::Error>(self, v: i64) -> Result<$type, E> {
                        <$type>::parse(&v.to_string()).map_err(E::custom)
                    }
                    fn visit_f64<E: de::Error>(self, v: f64) -> Result<$type, E> {
                        <$type>::parse(&v.to_string()).map_err(E::custom)
                    }
                }
                deserializer.deserialize_any(Visitor)
            }
        }

        impl Serialize for $type {
            fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
                serializer.collect_str(self)
            }
        }
    };
}

text_serde!(ByteSize, "a size such as `512MiB`");
text_serde!(HumanDuration, "a duration such as `30s`");

/// For the policy reference: a size or a duration is a string with a unit.
impl schemars::JsonSchema for ByteSize {
    fn inline_schema() -> bool {
        true
    }
    fn schema_name() -> std::borrow::Cow<'static, str> {
        "ByteSize".into()
    }
    fn json_schema(_: &mut schemars::SchemaGenerator) -> schemars::Schema {
        schemars::json_schema!({
            "type": "string",
            "x-type": "size (`512MiB`)",
        })
    }
}

impl schemars::JsonSchema for HumanDuration {
    fn inline_schema() -> bool {
        true
    }
    fn schema_name() -> std::borrow::Cow<'static, str> {
        "HumanDuration".into()
    }
    fn json_schema(_: &mut schemars::SchemaGenerator) -> schemars::Schema {
        schemars::json_schema!({
            "type": "string",
            "x-type": "duration (`30s`)",
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes() {
        assert_eq!(ByteSize::parse("512MiB").unwrap().bytes(), 512 << 20);
        assert_eq!(ByteSize::parse("1.5KiB").unwrap().bytes(), 1536);
        assert_eq!(ByteSize::parse("64B").unwrap().bytes(), 64);
        let err = ByteSize::parse("512MB").unwrap_err();
        assert!(err.contains("did you mean `MiB`"), "{err}");
        assert!(ByteSize::parse("512").unwrap_err().contains("needs a unit"));
        assert!(ByteSize::parse("512 MiB").unwrap_err().contains("no space"));
        assert!(ByteSize::parse("MiB").is_err());
        assert_eq!(ByteSize(256 << 10).to_string(), "256KiB");
        assert_eq!(ByteSize(1000).to_string(), "1000B");
    }

    #[test]
    fn durations() {
        assert_eq!(
            HumanDuration::parse("30s").unwrap().0,
            Duration::from_secs(30)
        );
        assert_eq!(
            HumanDuration::parse("250ms").unwrap().0,
            Duration::from_millis(250)
        );
        assert_eq!(
            HumanDuration::parse("2m").unwrap().0,
            Duration::from_secs(120)
        );
        assert!(HumanDuration::parse("30 s")
            .unwrap_err()
            .contains("no space"));
        assert!(HumanDuration::parse("30")
            .unwrap_err()
            .contains("needs a unit"));
        assert!(HumanDuration::parse("30sec").is_err());
        assert_eq!(HumanDuration(Duration::from_secs(90)).to_string(), "90s");
        assert_eq!(HumanDuration(Duration::from_secs(120)).to_string(), "2m");
    }
}
