//! The reliability suite, short by default (`make soak` runs it long, RELIABILITY.md):
//! property tests ([`properties`]), the race soak ([`soak`]), chaos ([`chaos`]) and load
//! ([`load`]).

mod chaos;
mod load;
mod properties;
mod soak;
