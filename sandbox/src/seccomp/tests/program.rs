//! The compiled program: what `compile` makes of the table, run by a small classic-BPF
//! interpreter against it.

use pretty_assertions::assert_eq;

use super::*;

#[test]
fn compile_succeeds_for_every_confined_combination() {
    for profile in CONFINED {
        for options in all_options() {
            let program = compile(profile, options).expect("compiles");
            assert!(
                program.len() <= BPF_MAXINSNS,
                "{} instructions",
                program.len()
            );
        }
    }
}

#[test]
fn compile_refuses_the_none_profile() {
    let error =
        compile(SeccompProfile::None, options(true, true, true)).expect_err("no filter for none");
    assert!(
        matches!(error, SandboxError::SeccompBuild { .. }),
        "{error:?}"
    );
    assert_eq!(
        error.to_string(),
        "building seccomp filter `none`: profile `none` has no filter; the launcher installs nothing for it"
    );
}

#[test]
fn compile_rejects_a_syscall_with_two_errnos() {
    let mut table = rules(SeccompProfile::Confined, options(false, false, false));
    let mut ptrace = table.first().expect("rows").clone();
    ptrace.errno = libc::ENOSYS;
    table.push(ptrace);
    let error = build_program(&table, TargetArch::x86_64, false).expect_err("inconsistent table");
    assert!(
        error.contains("`ptrace` is denied with two errnos"),
        "{error}"
    );
}

const AUDIT_ARCH_I386: u32 = 3 | 0x4000_0000;

fn native_audit_arch() -> u32 {
    if cfg!(target_arch = "x86_64") {
        AUDIT_ARCH_X86_64
    } else {
        AUDIT_ARCH_AARCH64
    }
}

#[test]
fn program_starts_with_an_architecture_check_that_kills_the_process() {
    let program =
        compile(SeccompProfile::Confined, options(false, false, false)).expect("compiles");
    assert_eq!(
        program.get(..3).expect("long enough"),
        &[
            sock_filter {
                code: 0x20,
                jt: 0,
                jf: 0,
                k: 4
            },
            sock_filter {
                code: 0x15,
                jt: 1,
                jf: 0,
                k: native_audit_arch()
            },
            sock_filter {
                code: 0x06,
                jt: 0,
                jf: 0,
                k: libc::SECCOMP_RET_KILL_PROCESS
            },
        ]
    );
    let getpid = data(libc::SYS_getpid, [0; 6]);
    assert_eq!(
        run(
            &program,
            &Data {
                arch: AUDIT_ARCH_I386,
                ..getpid
            }
        ),
        libc::SECCOMP_RET_KILL_PROCESS
    );
    assert_eq!(run(&program, &getpid), libc::SECCOMP_RET_ALLOW);
}

#[test]
#[cfg(target_arch = "x86_64")]
fn x32_syscalls_kill_the_process() {
    let program =
        compile(SeccompProfile::Confined, options(false, false, false)).expect("compiles");
    let x32 = u32::try_from(libc::SYS_getpid).expect("small") | X32_SYSCALL_BIT;
    let x32_ptrace = 521 | X32_SYSCALL_BIT;
    for nr in [
        x32,
        x32_ptrace,
        X32_SYSCALL_BIT,
        0x7fff_ffff,
        0x8000_0000,
        0xffff_fffe,
    ] {
        assert_eq!(
            run(
                &program,
                &Data {
                    nr,
                    arch: AUDIT_ARCH_X86_64,
                    args: [0; 6]
                }
            ),
            libc::SECCOMP_RET_KILL_PROCESS,
            "{nr:#x}"
        );
    }
    // -1 (a tracer skipping a syscall) goes on to the table and is allowed; the kernel says ENOSYS.
    assert_eq!(
        run(
            &program,
            &Data {
                nr: u32::MAX,
                arch: AUDIT_ARCH_X86_64,
                args: [0; 6]
            }
        ),
        libc::SECCOMP_RET_ALLOW
    );
}

/// The interesting argument values: families, requests, personas, clone flags, high bits.
pub(super) fn probe_values() -> Vec<u64> {
    let mut values = vec![
        0,
        1,
        2,
        3,
        5,
        8,
        9,
        10,
        16,
        17,
        31,
        38,
        40,
        45,
        46,
        100,
        0x11,
        0x5401,
        0x5412,
        0x541B,
        0x541C,
        0x1_0000_5412,
        0xFFFF_FFFF_0000_541C,
        0x1_0000_0000,
        0x1_0000_0002,
        0x2_0000,
        0x2_0008,
        0x4_0000,
        0x8_0002,
        0x8_0801,
        0x3d_0f00,
        0x7fff_ffff,
        0xffff_ffff,
        u64::MAX,
        // F_SETLEASE, with high bits; modes with the setuid and setgid bits, and without.
        0x400,
        0x1_0000_0400,
        0o4755,
        0o2755,
        0o100_644,
        0o104_755,
        0x1_0000_0800,
    ];
    for (_, flag) in CLONE_NEW_FLAGS {
        values.extend([
            u64::from(flag),
            u64::from(flag) | 0x11,
            u64::from(flag) | 0x1_0000_0000,
        ]);
    }
    values
}

#[test]
fn compiled_program_agrees_with_the_table() {
    let values = probe_values();
    let mut conditional = vec![
        libc::SYS_clone,
        libc::SYS_ioctl,
        libc::SYS_personality,
        libc::SYS_socket,
        libc::SYS_socketpair,
        libc::SYS_fcntl,
        libc::SYS_prlimit64,
        libc::SYS_mknodat,
        libc::SYS_mkdirat,
        libc::SYS_fchmodat,
        libc::SYS_fchmod,
    ];
    #[cfg(target_arch = "x86_64")]
    conditional.extend([libc::SYS_mknod, libc::SYS_mkdir, libc::SYS_chmod]);
    for profile in CONFINED {
        for options in all_options() {
            let table = rules(profile, options);
            let program = compile(profile, options).expect("compiles");
            let expected = |nr: c_long, args: [u64; 6]| match denied(&table, nr, args) {
                Some(errno) => libc::SECCOMP_RET_ERRNO | errno.cast_unsigned(),
                None => libc::SECCOMP_RET_ALLOW,
            };
            let mut others: Vec<c_long> = table.iter().map(|row| row.nr).collect();
            others.extend([
                libc::SYS_getpid,
                libc::SYS_read,
                libc::SYS_write,
                libc::SYS_connect,
                libc::SYS_kill,
            ]);
            for nr in others {
                for args in [[0; 6], [u64::MAX; 6], args3(1, 0x5412, 9)] {
                    assert_eq!(
                        run(&program, &data(nr, args)),
                        expected(nr, args),
                        "{nr} {args:?}"
                    );
                }
            }
            for &nr in &conditional {
                for &a0 in &values {
                    for &a1 in &values {
                        for a2 in [0, 9, 0o4755, 0o2000, 0o100_644] {
                            let args = args3(a0, a1, a2);
                            assert_eq!(
                                run(&program, &data(nr, args)),
                                expected(nr, args),
                                "{profile:?} {options:?} nr {nr} args {args:x?}"
                            );
                        }
                    }
                }
            }
        }
    }
}

/// `struct seccomp_data` as the kernel passes it to the filter.
#[derive(Clone, Copy)]
pub(super) struct Data {
    nr: u32,
    arch: u32,
    args: [u64; 6],
}

pub(super) fn data(nr: c_long, args: [u64; 6]) -> Data {
    Data {
        nr: u32::try_from(nr).expect("syscall numbers are small"),
        arch: native_audit_arch(),
        args,
    }
}

fn load(data: &Data, offset: u32) -> u32 {
    match offset {
        0 => data.nr,
        4 => data.arch,
        16..=63 if offset.is_multiple_of(4) => {
            let index = usize::try_from((offset - 16) / 8).expect("small");
            let arg = data.args[index];
            if offset.is_multiple_of(8) {
                low32(arg)
            } else {
                low32(arg >> 32)
            }
        }
        other => panic!("unexpected load offset {other}"),
    }
}

/// A classic-BPF interpreter for the instructions seccompiler and `compile` emit.
pub(super) fn run(program: &[sock_filter], data: &Data) -> u32 {
    let mut acc = 0u32;
    let mut pc = 0usize;
    loop {
        let instruction = program
            .get(pc)
            .unwrap_or_else(|| panic!("fell off the program at {pc}"));
        pc += 1;
        let (jt, jf) = (usize::from(instruction.jt), usize::from(instruction.jf));
        let k = instruction.k;
        match instruction.code {
            0x20 => acc = load(data, k),                      // LD W ABS
            0x54 => acc &= k,                                 // ALU AND K
            0x05 => pc += usize::try_from(k).expect("small"), // JA
            0x15 => pc += if acc == k { jt } else { jf },     // JEQ K
            0x25 => pc += if acc > k { jt } else { jf },      // JGT K
            0x35 => pc += if acc >= k { jt } else { jf },     // JGE K
            0x06 => return k,                                 // RET K
            other => panic!("unexpected opcode {other:#x} at {}", pc - 1),
        }
    }
}
