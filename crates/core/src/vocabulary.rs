//! Closed vocabularies: the words Tether reports in status fields, CLI
//! output, events and metrics, each typed once.
//!
//! [`vocabulary!`](crate::vocabulary!) defines an enum together with the one
//! text of each word; its `Display`, `FromStr` and serde forms are all that
//! text, so a word is written the same everywhere and a stored word that is
//! not in the vocabulary is an error that names it.

/// A closed vocabulary defined by [`vocabulary!`](crate::vocabulary!).
pub trait Vocabulary: Copy + Sized + 'static {
    /// What the words name, for errors: `sync status`.
    const NAME: &'static str;
    /// Every word, in declaration order.
    const ALL: &'static [Self];
    /// The word's text.
    fn as_str(self) -> &'static str;

    /// The words `text` does not name as `` `word` `` (Markdown code):
    /// what documentation that lists the whole vocabulary has left out.
    fn unnamed_in(text: &str) -> Vec<&'static str> {
        Self::ALL
            .iter()
            .map(|word| word.as_str())
            .filter(|word| !text.contains(&format!("`{word}`")))
            .collect()
    }

    /// The word whose text is `text`.
    fn parse(text: &str) -> Result<Self, UnknownWord> {
        Self::ALL
            .iter()
            .copied()
            .find(|word| word.as_str() == text)
            .ok_or_else(|| UnknownWord {
                vocabulary: Self::NAME,
                word: text.to_string(),
                expected: Self::ALL
                    .iter()
                    .map(|word| word.as_str())
                    .collect::<Vec<_>>()
                    .join(", "),
            })
    }
}

/// A text that is not a word of the vocabulary it was read as.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{word:?} is not a {vocabulary} ({expected})")]
pub struct UnknownWord {
    pub vocabulary: &'static str,
    pub word: String,
    /// The words that are, comma-separated.
    pub expected: String,
}

#[doc(hidden)]
pub use serde as __serde;

/// Defines a closed vocabulary: an enum, what its words name, and each
/// word's text — the word's own name unless given after `=`.
///
/// ```
/// tether_core::vocabulary! {
///     /// A light.
///     pub enum Light("light") {
///         Red,
///         Green = "green",
///     }
/// }
/// assert_eq!(Light::Red.to_string(), "Red");
/// assert_eq!("green".parse::<Light>(), Ok(Light::Green));
/// assert!("Blue".parse::<Light>().is_err());
/// ```
#[macro_export]
macro_rules! vocabulary {
    (@text $word:ident $text:literal) => {
        $text
    };
    (@text $word:ident) => {
        stringify!($word)
    };
    (
        $(#[$meta:meta])*
        $vis:vis enum $name:ident ($what:literal) {
            $( $(#[$word_meta:meta])* $word:ident $(= $text:literal)? ),+ $(,)?
        }
    ) => {
        $(#[$meta])*
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
        $vis enum $name {
            $( $(#[$word_meta])* $word ),+
        }

        impl $name {
            /// Every word, in declaration order.
            pub const ALL: &'static [$name] = &[$($name::$word),+];

            /// The word's text, as status fields, the CLI and events write it.
            pub const fn as_str(self) -> &'static str {
                match self {
                    $($name::$word => $crate::vocabulary!(@text $word $($text)?)),+
                }
            }
        }

        impl $crate::vocabulary::Vocabulary for $name {
            const NAME: &'static str = $what;
            const ALL: &'static [$name] = $name::ALL;
            fn as_str(self) -> &'static str {
                $name::as_str(self)
            }
        }

        impl ::std::fmt::Display for $name {
            fn fmt(&self, f: &mut ::std::fmt::Formatter<'_>) -> ::std::fmt::Result {
                f.pad(self.as_str())
            }
        }

        /// A word equals its text: tests and tools read status as words.
        impl ::std::cmp::PartialEq<str> for $name {
            fn eq(&self, text: &str) -> bool {
                self.as_str() == text
            }
        }

        impl ::std::cmp::PartialEq<&str> for $name {
            fn eq(&self, text: &&str) -> bool {
                self.as_str() == *text
            }
        }

        impl ::std::str::FromStr for $name {
            type Err = $crate::vocabulary::UnknownWord;
            fn from_str(text: &str) -> Result<Self, Self::Err> {
                <$name as $crate::vocabulary::Vocabulary>::parse(text)
            }
        }

        impl $crate::vocabulary::__serde::Serialize for $name {
            fn serialize<S>(&self, serializer: S) -> Result<S::Ok, S::Error>
            where
                S: $crate::vocabulary::__serde::Serializer,
            {
                serializer.serialize_str(self.as_str())
            }
        }

        impl<'de> $crate::vocabulary::__serde::Deserialize<'de> for $name {
            fn deserialize<D>(deserializer: D) -> Result<Self, D::Error>
            where
                D: $crate::vocabulary::__serde::Deserializer<'de>,
            {
                let text = <String as $crate::vocabulary::__serde::Deserialize>::deserialize(
                    deserializer,
                )?;
                text.parse()
                    .map_err(<D::Error as $crate::vocabulary::__serde::de::Error>::custom)
            }
        }
    };
}

#[cfg(test)]
mod tests {
    use super::Vocabulary;

    crate::vocabulary! {
        enum Light("light") {
            Red,
            Green = "green-ish",
        }
    }

    #[test]
    fn a_word_prints_parses_and_serializes_as_its_text() {
        for light in Light::ALL {
            assert_eq!(light.to_string(), light.as_str());
            assert_eq!(light.as_str().parse::<Light>(), Ok(*light));
            let json = serde_json::to_value(light).unwrap();
            assert_eq!(json, serde_json::json!(light.as_str()));
            assert_eq!(serde_json::from_value::<Light>(json).unwrap(), *light);
        }
        assert_eq!(Light::Green.to_string(), "green-ish");
        assert!(Light::Green == "green-ish" && Light::Red != "Green");
    }

    #[test]
    fn documentation_that_leaves_a_word_out_is_told_which() {
        assert_eq!(Light::unnamed_in("`Red` and green-ish"), ["green-ish"]);
        assert!(Light::unnamed_in("`Red`, `green-ish`").is_empty());
    }

    #[test]
    fn a_text_outside_the_vocabulary_is_an_error_that_names_it_and_the_words() {
        let error = Light::parse("Blue").unwrap_err();
        assert_eq!(
            error.to_string(),
            "\"Blue\" is not a light (Red, green-ish)"
        );
        let error = serde_json::from_value::<Light>(serde_json::json!("Blue")).unwrap_err();
        assert!(error.to_string().contains("not a light"), "{error}");
    }
}
