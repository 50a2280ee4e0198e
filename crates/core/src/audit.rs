//! The break-glass audit chain: how a record is sealed, and whether a log
//! of records is whole and authentic.
//!
//! Each record is sealed with an HMAC-SHA256 over the seal of the record
//! before it and its own bytes, under a key only the controller reads
//! ([`chain_mac`]). Without the key nobody can write a record that
//! verifies, so a record added or replaced by hand is [`ChainState::Forged`];
//! a record removed leaves a hole in the sequence numbers, or a log shorter
//! than the count the window's status keeps, which is a [`ChainState::Gap`].
//! Records written before records were keyed carry a plain SHA-256 chain
//! digest ([`chain_digest`]): they are checked as far as that goes and
//! reported as [`ChainState::Unkeyed`].
//!
//! Everything read from a record is untrusted: numbers are parsed, never
//! computed with unchecked arithmetic, and a malformed record is reported,
//! never a panic.

use std::collections::BTreeMap;

use hmac::{Hmac, Mac};
use serde_json::Value;
use sha2::{Digest, Sha256};

/// Problems named in a report, at most (the rest are counted).
const PROBLEMS_SHOWN: usize = 5;

/// The seal of record `record` chained after `previous`: HMAC-SHA256 under
/// `key` over the previous seal, a newline and the record's bytes, in hex.
pub fn chain_mac(key: &[u8], previous: &str, record: &[u8]) -> String {
    let mut mac = Hmac::<Sha256>::new_from_slice(key).expect("HMAC takes a key of any length");
    mac.update(previous.as_bytes());
    mac.update(b"\n");
    mac.update(record);
    hex(&mac.finalize().into_bytes())
}

/// The unkeyed seal records had before [`chain_mac`]: SHA-256 over the
/// previous digest, a newline and the record's bytes, in hex. Anyone can
/// recompute it, so it shows accidents, not forgeries.
pub fn chain_digest(previous: &str, record: &[u8]) -> String {
    let mut hasher = Sha256::new();
    hasher.update(previous.as_bytes());
    hasher.update(b"\n");
    hasher.update(record);
    hex(&hasher.finalize())
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|byte| format!("{byte:02x}")).collect()
}

/// How a stored record is sealed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Seal {
    /// An HMAC under the controller's key ([`chain_mac`]).
    Keyed(String),
    /// A plain chain digest, from before records were keyed ([`chain_digest`]).
    Unkeyed(String),
    /// No seal at all.
    Missing,
}

impl Seal {
    fn value(&self) -> &str {
        match self {
            Seal::Keyed(value) | Seal::Unkeyed(value) => value,
            Seal::Missing => "",
        }
    }
}

/// One stored record as read from the cluster: where it is (for messages),
/// its bytes and its seal.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StoredRecord {
    /// `ConfigMap tether-system/audit-…-00001`.
    pub name: String,
    pub text: String,
    pub seal: Seal,
}

crate::vocabulary! {
    /// What a check found, worst first; the same words in status, CLI and
    /// events.
    pub enum ChainState("audit chain state") {
        /// A record does not verify: added, replaced or altered by hand.
        Forged,
        /// A record is missing: sequence numbers skip, or the log holds
        /// fewer records than the window's status counts.
        Gap,
        /// Whole, but some records predate keyed records (SHA-256 only).
        Unkeyed,
        /// Whole, and every seal checked (or, without the key, every link).
        Intact,
    }
}

impl ChainState {
    /// Whether the log can no longer be trusted as written.
    pub fn is_broken(self) -> bool {
        matches!(self, ChainState::Forged | ChainState::Gap)
    }
}

/// The verdict on one window's log.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ChainReport {
    pub state: ChainState,
    /// Records found that are part of the chain (verified or not).
    pub records: u64,
    /// Whether keyed seals were checked (the key was at hand).
    pub keyed_checked: bool,
    /// What is wrong, worst first; at most a few, then how many more.
    pub problems: Vec<String>,
}

impl ChainReport {
    /// One line: the state and its first reasons.
    pub fn message(&self) -> String {
        let seals = if self.keyed_checked {
            "every seal verified"
        } else {
            "seals not checked here (the controller holds the key)"
        };
        match self.state {
            ChainState::Intact => format!("{} record(s), chain intact, {seals}", self.records),
            ChainState::Unkeyed => format!(
                "{} record(s), chain intact, {seals}; {}",
                self.records,
                self.problems.join("; ")
            ),
            ChainState::Gap | ChainState::Forged => {
                format!("{}: {}", self.state, self.problems.join("; "))
            }
        }
    }
}

/// Checks a window's log: `stored` in any order, `expected` the count the
/// window's status keeps, `key` the controller's key (without it, keyed
/// seals are not checked, only sequence numbers and links). Records beyond
/// `expected` that chain correctly are fine: status is written after the
/// record.
///
/// ```
/// use tether_core::audit::{ChainState, Seal, StoredRecord, chain_mac, verify};
/// let text = r#"{"sequence":1,"previousDigest":""}"#;
/// let record = StoredRecord {
///     name: "ConfigMap tether-system/audit-1".into(),
///     text: text.into(),
///     seal: Seal::Keyed(chain_mac(b"key", "", text.as_bytes())),
/// };
/// assert_eq!(verify(&[record.clone()], Some(b"key"), 1).state, ChainState::Intact);
/// assert_eq!(verify(&[record], Some(b"other"), 1).state, ChainState::Forged);
/// ```
pub fn verify(stored: &[StoredRecord], key: Option<&[u8]>, expected: u64) -> ChainReport {
    let mut findings = Findings::default();
    let chain = findings.authentic(stored, key);
    findings.walk(&chain, expected);
    findings.report(chain.len() as u64, key.is_some())
}

/// Sequence → (record, the seal it names as its predecessor).
type Chain<'a> = BTreeMap<u64, (&'a StoredRecord, String)>;

/// What [`verify`] finds wrong, as it reads the records.
#[derive(Default)]
struct Findings {
    forged: Vec<String>,
    gaps: Vec<String>,
    unkeyed: Vec<u64>,
}

impl Findings {
    /// The records that are what they claim to be, by sequence: each must
    /// parse, carry a seal that matches its content (keyed seals only
    /// checked with `key`) and be the only one of its sequence number.
    fn authentic<'a>(&mut self, stored: &'a [StoredRecord], key: Option<&[u8]>) -> Chain<'a> {
        let mut chain = Chain::new();
        for record in stored {
            let Some((sequence, previous)) = parse(&record.text) else {
                self.forged.push(format!(
                    "{}: not a record (no JSON body with a sequence ≥ 1 and a previousDigest)",
                    record.name
                ));
                continue;
            };
            if matches!(record.seal, Seal::Unkeyed(_)) {
                self.unkeyed.push(sequence);
            }
            if !seal_matches(record, key, &previous) {
                self.forged.push(format!(
                    "{} (sequence {sequence}): its seal does not match its content: forged or altered",
                    record.name
                ));
                continue;
            }
            if let Some((other, _)) = chain.get(&sequence) {
                self.forged.push(format!(
                    "{} and {} both claim sequence {sequence}",
                    other.name, record.name
                ));
                continue;
            }
            chain.insert(sequence, (record, previous));
        }
        chain
    }

    /// Walks the sequence: every number from 1 to at least `expected`,
    /// each record naming the seal of the one before it.
    fn walk(&mut self, chain: &Chain<'_>, expected: u64) {
        let mut next: Option<u64> = Some(1);
        let mut previous_seal = "";
        for (&sequence, (record, previous)) in chain {
            match next {
                Some(want) if sequence == want && previous_seal != previous => {
                    self.forged.push(format!(
                        "{} (sequence {sequence}) does not follow the record before it: a record was replaced",
                        record.name
                    ))
                }
                Some(want) if sequence == want => {}
                Some(want) => self.gaps.push(missing(want, sequence.saturating_sub(1))),
                None => {}
            }
            next = sequence.checked_add(1);
            previous_seal = record.seal.value();
        }
        let last = chain.keys().next_back().copied().unwrap_or(0);
        if last < expected {
            self.gaps.push(format!(
                "{} (the window's status counts {expected})",
                missing(last.saturating_add(1), expected)
            ));
        }
    }

    /// The verdict: the worst finding decides the state; the problems say
    /// forgeries first, then gaps, then unkeyed records, at most
    /// [`PROBLEMS_SHOWN`] of them.
    fn report(self, records: u64, keyed_checked: bool) -> ChainReport {
        let state = if !self.forged.is_empty() {
            ChainState::Forged
        } else if !self.gaps.is_empty() {
            ChainState::Gap
        } else if !self.unkeyed.is_empty() {
            ChainState::Unkeyed
        } else {
            ChainState::Intact
        };
        let mut problems: Vec<String> = self.forged.into_iter().chain(self.gaps).collect();
        if state == ChainState::Unkeyed {
            problems.push(format!(
                "record(s) {} predate keyed records (SHA-256 chain only: proof against accidents, not forgery)",
                ranges(&self.unkeyed)
            ));
        }
        if problems.len() > PROBLEMS_SHOWN {
            let more = problems.len() - PROBLEMS_SHOWN;
            problems.truncate(PROBLEMS_SHOWN);
            problems.push(format!("and {more} more"));
        }
        ChainReport {
            state,
            records,
            keyed_checked,
            problems,
        }
    }
}

/// Whether `record`'s seal matches its content and the seal it names as
/// its predecessor. A keyed seal passes unchecked without `key`; a record
/// without a seal never passes.
fn seal_matches(record: &StoredRecord, key: Option<&[u8]>, previous: &str) -> bool {
    match (&record.seal, key) {
        (Seal::Keyed(seal), Some(key)) => *seal == chain_mac(key, previous, record.text.as_bytes()),
        (Seal::Keyed(_), None) => true,
        (Seal::Unkeyed(seal), _) => *seal == chain_digest(previous, record.text.as_bytes()),
        (Seal::Missing, _) => false,
    }
}

/// The sequence number and the predecessor's seal a record names.
fn parse(text: &str) -> Option<(u64, String)> {
    let body: Value = serde_json::from_str(text).ok()?;
    let sequence = body.get("sequence")?.as_u64().filter(|s| *s >= 1)?;
    let previous = body.get("previousDigest")?.as_str()?.to_string();
    Some((sequence, previous))
}

fn missing(from: u64, to: u64) -> String {
    if from == to {
        format!("record {from} is missing")
    } else {
        format!("records {from}–{to} are missing")
    }
}

/// `1–3, 7` for `[1, 2, 3, 7]`.
fn ranges(numbers: &[u64]) -> String {
    let mut sorted = numbers.to_vec();
    sorted.sort_unstable();
    sorted.dedup();
    let mut parts: Vec<String> = Vec::new();
    let mut start = None;
    for (i, &n) in sorted.iter().enumerate() {
        let first = *start.get_or_insert(n);
        let continues = sorted
            .get(i + 1)
            .is_some_and(|&m| Some(m) == n.checked_add(1));
        if !continues {
            parts.push(if first == n {
                n.to_string()
            } else {
                format!("{first}–{n}")
            });
            start = None;
        }
    }
    parts.join(", ")
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    const KEY: &[u8] = b"0123456789abcdef0123456789abcdef";

    /// A keyed log of `count` records, as the controller writes it.
    fn log(count: u64) -> Vec<StoredRecord> {
        let mut previous = String::new();
        (1..=count)
            .map(|sequence| {
                let text = json!({"sequence": sequence, "previousDigest": previous, "fields": []})
                    .to_string();
                let seal = chain_mac(KEY, &previous, text.as_bytes());
                previous = seal.clone();
                StoredRecord {
                    name: format!("ConfigMap tether-system/audit-w-{sequence:05}"),
                    text,
                    seal: Seal::Keyed(seal),
                }
            })
            .collect()
    }

    #[test]
    fn a_whole_keyed_log_is_intact_in_any_order() {
        let mut records = log(3);
        records.reverse();
        let report = verify(&records, Some(KEY), 3);
        assert_eq!(report.state, ChainState::Intact, "{report:?}");
        assert_eq!(report.records, 3);
        assert_eq!(
            report.message(),
            "3 record(s), chain intact, every seal verified"
        );
    }

    #[test]
    fn a_removed_record_is_a_gap_with_or_without_the_key() {
        let mut records = log(3);
        records.remove(1);
        for key in [Some(KEY), None] {
            let report = verify(&records, key, 3);
            assert_eq!(report.state, ChainState::Gap, "{report:?}");
            assert_eq!(report.problems, ["record 2 is missing"]);
        }
    }

    #[test]
    fn a_removed_last_record_is_a_gap_against_the_count_in_status() {
        let records = log(2);
        let report = verify(&records, None, 4);
        assert_eq!(report.state, ChainState::Gap);
        assert_eq!(
            report.problems,
            ["records 3–4 are missing (the window's status counts 4)"]
        );
        // Records the status does not count yet are fine.
        assert_eq!(verify(&log(3), Some(KEY), 2).state, ChainState::Intact);
    }

    #[test]
    fn a_record_with_a_recomputed_digest_is_forged() {
        let mut records = log(3);
        let text =
            json!({"sequence": 2, "previousDigest": records[0].seal.value(), "fields": ["forged"]})
                .to_string();
        // What a forger without the key can compute: the plain digest, or
        // a MAC under a key of their own.
        for seal in [
            Seal::Keyed(chain_digest(records[0].seal.value(), text.as_bytes())),
            Seal::Keyed(chain_mac(
                b"guess",
                records[0].seal.value(),
                text.as_bytes(),
            )),
        ] {
            records[1] = StoredRecord {
                name: "ConfigMap tether-system/audit-w-00002".into(),
                text: text.clone(),
                seal,
            };
            let report = verify(&records, Some(KEY), 3);
            assert_eq!(report.state, ChainState::Forged, "{report:?}");
            assert!(report.problems[0].contains("audit-w-00002"), "{report:?}");
        }
    }

    #[test]
    fn malformed_records_are_reported_not_a_panic() {
        let mut records = log(1);
        for text in [
            json!({"sequence": u64::MAX, "previousDigest": ""}).to_string(),
            json!({"sequence": -1, "previousDigest": ""}).to_string(),
            json!({"sequence": 0, "previousDigest": ""}).to_string(),
            json!({"sequence": "18446744073709551616"}).to_string(),
            "not json".to_string(),
        ] {
            records.push(StoredRecord {
                name: "ConfigMap shop/evil".into(),
                seal: Seal::Keyed(chain_mac(b"guess", "", text.as_bytes())),
                text,
            });
        }
        let report = verify(&records, Some(KEY), u64::MAX);
        assert_eq!(report.state, ChainState::Forged);
        assert_eq!(report.records, 1);
        // A genuine record with the largest sequence is a gap, not a panic.
        let text = json!({"sequence": u64::MAX, "previousDigest": ""}).to_string();
        let huge = StoredRecord {
            name: "x".into(),
            seal: Seal::Keyed(chain_mac(KEY, "", text.as_bytes())),
            text,
        };
        let report = verify(&[huge], Some(KEY), u64::MAX);
        assert_eq!(report.state, ChainState::Gap);
    }

    #[test]
    fn records_from_before_keying_are_unkeyed_and_still_chained() {
        let first = json!({"sequence": 1, "previousDigest": ""}).to_string();
        let digest = chain_digest("", first.as_bytes());
        let second = json!({"sequence": 2, "previousDigest": digest}).to_string();
        let records = [
            StoredRecord {
                name: "ConfigMap shop/w-audit-00001".into(),
                text: first,
                seal: Seal::Unkeyed(digest.clone()),
            },
            StoredRecord {
                name: "ConfigMap tether-system/audit-w-00002".into(),
                seal: Seal::Keyed(chain_mac(KEY, &digest, second.as_bytes())),
                text: second,
            },
        ];
        let report = verify(&records, Some(KEY), 2);
        assert_eq!(report.state, ChainState::Unkeyed, "{report:?}");
        assert!(
            report
                .message()
                .contains("record(s) 1 predate keyed records")
        );
    }

    #[test]
    fn each_seal_depends_on_the_key_and_every_record_before_it() {
        let one = chain_mac(KEY, "", b"a");
        assert_eq!(one.len(), 64);
        assert_ne!(one, chain_mac(b"other key", "", b"a"));
        assert_ne!(chain_mac(KEY, &one, b"b"), chain_mac(KEY, "x", b"b"));
        assert_ne!(chain_digest("", b"a"), chain_digest("x", b"a"));
    }

    #[test]
    fn sequence_ranges_read_compactly() {
        assert_eq!(
            ranges(&[3, 1, 2, 7, u64::MAX]),
            format!("1–3, 7, {}", u64::MAX)
        );
    }
}
