//! bridle's consumers: file tools, one-shot bash, the PTY terminal, the subprocess manager and
//! the approvals seam. Each is interface / local implementation / model-facing tool.
//!
//! Under construction: lands after the sandbox core.
#![forbid(unsafe_code)]
