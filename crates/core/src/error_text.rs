//! An error and its causes as one line of text, the way condition messages,
//! CLI errors and the dashboard say them: `error: cause: cause …`, a cause
//! left out where the text before it already says it (many errors repeat
//! their source in their own message).

use std::error::Error;

/// `error: cause: cause …`, each cause in its own words.
pub fn one_line(error: &dyn Error) -> String {
    one_line_with(error, |cause| cause.to_string())
}

/// Like [`one_line`], each cause said by `say` (e.g. a client error as the
/// API server's answer instead of the client's struct of it).
pub fn one_line_with(error: &dyn Error, say: impl Fn(&(dyn Error + 'static)) -> String) -> String {
    let mut text = error.to_string();
    let mut cause = error.source();
    while let Some(next) = cause {
        let said = say(next);
        if !text.contains(&said) {
            text.push_str(": ");
            text.push_str(&said);
        }
        cause = next.source();
    }
    text
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Debug)]
    struct Layer(&'static str, Option<Box<Layer>>);

    impl std::fmt::Display for Layer {
        fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
            f.write_str(self.0)
        }
    }

    impl Error for Layer {
        fn source(&self) -> Option<&(dyn Error + 'static)> {
            self.1
                .as_deref()
                .map(|layer| layer as &(dyn Error + 'static))
        }
    }

    fn layers(texts: &[&'static str]) -> Layer {
        let (last, outer) = texts.split_last().unwrap();
        outer.iter().rev().fold(Layer(last, None), |inner, text| {
            Layer(text, Some(Box::new(inner)))
        })
    }

    #[test]
    fn each_cause_follows_its_error_after_a_colon() {
        let error = layers(&["fetch failed", "connection refused", "os error 111"]);
        assert_eq!(
            one_line(&error),
            "fetch failed: connection refused: os error 111"
        );
    }

    #[test]
    fn a_cause_the_message_already_says_is_said_once() {
        let error = layers(&["fetch failed: connection refused", "connection refused"]);
        assert_eq!(one_line(&error), "fetch failed: connection refused");
    }

    #[test]
    fn each_cause_can_be_said_in_other_words() {
        let error = layers(&["sync failed", "Status { code: 403 }"]);
        let said = one_line_with(&error, |cause| {
            cause
                .to_string()
                .replace("Status { code: 403 }", "forbidden")
        });
        assert_eq!(said, "sync failed: forbidden");
    }
}
