//! bridle's agent loop: the session event log, the turn/step lifecycle, the tool pipeline,
//! model adapters and plugins (plan mode). Depends on `exec` and `policy`, never on `sandbox`.
//!
//! Under construction.
#![forbid(unsafe_code)]
