//! The recursive comparison behind [`diff`](super::diff) and
//! [`diff_manifest`](super::diff_manifest).
//!
//! Two modes share one walk. [`Mode::Full`] compares every field of two
//! server-produced objects. [`Mode::Manifest`] compares only the fields the
//! manifest sets, plus the fields of live that the applying manager owns
//! and the manifest no longer sets (server-side apply would remove those).

use std::collections::BTreeSet;

use serde_json::Value;

use super::FieldDiff;
use super::lists::{element_segment, find_match, is_absent, list_keys, scalars_equal};
use super::managed::FieldSet;
use super::path::{FieldPath, Segment};

/// Which fields of live count.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Mode {
    Full,
    Manifest,
}

/// One comparison: its mode and the differences found so far.
pub(super) struct Walk {
    pub mode: Mode,
    pub out: Vec<FieldDiff>,
}

impl Walk {
    /// Compares `desired` with `live` at `path`; `owned` is the applying
    /// manager's node for this path (manifest mode only), `field` the name of
    /// the mapping key holding these values (to find list keys).
    pub fn compare(
        &mut self,
        desired: Option<&Value>,
        live: Option<&Value>,
        owned: Option<&FieldSet>,
        path: &FieldPath,
        field: Option<&str>,
    ) {
        let desired = desired.filter(|value| !is_absent(value));
        let live = live.filter(|value| !is_absent(value));
        match (desired, live) {
            (None, None) => {}
            (Some(desired), None) => self.push(path, Some(desired), None),
            (None, Some(live)) => match self.mode {
                Mode::Full => self.push(path, None, Some(live)),
                Mode::Manifest => self.leftovers(live, owned, path, field),
            },
            (Some(Value::Object(desired)), Some(Value::Object(live))) => {
                let keys: BTreeSet<&String> = desired.keys().chain(live.keys()).collect();
                for key in keys {
                    self.compare(
                        desired.get(key),
                        live.get(key),
                        owned.and_then(|set| set.field(key)),
                        &path.field(key),
                        Some(key),
                    );
                }
            }
            (Some(Value::Array(desired)), Some(Value::Array(live))) => {
                self.compare_lists(desired, live, owned, path, field)
            }
            (Some(desired), Some(live)) => {
                if !scalars_equal(desired, live, self.mode == Mode::Manifest) {
                    self.push(path, Some(desired), Some(live));
                }
            }
        }
    }

    fn compare_lists(
        &mut self,
        desired: &[Value],
        live: &[Value],
        owned: Option<&FieldSet>,
        path: &FieldPath,
        field: Option<&str>,
    ) {
        let Some(keys) = list_keys(field, [desired, live]) else {
            return self.compare_positional(desired, live, owned, path);
        };
        // Associative lists are compared element by element; their order
        // carries no meaning to the server.
        let mut used = vec![false; live.len()];
        for (index, item) in desired.iter().enumerate() {
            match find_match(item, live, keys, &used) {
                Some(at) => {
                    used[at] = true;
                    let child = owned.and_then(|set| set.element(&live[at], at));
                    let segment = element_segment(&live[at], Some(keys), at);
                    self.compare(
                        Some(item),
                        Some(&live[at]),
                        child,
                        &path.child(segment),
                        None,
                    );
                }
                None => {
                    let segment = element_segment(item, Some(keys), index);
                    self.push(&path.child(segment), Some(item), None);
                }
            }
        }
        for (at, item) in live.iter().enumerate().filter(|(at, _)| !used[*at]) {
            let child = owned.and_then(|set| set.element(item, at));
            self.compare(
                None,
                Some(item),
                child,
                &path.child(element_segment(item, Some(keys), at)),
                None,
            );
        }
    }

    /// Lists without keys are atomic to the server: equal element by
    /// element, or reported whole.
    fn compare_positional(
        &mut self,
        desired: &[Value],
        live: &[Value],
        owned: Option<&FieldSet>,
        path: &FieldPath,
    ) {
        let objects = desired.iter().chain(live).all(Value::is_object);
        if objects && desired.len() == live.len() {
            for (index, (d, l)) in desired.iter().zip(live).enumerate() {
                let child = owned.and_then(|set| set.element(l, index));
                self.compare(
                    Some(d),
                    Some(l),
                    child,
                    &path.child(Segment::Index(index)),
                    None,
                );
            }
            return;
        }
        let mut probe = Walk {
            mode: self.mode,
            out: Vec::new(),
        };
        let same_length = desired.len() == live.len();
        if same_length {
            for (d, l) in desired.iter().zip(live) {
                probe.compare(Some(d), Some(l), None, path, None);
            }
        }
        if !same_length || !probe.out.is_empty() {
            self.push(
                path,
                Some(&Value::Array(desired.to_vec())),
                Some(&Value::Array(live.to_vec())),
            );
        }
    }

    /// In manifest mode, the parts of `live` (which the manifest does not
    /// set) that the applying manager owns: the next apply removes them.
    fn leftovers(
        &mut self,
        live: &Value,
        owned: Option<&FieldSet>,
        path: &FieldPath,
        field: Option<&str>,
    ) {
        let Some(owned) = owned else { return };
        if owned.is_member() {
            return self.push(path, None, Some(live));
        }
        match live {
            Value::Object(map) => {
                for (key, value) in map {
                    self.leftovers(value, owned.field(key), &path.field(key), Some(key));
                }
            }
            Value::Array(items) => {
                let keys = list_keys(field, [items, items]);
                for (index, item) in items.iter().enumerate() {
                    let segment = element_segment(item, keys, index);
                    self.leftovers(item, owned.element(item, index), &path.child(segment), None);
                }
            }
            _ => {}
        }
    }

    fn push(&mut self, path: &FieldPath, desired: Option<&Value>, live: Option<&Value>) {
        self.out.push(FieldDiff {
            path: path.clone(),
            desired: desired.cloned(),
            live: live.cloned(),
        });
    }
}
