//! `bridle chat`: the interactive terminal on a live session (sessions.md). What it shows
//! is [`render`]: committed log events turned into terminal lines.
// The command itself is wired to the live session handle (issue 11) when it lands; until
// then only the renderer exists, and only its tests use it.
#![allow(dead_code)]

pub mod input;
pub mod render;
