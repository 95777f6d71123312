//! bridle's sandbox: the only crate that talks to the kernel about confinement (probe,
//! launcher, Landlock, seccomp, namespaces, rlimits) and the only crate allowed `unsafe`.
//!
//! Under construction: the enforcement core lands with the next issue. Until then this crate
//! exports nothing, and no command of the CLI claims to confine anything.
