//! The seccomp filter's tests, by what they look at: the deny table (pure), the compiled
//! program (a small classic-BPF interpreter runs it against the table), the filter installed in
//! forked children (style C.23), and the supervised filter whose listener decides execs.

#![allow(unsafe_code, reason = "install tests fork and make raw syscalls")]

use std::io;

use bridle_policy::{Guarantee, SeccompProfile};
use nix::libc::{self, c_long};
use nix::sys::signal::Signal;
use nix::sys::wait::{WaitStatus, waitpid};
use nix::unistd::{ForkResult, fork};
use seccompiler::{BpfProgram, TargetArch, sock_filter};

use super::*;
use crate::SandboxError;

const CONFINED: [SeccompProfile; 2] = [SeccompProfile::Confined, SeccompProfile::ConfinedNoNetwork];

fn all_options() -> Vec<SeccompOptions> {
    let mut all = Vec::new();
    for network_off in [false, true] {
        for netns_isolates in [false, true] {
            for deny_unix_sockets in [false, true] {
                all.push(SeccompOptions {
                    network_off,
                    netns_isolates,
                    deny_unix_sockets,
                });
            }
        }
    }
    all
}

fn options(network_off: bool, netns_isolates: bool, deny_unix_sockets: bool) -> SeccompOptions {
    SeccompOptions {
        network_off,
        netns_isolates,
        deny_unix_sockets,
    }
}

fn args3(a0: u64, a1: u64, a2: u64) -> [u64; 6] {
    [a0, a1, a2, 0, 0, 0]
}

/// The errno the table returns for `nr(args)`, `None` when allowed.
fn denied(table: &[DenyRule], nr: c_long, args: [u64; 6]) -> Option<i32> {
    evaluate(table, nr, &args).map(|row| row.errno)
}

fn domain(af: i32) -> u64 {
    u64::from(af.cast_unsigned())
}

const EPERM: Option<i32> = Some(libc::EPERM);

mod installed;
mod program;
mod sockets;
mod supervised;
mod table;
