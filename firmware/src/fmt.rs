//! The crate's one logging shim: `trace!` to `error!` expand to defmt's macros with the `defmt`
//! feature, and to nothing without it (the arguments are still type-checked, then dropped, so a
//! log line cannot break the build of either configuration).
#![macro_use]
#![allow(unused_macros)]

#[cfg(feature = "defmt")]
macro_rules! trace {
    ($($arg:tt)*) => { ::defmt::trace!($($arg)*) };
}
#[cfg(feature = "defmt")]
macro_rules! debug {
    ($($arg:tt)*) => { ::defmt::debug!($($arg)*) };
}
#[cfg(feature = "defmt")]
macro_rules! info {
    ($($arg:tt)*) => { ::defmt::info!($($arg)*) };
}
#[cfg(feature = "defmt")]
macro_rules! warn {
    ($($arg:tt)*) => { ::defmt::warn!($($arg)*) };
}
#[cfg(feature = "defmt")]
macro_rules! error {
    ($($arg:tt)*) => { ::defmt::error!($($arg)*) };
}

#[cfg(not(feature = "defmt"))]
macro_rules! trace {
    ($fmt:literal $(, $arg:expr)* $(,)?) => {{ let _ = ($(&$arg),*); }};
}
#[cfg(not(feature = "defmt"))]
macro_rules! debug {
    ($fmt:literal $(, $arg:expr)* $(,)?) => {{ let _ = ($(&$arg),*); }};
}
#[cfg(not(feature = "defmt"))]
macro_rules! info {
    ($fmt:literal $(, $arg:expr)* $(,)?) => {{ let _ = ($(&$arg),*); }};
}
#[cfg(not(feature = "defmt"))]
macro_rules! warn {
    ($fmt:literal $(, $arg:expr)* $(,)?) => {{ let _ = ($(&$arg),*); }};
}
#[cfg(not(feature = "defmt"))]
macro_rules! error {
    ($fmt:literal $(, $arg:expr)* $(,)?) => {{ let _ = ($(&$arg),*); }};
}
