//! The plugins bridle ships besides plan mode ([`crate::plan_mode`]).

pub mod runtime_context;
