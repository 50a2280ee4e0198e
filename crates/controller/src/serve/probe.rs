//! Whether the controller can do its job, for `/healthz` and `/readyz`.
//!
//! A controller whose Application watch fails (it cannot list: RBAC, an
//! API server that refuses, a CRD gone) reconciles nothing, so it must not
//! answer "ok". The watch reports each list or event to a [`Probe`]; the
//! HTTP endpoints read it.

use std::sync::{Arc, Mutex};

/// The controller's own view of its health. Cheap to clone; all clones
/// share one state.
#[derive(Clone, Default)]
pub struct Probe {
    state: Arc<Mutex<State>>,
}

#[derive(Default)]
struct State {
    /// The Application watch listed everything at least once.
    listed: bool,
    /// The last watch error, while the watch has not recovered from it.
    failing: Option<String>,
    /// Waiting on the Lease, which it can read: a standby, ready to lead.
    standby: bool,
}

/// What a probe says.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Verdict {
    Ok,
    /// Not failing, but nothing listed yet (starting, or just elected).
    Starting,
    /// The watch fails: the controller cannot see its Applications.
    Failing(String),
}

impl Probe {
    /// This replica waits on the Lease another holds (`true`), or leads
    /// (`false`).
    pub fn standby(&self, standby: bool) {
        self.state.lock().expect("lock").standby = standby;
    }

    /// The watch listed every Application (or delivered an event).
    pub fn watch_ok(&self, initial_list_done: bool) {
        let mut state = self.state.lock().expect("lock");
        state.failing = None;
        state.listed |= initial_list_done;
    }

    /// The watch failed with `error`; it will retry with backoff.
    pub fn watch_failed(&self, error: &str) {
        self.state.lock().expect("lock").failing =
            Some(format!("cannot list or watch Applications: {error}"));
    }

    /// Liveness: the process works unless its watch fails.
    pub fn live(&self) -> Verdict {
        match &self.state.lock().expect("lock").failing {
            Some(error) => Verdict::Failing(error.clone()),
            None => Verdict::Ok,
        }
    }

    /// Readiness: a standby that reads the Lease is ready (to take over;
    /// a rolling update or a drain waits on it); the leader once its
    /// watch listed every Application and does not fail.
    pub fn ready(&self) -> Verdict {
        let state = self.state.lock().expect("lock");
        match (&state.failing, state.listed || state.standby) {
            (Some(error), _) => Verdict::Failing(error.clone()),
            (None, false) => Verdict::Starting,
            (None, true) => Verdict::Ok,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_failing_watch_is_neither_live_nor_ready_until_it_recovers() {
        let probe = Probe::default();
        assert_eq!(probe.live(), Verdict::Ok);
        assert_eq!(probe.ready(), Verdict::Starting);
        probe.standby(true);
        assert_eq!(probe.ready(), Verdict::Ok, "a standby is ready");
        probe.standby(false);
        assert_eq!(probe.ready(), Verdict::Starting, "a new leader lists first");
        probe.watch_ok(true);
        assert_eq!(probe.ready(), Verdict::Ok);
        probe.watch_failed("403 forbidden");
        assert!(matches!(probe.live(), Verdict::Failing(e) if e.contains("403")));
        assert!(matches!(probe.ready(), Verdict::Failing(_)));
        probe.watch_ok(false);
        assert_eq!(probe.live(), Verdict::Ok);
        assert_eq!(probe.ready(), Verdict::Ok);
    }
}
