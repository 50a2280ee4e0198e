//! What operators' status words mean: `Running`, `UpdateFailed`,
//! `CreateInProgress`, `HEALTH_WARN`, `ScalingUp`, `Hibernated`.
//!
//! A value is split into words (CamelCase, `snake_case`, `kebab-case`,
//! spaces), and the words are read in order of what matters most: any word
//! of failure makes the value a failure (`UpdateFailed`, `SyncFailed`,
//! `CrashLoopBackOff`), then a pause, then work in progress, then a
//! negation of good news (`NotReady`, `Unavailable`), then good news. A
//! verb in its `-ing` form that is not one of the steady states
//! (`Running`) is work in progress (`Finalising`, `Promoting`), and a
//! participle in `-ed` that is no failure or pause is an accomplished step
//! (`Provisioned`, `Configured`).

use super::memo;

/// What a status word (or a run of them) says about a resource.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Meaning {
    /// Something failed: Degraded.
    Failure,
    /// Deliberately paused or stopped: Suspended.
    Paused,
    /// Work underway: Progressing.
    Underway,
    /// Good news withheld (`NotReady`, `PartiallyReady`): trouble, but not
    /// a failure the operator named.
    Lacking,
    /// Not known, said so (`Unknown`, `Inconclusive`).
    Undecided,
    /// Good news: the resource works or the step is done.
    Good,
}

const FAILURE: &[&str] = &[
    "fail",
    "failed",
    "failing",
    "failure",
    "failures",
    "error",
    "errored",
    "errors",
    "err",
    "degraded",
    "crash",
    "crashed",
    "crashloop",
    "crashloopbackoff",
    "backoff",
    "unhealthy",
    "invalid",
    "rejected",
    "denied",
    "forbidden",
    "unreachable",
    "aborted",
    "abort",
    "exceeded",
    "timeout",
    "timedout",
    "lost",
    "broken",
    "fatal",
    "critical",
    "conflict",
    "conflicts",
    "conflicted",
    "stalled",
    "evicted",
    "oomkilled",
    "unschedulable",
    "missing",
    "violation",
    "violations",
    "unauthorized",
    "refused",
    "expired",
    "offline",
    "halted",
    "imagepullbackoff",
    "errimagepull",
    "unsatisfiable",
    "notsatisfiable",
    "corrupt",
    "corrupted",
    "fallback",
    "failover",
];

/// Short words that mean something only as the whole value (`red`, not
/// the `Red` of `RedisReady`; `New`, not the `New` of
/// `NewReplicaSetAvailable`).
const FAILURE_ALONE: &[&str] = &["down", "red", "bad"];
const UNDERWAY_ALONE: &[&str] = &["new", "init"];
const GOOD_ALONE: &[&str] = &["up"];

const PAUSED: &[&str] = &[
    "paused",
    "pause",
    "suspended",
    "suspend",
    "stopped",
    "hibernated",
    "hibernating",
    "hibernation",
    "hibernate",
    "disabled",
    "inactive",
    "shutoff",
    "shutdown",
    "deactivated",
];

const UNDERWAY: &[&str] = &[
    "pending",
    "creating",
    "provisioning",
    "updating",
    "upgrading",
    "reconciling",
    "progressing",
    "progress",
    "initializing",
    "initialising",
    "scaling",
    "waiting",
    "deploying",
    "starting",
    "restarting",
    "installing",
    "deleting",
    "terminating",
    "rolling",
    "rollout",
    "migrating",
    "syncing",
    "applying",
    "queued",
    "building",
    "unpacking",
    "issuing",
    "promoting",
    "finalizing",
    "finalising",
    "resizing",
    "restoring",
    "recovering",
    "inprogress",
    "requested",
    "preparing",
    "bootstrapping",
    "renewing",
    "retrying",
    "retry",
    "yet",
];

/// Words that withhold the good news that follows them (`NotReady`).
const NEGATIONS: &[&str] = &["not", "non", "no", "partially", "partial"];

/// Words that say something is short of working, without a failure.
const LACKING: &[&str] = &[
    "unavailable",
    "unready",
    "warn",
    "warning",
    "yellow",
    "degrading",
    "insufficient",
];

const UNDECIDED: &[&str] = &["unknown", "inconclusive", "undetermined"];

const GOOD: &[&str] = &[
    "running",
    "ready",
    "active",
    "available",
    "bound",
    "succeeded",
    "successful",
    "success",
    "complete",
    "completed",
    "healthy",
    "established",
    "provisioned",
    "deployed",
    "installed",
    "synced",
    "ok",
    "green",
    "online",
    "done",
    "finished",
    "initialized",
    "initialised",
    "promoted",
    "created",
    "configured",
    "accepted",
    "programmed",
    "admitted",
    "allowed",
    "valid",
    "validated",
    "verified",
    "issued",
    "registered",
    "launched",
    "reconciled",
    "released",
    "applied",
    "connected",
    "current",
    "uptodate",
    "live",
    "serving",
    "operational",
    "passed",
    "approved",
    "resolved",
    "generated",
    "scheduled",
    "attached",
    "mounted",
    "published",
    "good",
    "normal",
    "insync",
    "true",
    "yes",
    "latest",
    "idle",
    "stable",
    "readytouse",
];

/// Words that say a piece of work is done.
const DONE: &[&str] = &[
    "available",
    "complete",
    "completed",
    "succeeded",
    "successful",
    "success",
    "ready",
    "finished",
    "done",
    "healthy",
];

/// Steady states in the `-ing` form that are not work in progress.
const STEADY_GERUNDS: &[&str] = &["running", "serving", "warning", "missing"];

/// The words of `text`, lowercase: `CreateInProgress` → create, in,
/// progress; `HEALTH_OK` → health, ok; `crash-loop` → crash, loop.
pub fn split(text: &str) -> Vec<String> {
    let mut words = Vec::new();
    let mut word = String::new();
    let chars: Vec<char> = text.chars().collect();
    for (index, &c) in chars.iter().enumerate() {
        if !c.is_alphanumeric() {
            flush(&mut word, &mut words);
            continue;
        }
        let previous = index.checked_sub(1).map(|at| chars[at]);
        let next = chars.get(index + 1);
        let starts_word = c.is_uppercase()
            && previous.is_some_and(|previous| {
                previous.is_lowercase()
                    || previous.is_numeric()
                    || (previous.is_uppercase() && next.is_some_and(|next| next.is_lowercase()))
            });
        if starts_word {
            flush(&mut word, &mut words);
        }
        word.extend(c.to_lowercase());
    }
    flush(&mut word, &mut words);
    words
}

fn flush(word: &mut String, words: &mut Vec<String>) {
    if !word.is_empty() {
        words.push(std::mem::take(word));
    }
}

/// What `text` means, or `None` if none of its words is a status word.
///
/// The whole value, joined, is tried first (`CrashLoopBackOff`,
/// `InProgress`, `UpToDate`). Otherwise a failure word anywhere decides
/// (`UpdateFailed`); else the last word with a meaning does, since
/// compounds name the activity first and the outcome last
/// (`ContinuousArchivingSuccess`, `RolloutPaused`, `NotReadyYet`), and a
/// good word after a negation is good news withheld (`ClusterIsNotReady`).
/// Words of the lexicon outrank the `-ing` / `-ed` guesses.
pub fn meaning(text: &str) -> Option<Meaning> {
    memo::remembered(&MEANINGS, text, |text| words_meaning(&split(text)))
}

thread_local! {
    static MEANINGS: memo::Memo<Option<Meaning>> = memo::Memo::default();
}

/// [`meaning`] of a value already split into words.
pub fn words_meaning(words: &[String]) -> Option<Meaning> {
    let whole = match words {
        [] => return None,
        [word] => whole(word),
        _ => whole(&words.concat()),
    };
    if whole.is_some() {
        return whole;
    }
    if words.iter().any(|word| FAILURE.contains(&word.as_str())) {
        return Some(Meaning::Failure);
    }
    let mut known = None;
    let mut guessed = None;
    for (index, word) in words.iter().enumerate() {
        let negated = index > 0 && NEGATIONS.contains(&words[index - 1].as_str())
            || index > 1 && NEGATIONS.contains(&words[index - 2].as_str());
        let word = word.as_str();
        let next = words.get(index + 1).map(String::as_str);
        let lexicon = if PAUSED.contains(&word) {
            Some(Meaning::Paused)
        } else if UNDERWAY.contains(&word) || (word == "in" && next == Some("progress")) {
            Some(Meaning::Underway)
        } else if LACKING.contains(&word) {
            Some(Meaning::Lacking)
        } else if UNDECIDED.contains(&word) {
            Some(Meaning::Undecided)
        } else if GOOD.contains(&word) {
            Some(Meaning::Good)
        } else {
            None
        };
        let lexicon = match lexicon {
            Some(Meaning::Good) if negated => Some(Meaning::Lacking),
            other => other,
        };
        if lexicon.is_some() {
            known = lexicon;
        } else if is_gerund(word) {
            guessed = Some(Meaning::Underway);
        } else if is_participle(word) {
            guessed = Some(if negated {
                Meaning::Lacking
            } else {
                Meaning::Good
            });
        }
    }
    known.or(guessed)
}

/// The meaning of a whole value, joined into one word.
fn whole(joined: &str) -> Option<Meaning> {
    let lists: [(&[&str], Meaning); 8] = [
        (FAILURE, Meaning::Failure),
        (FAILURE_ALONE, Meaning::Failure),
        (PAUSED, Meaning::Paused),
        (UNDECIDED, Meaning::Undecided),
        (UNDERWAY, Meaning::Underway),
        (UNDERWAY_ALONE, Meaning::Underway),
        (GOOD, Meaning::Good),
        (GOOD_ALONE, Meaning::Good),
    ];
    lists
        .iter()
        .find(|(list, _)| list.contains(&joined))
        .map(|(_, meaning)| *meaning)
}

/// Whether `text` says a piece of work is done (`NewReplicaSetAvailable`,
/// `RolloutCompleted`), by the words of the lexicon only.
pub fn says_done(text: &str) -> bool {
    split(text).iter().any(|word| DONE.contains(&word.as_str()))
}

/// Whether `text` begins with work underway (`Creating HorizontalPodAutoscaler`).
pub fn begins_underway(text: &str) -> bool {
    let first = text.split_whitespace().next().unwrap_or("");
    let words = split(first);
    words
        .first()
        .is_some_and(|word| UNDERWAY.contains(&word.as_str()) || is_gerund(word))
}

/// A verb in its `-ing` form that is no steady state: `Finalising`.
fn is_gerund(word: &str) -> bool {
    word.len() > 5 && word.ends_with("ing") && !STEADY_GERUNDS.contains(&word)
}

/// A participle in `-ed`: an accomplished step (`Provisioned`).
fn is_participle(word: &str) -> bool {
    word.len() > 4 && word.ends_with("ed")
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Asserts that each of `words` has `expected` for its meaning.
    fn assert_all_mean(expected: Meaning, words: &[&str]) {
        for word in words {
            assert_eq!(meaning(word), Some(expected), "{word}");
        }
    }

    #[test]
    fn camel_snake_kebab_and_acronyms_split_into_words() {
        assert_eq!(split("CreateInProgress"), ["create", "in", "progress"]);
        assert_eq!(split("HEALTH_WARN"), ["health", "warn"]);
        assert_eq!(
            split("crash-loop back off"),
            ["crash", "loop", "back", "off"]
        );
        assert_eq!(split("HTTPRouteReady"), ["http", "route", "ready"]);
        assert_eq!(split("cnpg.io/hibernation"), ["cnpg", "io", "hibernation"]);
    }

    #[test]
    fn a_failure_word_anywhere_makes_the_value_a_failure() {
        assert_all_mean(
            Meaning::Failure,
            &[
                "Failed",
                "UpdateFailed",
                "SyncFailed",
                "CrashLoopBackOff",
                "HEALTH_ERR",
                "ProgressDeadlineExceeded",
                "RolloutAborted",
                "InvalidSpec",
                "Unhealthy",
                "red",
            ],
        );
    }

    #[test]
    fn pauses_and_stops_are_suspensions() {
        assert_all_mean(
            Meaning::Paused,
            &[
                "Paused",
                "Suspended",
                "Stopped",
                "Hibernated",
                "Disabled",
                "PausedByUser",
            ],
        );
    }

    #[test]
    fn work_words_and_unknown_gerunds_are_underway() {
        assert_all_mean(
            Meaning::Underway,
            &[
                "Pending",
                "Provisioning",
                "CreateInProgress",
                "ScalingUp",
                "Finalising",
                "Promoting",
                "WaitingForInfrastructure",
                "NotReadyYet",
                "Initializing",
            ],
        );
    }

    #[test]
    fn withheld_good_news_is_lacking_not_good() {
        for word in ["NotReady", "PartiallyReady", "NoPodReady", "Unavailable"] {
            assert_ne!(meaning(word), Some(Meaning::Good), "{word}");
        }
        assert_eq!(meaning("NotReady"), Some(Meaning::Lacking));
        assert_eq!(meaning("HEALTH_WARN"), Some(Meaning::Lacking));
        assert_eq!(meaning("yellow"), Some(Meaning::Lacking));
    }

    #[test]
    fn steady_states_and_accomplished_steps_are_good() {
        assert_all_mean(
            Meaning::Good,
            &[
                "Running",
                "Ready",
                "Active",
                "Bound",
                "Succeeded",
                "Complete",
                "HEALTH_OK",
                "Provisioned",
                "green",
                "UpToDate",
                "InSync",
                "Available",
                "ContinuousArchivingSuccess",
                "Cluster in healthy state",
            ],
        );
    }

    #[test]
    fn words_that_say_nothing_have_no_meaning() {
        assert_eq!(meaning("abc123"), None);
        assert_eq!(meaning("Example"), None);
        assert_eq!(meaning("Inconclusive"), Some(Meaning::Undecided));
    }
}
