//! Text of the payloads recorded beside entries, exits and events: argument and return values
//! ([`args`], rendered with the specs of [`crate::specs`]) and event data ([`events`]). The
//! engine ([`crate::merge`]) renders them on demand for the visitors that show them.

pub mod args;
pub mod events;
