//! What a sync did to one object: the closed vocabulary reported everywhere.

crate::vocabulary! {
    /// The outcome of applying (or pruning) one object.
    pub enum Action("sync action") {
        /// The object did not exist and was created.
        Created = "created",
        /// The object existed and at least one field changed.
        Configured = "configured",
        /// The object already matched; nothing was written.
        Unchanged = "unchanged",
        /// The object was deleted (prune).
        Deleted = "deleted",
        /// The object was left alone on purpose (opt-out, circuit breaker).
        Skipped = "skipped",
    }
}

impl Action {
    /// The outcome of an apply, judged from the object's resourceVersion
    /// before (`None`: it did not exist) and after the write.
    pub fn of_apply(before: Option<&str>, after: &str) -> Action {
        match before {
            None => Action::Created,
            Some(before) if before == after => Action::Unchanged,
            Some(_) => Action::Configured,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_apply_is_judged_by_resource_version() {
        assert_eq!(Action::of_apply(None, "5"), Action::Created);
        assert_eq!(Action::of_apply(Some("5"), "5"), Action::Unchanged);
        assert_eq!(Action::of_apply(Some("5"), "6"), Action::Configured);
    }

    #[test]
    fn actions_serialize_in_the_same_words_they_print() {
        for action in Action::ALL {
            assert_eq!(
                serde_json::to_value(action).unwrap(),
                serde_json::Value::String(action.to_string())
            );
        }
    }
}
