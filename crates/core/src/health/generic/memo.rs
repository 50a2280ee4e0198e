//! A small per-thread memo for readings of short texts: operators repeat
//! the same field names, condition types, reasons and state words across
//! thousands of objects, so each distinct text is split and looked up once.
//! The readings are pure, so remembering them changes no verdict.

use std::cell::RefCell;
use std::collections::HashMap;
use std::thread::LocalKey;

/// How many texts a memo keeps before it starts afresh (bounds memory
/// when statuses carry ever-new values).
const CAPACITY: usize = 4096;

/// Texts longer than this (messages) are read every time, not kept.
const LONGEST: usize = 64;

pub struct Memo<T>(RefCell<HashMap<Box<str>, T>>);

impl<T> Default for Memo<T> {
    fn default() -> Self {
        Memo(RefCell::new(HashMap::new()))
    }
}

/// `read(text)`, remembered in `memo` for this thread.
pub fn remembered<T: Copy + 'static>(
    memo: &'static LocalKey<Memo<T>>,
    text: &str,
    read: impl FnOnce(&str) -> T,
) -> T {
    if text.len() > LONGEST {
        return read(text);
    }
    memo.with(|memo| {
        if let Some(reading) = memo.0.borrow().get(text) {
            return *reading;
        }
        let reading = read(text);
        let mut map = memo.0.borrow_mut();
        if map.len() >= CAPACITY {
            map.clear();
        }
        map.insert(text.into(), reading);
        reading
    })
}
