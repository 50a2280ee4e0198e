//! What the cluster has, and how it compares with Git: the watch caches of
//! managed objects ([`live`], held as text in [`packed`]), health ([`health`]), the memoized
//! server-side-apply comparison ([`compare`], [`memo`]) and drift
//! ([`drift`]).

pub mod compare;
pub mod drift;
pub mod health;
pub mod live;
pub mod memo;
pub mod packed;
