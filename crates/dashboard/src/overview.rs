//! What the overview shows, decided from the Applications alone: one row
//! per app, the counts of the four operational states, the Synced ×
//! Healthy matrix, and which rows a query selects in which order.
//!
//! Everything here is a function of values (the time is passed in as
//! text), so it is tested without a cluster or a server.

use std::cmp::Ordering;

use tether_controller::api::Application;
use tether_core::vocabulary::Vocabulary;
use tether_core::{HealthStatus, OperationalState, SyncStatus};

/// One Application as the table shows it, borrowed from the cache.
#[derive(Clone, Debug, PartialEq)]
pub struct Row<'a> {
    pub name: &'a str,
    pub namespace: &'a str,
    /// `status.project`: the Project that holds the app.
    pub project: Option<&'a str>,
    /// None until the controller first reports on the app.
    pub sync: Option<SyncStatus>,
    pub health: Option<HealthStatus>,
    pub state: Option<OperationalState>,
    pub revision: Option<&'a str>,
    /// Drifted resources (`status.drift`).
    pub drift: usize,
    /// `status.sync.notSyncedSince`.
    pub not_synced_since: Option<&'a str>,
    /// When the last sync finished (or started, while it runs); else the
    /// newest history entry.
    pub last_sync: Option<&'a str>,
}

impl<'a> Row<'a> {
    /// The row of `app`.
    pub fn of(app: &'a Application) -> Row<'a> {
        let status = app.status.as_ref();
        Row {
            name: app.metadata.name.as_deref().unwrap_or_default(),
            namespace: app.metadata.namespace.as_deref().unwrap_or_default(),
            project: status.and_then(|s| s.project.as_deref()),
            sync: status.map(|s| s.sync.status),
            health: status.map(|s| s.health.status),
            state: status.and_then(|s| s.state),
            revision: status.and_then(|s| s.sync.revision.as_deref()),
            drift: status.map_or(0, |s| s.drift.len()),
            not_synced_since: status.and_then(|s| s.sync.not_synced_since.as_deref()),
            last_sync: status.and_then(|s| {
                s.operation_state
                    .as_ref()
                    .map(|op| op.finished_at.as_deref().unwrap_or(&op.started_at))
                    .or_else(|| s.history.last().map(|h| h.time.as_str()))
            }),
        }
    }
}

/// How many apps are in each operational state, and how many have none
/// yet (not compared).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Headline {
    /// Indexed like [`OperationalState::ALL`].
    pub states: [usize; 4],
    pub not_compared: usize,
}

impl Headline {
    /// The apps in `state`.
    pub fn count(&self, state: OperationalState) -> usize {
        self.states[position(state)]
    }
}

/// The headline counts of `rows`.
pub fn headline(rows: &[Row]) -> Headline {
    let mut headline = Headline::default();
    for row in rows {
        match row.state {
            Some(state) => headline.states[position(state)] += 1,
            None => headline.not_compared += 1,
        }
    }
    headline
}

/// Apps per sync status (rows) and health status (columns); an app not
/// reported on yet counts as Unknown × Unknown.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Matrix {
    /// `[sync][health]`, indexed like `SyncStatus::ALL` and `HealthStatus::ALL`.
    pub cells: [[usize; 6]; 3],
}

impl Matrix {
    /// The apps that are `sync` and `health`.
    pub fn count(&self, sync: SyncStatus, health: HealthStatus) -> usize {
        self.cells[position(sync)][position(health)]
    }
}

/// The Synced × Healthy matrix of `rows`.
pub fn matrix(rows: &[Row]) -> Matrix {
    let mut matrix = Matrix { cells: [[0; 6]; 3] };
    for row in rows {
        let sync = row.sync.unwrap_or_default();
        let health = row.health.unwrap_or_default();
        matrix.cells[position(sync)][position(health)] += 1;
    }
    matrix
}

/// A word's place in its vocabulary.
fn position<V: Vocabulary + PartialEq>(word: V) -> usize {
    V::ALL
        .iter()
        .position(|w| *w == word)
        .expect("every word is in its vocabulary")
}

tether_core::vocabulary! {
    /// The columns the table sorts by, in its column order, as `?sort=`
    /// names them.
    pub enum SortKey("column") {
        Name = "name",
        Namespace = "namespace",
        Project = "project",
        Sync = "sync",
        Health = "health",
        State = "state",
        Revision = "revision",
        Drift = "drift",
        NotSynced = "notsynced",
        LastSync = "lastsync",
    }
}

impl SortKey {
    /// The column's heading.
    pub fn heading(self) -> &'static str {
        match self {
            SortKey::Name => "Name",
            SortKey::Namespace => "Namespace",
            SortKey::Project => "Project",
            SortKey::Sync => "Sync",
            SortKey::Health => "Health",
            SortKey::State => "State",
            SortKey::Revision => "Revision",
            SortKey::Drift => "Drift",
            SortKey::NotSynced => "NotSynced for",
            SortKey::LastSync => "Last sync",
        }
    }

    /// `a` against `b` by this key, ascending. A missing value sorts
    /// first; "NotSynced for" and "Last sync" ascend by age (a later
    /// instant is younger), so descending puts the longest wait first.
    fn compare(self, a: &Row, b: &Row) -> Ordering {
        match self {
            SortKey::Name => a.name.cmp(b.name),
            SortKey::Namespace => a.namespace.cmp(b.namespace),
            SortKey::Project => a.project.cmp(&b.project),
            SortKey::Sync => a.sync.cmp(&b.sync),
            SortKey::Health => a.health.cmp(&b.health),
            SortKey::State => a.state.cmp(&b.state),
            SortKey::Revision => a.revision.cmp(&b.revision),
            SortKey::Drift => a.drift.cmp(&b.drift),
            // RFC 3339 times in UTC order as text; an earlier instant is older.
            SortKey::NotSynced => by_age(a.not_synced_since, b.not_synced_since),
            SortKey::LastSync => by_age(a.last_sync, b.last_sync),
        }
    }
}

/// Missing first, then youngest (latest) to oldest (earliest).
fn by_age(a: Option<&str>, b: Option<&str>) -> Ordering {
    match (a, b) {
        (None, None) => Ordering::Equal,
        (None, Some(_)) => Ordering::Less,
        (Some(_), None) => Ordering::Greater,
        (Some(a), Some(b)) => b.cmp(a),
    }
}

/// A sort column and its direction.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Sort {
    pub key: SortKey,
    pub descending: bool,
}

impl Sort {
    /// Worst state first: what needs a person is at the top.
    pub const DEFAULT: Sort = Sort {
        key: SortKey::State,
        descending: true,
    };

    /// `name` ascending, `-drift` descending.
    pub fn parse(text: &str) -> Result<Sort, QueryError> {
        let (descending, word) = match text.strip_prefix('-') {
            Some(word) => (true, word),
            None => (false, text),
        };
        let key = SortKey::parse(word).map_err(|unknown| QueryError::Sort {
            text: text.to_string(),
            columns: unknown.expected,
        })?;
        Ok(Sort { key, descending })
    }

    /// The `?sort=` text.
    pub fn as_text(self) -> String {
        let sign = if self.descending { "-" } else { "" };
        format!("{sign}{}", self.key.as_str())
    }

    /// The sort a click on `key`'s heading asks for: the other direction
    /// of the current key, else `key` ascending.
    pub fn toggled(self, key: SortKey) -> Sort {
        Sort {
            key,
            descending: self.key == key && !self.descending,
        }
    }
}

/// The query parameters as they arrive: `?q=&state=&sync=&health=&sort=`.
#[derive(Clone, Debug, Default, PartialEq, Eq, serde::Deserialize)]
pub struct Query {
    pub q: Option<String>,
    pub state: Option<String>,
    pub sync: Option<String>,
    pub health: Option<String>,
    pub sort: Option<String>,
}

/// A query parameter that names no column or word.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum QueryError {
    #[error("sort={text:?}: not a column ({columns}; a leading - sorts descending)")]
    Sort { text: String, columns: String },
    #[error("{0}")]
    Word(#[from] tether_core::vocabulary::UnknownWord),
}

/// Which rows the table shows, in which order.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct View {
    /// Matched, ignoring ASCII case, in name, namespace, project or revision.
    pub q: String,
    pub state: Option<OperationalState>,
    pub sync: Option<SyncStatus>,
    pub health: Option<HealthStatus>,
    pub sort: Sort,
}

impl View {
    /// The view `query` asks for; an empty parameter is no filter.
    pub fn parse(query: &Query) -> Result<View, QueryError> {
        fn word<V: Vocabulary>(text: &Option<String>) -> Result<Option<V>, QueryError> {
            match text.as_deref().filter(|t| !t.is_empty()) {
                Some(text) => Ok(Some(V::parse(text)?)),
                None => Ok(None),
            }
        }
        Ok(View {
            q: query.q.as_deref().unwrap_or_default().trim().to_string(),
            state: word(&query.state)?,
            sync: word(&query.sync)?,
            health: word(&query.health)?,
            sort: match query.sort.as_deref().filter(|t| !t.is_empty()) {
                Some(text) => Sort::parse(text)?,
                None => Sort::DEFAULT,
            },
        })
    }

    /// The query parameters of this view with `sort`, for a link.
    pub fn query_with(&self, sort: Sort) -> String {
        let mut query = form_urlencoded::Serializer::new(String::new());
        if !self.q.is_empty() {
            query.append_pair("q", &self.q);
        }
        if let Some(state) = self.state {
            query.append_pair("state", state.as_str());
        }
        if let Some(sync) = self.sync {
            query.append_pair("sync", sync.as_str());
        }
        if let Some(health) = self.health {
            query.append_pair("health", health.as_str());
        }
        if sort != Sort::DEFAULT {
            query.append_pair("sort", &sort.as_text());
        }
        query.finish()
    }

    /// Whether `row` passes the filters.
    pub fn shows(&self, row: &Row) -> bool {
        let matches = |text: Option<&str>| text.is_some_and(|t| contains_ignoring_case(t, &self.q));
        (self.q.is_empty()
            || matches(Some(row.name))
            || matches(Some(row.namespace))
            || matches(row.project)
            || matches(row.revision))
            && self.state.is_none_or(|state| row.state == Some(state))
            && self
                .sync
                .is_none_or(|sync| row.sync.unwrap_or_default() == sync)
            && self
                .health
                .is_none_or(|health| row.health.unwrap_or_default() == health)
    }

    /// The rows this view shows, sorted (ties by namespace, then name).
    pub fn select<'a>(&self, rows: &[Row<'a>]) -> Vec<Row<'a>> {
        let mut shown: Vec<Row<'a>> = rows.iter().filter(|r| self.shows(r)).cloned().collect();
        let Sort { key, descending } = self.sort;
        shown.sort_by(|a, b| {
            let order = key.compare(a, b);
            let order = if descending { order.reverse() } else { order };
            order
                .then_with(|| a.namespace.cmp(b.namespace))
                .then_with(|| a.name.cmp(b.name))
        });
        shown
    }
}

/// Whether `needle` occurs in `haystack`, ignoring ASCII case, without
/// allocating (the filter runs for every row of a large table).
fn contains_ignoring_case(haystack: &str, needle: &str) -> bool {
    let (haystack, needle) = (haystack.as_bytes(), needle.as_bytes());
    needle.is_empty()
        || haystack
            .windows(needle.len())
            .any(|window| window.eq_ignore_ascii_case(needle))
}

/// How long since `since` at `now` (`45s`, `1h02m`), when there is a `since`.
pub fn age(since: Option<&str>, now: &str) -> Option<String> {
    since.map(|since| tether_core::alert::span(tether_core::alert::elapsed(since, now)))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn row(name: &'static str, sync: SyncStatus, health: HealthStatus) -> Row<'static> {
        Row {
            name,
            namespace: "shop",
            project: None,
            sync: Some(sync),
            health: Some(health),
            state: OperationalState::of(sync, health),
            revision: None,
            drift: 0,
            not_synced_since: None,
            last_sync: None,
        }
    }

    fn view(query: &str) -> View {
        let mut parsed = Query::default();
        for (key, value) in form_urlencoded::parse(query.as_bytes()) {
            let value = Some(value.into_owned());
            match &*key {
                "q" => parsed.q = value,
                "state" => parsed.state = value,
                "sync" => parsed.sync = value,
                "health" => parsed.health = value,
                "sort" => parsed.sort = value,
                _ => panic!("{key}"),
            }
        }
        View::parse(&parsed).unwrap()
    }

    fn names<'a>(rows: &[Row<'a>]) -> Vec<&'a str> {
        rows.iter().map(|r| r.name).collect()
    }

    #[test]
    fn the_headline_counts_each_operational_state_and_the_apps_not_compared_yet() {
        use HealthStatus::*;
        use SyncStatus::*;
        let rows = [
            row("a", Synced, Healthy),
            row("b", Synced, Progressing),
            row("c", Synced, Degraded),
            row("d", OutOfSync, Healthy),
            row("e", OutOfSync, Missing),
            row("f", SyncStatus::Unknown, HealthStatus::Unknown),
        ];
        let counts = headline(&rows);
        assert_eq!(counts.count(OperationalState::Converged), 2);
        assert_eq!(counts.count(OperationalState::AppliedButFailing), 1);
        assert_eq!(counts.count(OperationalState::DriftedOrPending), 1);
        assert_eq!(counts.count(OperationalState::Broken), 1);
        assert_eq!(counts.not_compared, 1);
    }

    #[test]
    fn the_matrix_counts_apps_per_sync_and_health_and_unreported_ones_as_unknown() {
        use HealthStatus::*;
        use SyncStatus::*;
        let mut unreported = row("u", Synced, Healthy);
        (unreported.sync, unreported.health, unreported.state) = (None, None, None);
        let rows = [
            row("a", Synced, Healthy),
            row("b", Synced, Healthy),
            row("c", OutOfSync, Degraded),
            unreported,
        ];
        let cells = matrix(&rows);
        assert_eq!(cells.count(Synced, Healthy), 2);
        assert_eq!(cells.count(OutOfSync, Degraded), 1);
        assert_eq!(cells.count(SyncStatus::Unknown, HealthStatus::Unknown), 1);
        assert_eq!(cells.cells.iter().flatten().sum::<usize>(), 4);
    }

    #[test]
    fn the_default_order_puts_the_worst_state_first_and_ties_by_name() {
        use HealthStatus::*;
        use SyncStatus::*;
        let rows = [
            row("b", Synced, Healthy),
            row("z", OutOfSync, Degraded),
            row("a", Synced, Healthy),
            row("m", OutOfSync, Healthy),
        ];
        assert_eq!(names(&view("").select(&rows)), ["z", "m", "a", "b"]);
        assert_eq!(
            names(&view("sort=name").select(&rows)),
            ["a", "b", "m", "z"]
        );
        assert_eq!(
            names(&view("sort=-name").select(&rows)),
            ["z", "m", "b", "a"]
        );
    }

    #[test]
    fn the_longest_not_synced_comes_first_when_sorted_descending() {
        let mut old = row("old", SyncStatus::OutOfSync, HealthStatus::Healthy);
        old.not_synced_since = Some("2026-12-04T10:00:00Z");
        let mut new = row("new", SyncStatus::OutOfSync, HealthStatus::Healthy);
        new.not_synced_since = Some("2026-12-04T15:00:00Z");
        let synced = row("synced", SyncStatus::Synced, HealthStatus::Healthy);
        let rows = [new, synced, old];
        assert_eq!(
            names(&view("sort=-notsynced").select(&rows)),
            ["old", "new", "synced"]
        );
    }

    #[test]
    fn filters_match_text_ignoring_case_and_words_exactly() {
        use HealthStatus::*;
        use SyncStatus::*;
        let mut billing = row("Billing-API", OutOfSync, Degraded);
        billing.project = Some("payments");
        let rows = [
            billing,
            row("web", Synced, Healthy),
            row("cart", OutOfSync, Healthy),
        ];
        assert_eq!(names(&view("q=billing").select(&rows)), ["Billing-API"]);
        assert_eq!(names(&view("q=PAYM").select(&rows)), ["Billing-API"]);
        assert_eq!(
            names(&view("state=DriftedOrPending").select(&rows)),
            ["cart"]
        );
        assert_eq!(
            names(&view("sync=OutOfSync&health=Healthy").select(&rows)),
            ["cart"]
        );
        assert_eq!(view("state=&q=").select(&rows).len(), 3);
    }

    #[test]
    fn an_unknown_word_or_column_is_refused_naming_what_is_allowed() {
        let query = Query {
            state: Some("Fine".into()),
            ..Query::default()
        };
        let error = View::parse(&query).unwrap_err().to_string();
        assert!(
            error.contains("\"Fine\" is not a operational state"),
            "{error}"
        );
        assert!(error.contains("Converged"), "{error}");
        let query = Query {
            sort: Some("-age".into()),
            ..Query::default()
        };
        let error = View::parse(&query).unwrap_err().to_string();
        assert!(error.starts_with("sort=\"-age\": not a column"), "{error}");
    }

    #[test]
    fn a_sort_link_keeps_the_filters_and_toggles_the_direction() {
        let shown = view("q=a b&state=Broken&sort=name");
        let sort = shown.sort.toggled(SortKey::Name);
        assert_eq!(shown.query_with(sort), "q=a+b&state=Broken&sort=-name");
        let sort = shown.sort.toggled(SortKey::Drift);
        assert_eq!(shown.query_with(sort), "q=a+b&state=Broken&sort=drift");
        assert_eq!(view("").query_with(Sort::DEFAULT), "");
    }

    #[test]
    fn ages_read_as_spans() {
        let now = "2026-12-04T16:00:00Z";
        assert_eq!(
            age(Some("2026-12-04T14:58:00Z"), now).as_deref(),
            Some("1h02m")
        );
        assert_eq!(
            age(Some("2026-12-04T15:59:15Z"), now).as_deref(),
            Some("45s")
        );
        assert_eq!(age(None, now), None);
    }
}
