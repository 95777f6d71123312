use std::os::unix::fs::symlink;

use nix::libc;

use super::*;

fn leaked_tempdir() -> &'static Path {
    let dir = tempfile::tempdir().unwrap();
    let path = std::fs::canonicalize(dir.path()).unwrap();
    std::mem::forget(dir);
    Box::leak(path.into_boxed_path())
}

#[test]
fn a_program_reached_through_read_only_directories_and_symlinks_resolves_to_its_file() {
    let ws = leaked_tempdir();
    let mut settler = Settler::with_writable(ws);
    let sh = std::fs::metadata("/bin/sh").unwrap();
    // /bin is a symlink on merged-usr systems, /bin/sh one to dash: both followed.
    match settler.resolve(Path::new("/bin/sh")).unwrap() {
        Found::File(id, _) => assert_eq!(id, (sh.dev(), sh.ino())),
        Found::Fails(_) => panic!("/bin/sh resolves"),
    }
    match settler.resolve(Path::new("/usr/../bin/./sh")).unwrap() {
        Found::File(id, _) => assert_eq!(id, (sh.dev(), sh.ino())),
        Found::Fails(_) => panic!("/usr/../bin/./sh resolves"),
    }
}

#[test]
fn a_path_through_a_writable_directory_is_not_settled() {
    let ws = leaked_tempdir();
    std::fs::copy("/bin/true", ws.join("true")).unwrap();
    symlink("/bin/true", ws.join("link")).unwrap();
    let mut settler = Settler::with_writable(ws);
    for path in [ws.join("true"), ws.join("link"), ws.join("missing")] {
        assert!(settler.resolve(&path).is_err(), "{}", path.display());
    }
    // A symlink from a read-only place into the writable one is followed into it: the
    // lookup there is what is refused.
    assert!(settler.resolve(&ws.join("link")).is_err());
}

#[test]
fn a_missing_file_in_a_read_only_directory_fails_in_the_kernel_too() {
    let ws = leaked_tempdir();
    let mut settler = Settler::with_writable(ws);
    for path in ["/usr/bin/no-such-program-here", "/etc/passwd/x", "/usr/bin"] {
        assert!(
            matches!(settler.resolve(Path::new(path)), Ok(Found::Fails(_))),
            "{path}"
        );
    }
}

/// The errno of a real exec of `path` by this process.
fn exec_error(path: &Path) -> Option<i32> {
    std::process::Command::new(path)
        .spawn()
        .map(|mut child| {
            let _ = child.wait();
        })
        .err()
        .and_then(|e| e.raw_os_error())
}

#[test]
fn a_missing_step_is_answered_with_the_error_the_kernels_exec_gives() {
    let ws = leaked_tempdir();
    let mut settler = Settler::with_writable(ws);
    for (path, errno) in [
        ("/usr/bin/no-such-program-here", libc::ENOENT),
        ("/no/such/dir/program", libc::ENOENT),
        ("/etc/passwd/x", libc::ENOTDIR),
        ("/usr/../usr/bin/no-such-program-here", libc::ENOENT),
    ] {
        let path = Path::new(path);
        assert_eq!(settler.failure(path), Some(errno), "{}", path.display());
        assert_eq!(exec_error(path), Some(errno), "{}", path.display());
    }
    // A directory (EACCES), a program that is there, a path in a writable place, below /proc,
    // relative, or longer than the kernel takes: left to the kernel.
    let long = format!("/{}", "a/".repeat(2100));
    for path in [
        "/usr/bin",
        "/bin/sh",
        &format!("{}/missing", ws.display()),
        "/proc/self/fd/99",
        "bin/missing",
        &long,
    ] {
        assert_eq!(settler.failure(Path::new(path)), None, "{path}");
    }
}

#[test]
fn a_missing_step_below_a_directory_others_cannot_search_is_left_to_the_kernel() {
    use std::os::unix::fs::PermissionsExt;
    let ws = leaked_tempdir();
    // Outside the writable one: read-only in this settler's view.
    let closed = leaked_tempdir();
    let open = leaked_tempdir();
    let owner_closed = leaked_tempdir();
    std::fs::set_permissions(closed, std::fs::Permissions::from_mode(0o710)).unwrap();
    std::fs::set_permissions(open, std::fs::Permissions::from_mode(0o755)).unwrap();
    std::fs::set_permissions(owner_closed, std::fs::Permissions::from_mode(0o605)).unwrap();
    let mut settler = Settler::with_writable(ws);
    // A caller outside the directory's owner and group gets EACCES from the kernel, not ENOENT.
    assert_eq!(settler.failure(&closed.join("program")), None);
    // So does its owner, where only others may search it.
    assert_eq!(settler.failure(&owner_closed.join("program")), None);
    assert_eq!(settler.failure(&open.join("program")), Some(libc::ENOENT));
}

#[test]
fn a_directory_a_writable_mount_also_shows_is_not_settled() {
    let ws = leaked_tempdir();
    let mut settler = Settler::with_writable(ws);
    // `/usr` shown read-only, and writable again at `/srv/usr` (a bind mount of it).
    settler.mounts = Some(mounts::parse(
        b"1 0 1:1 / / ro - ext4 /dev/x ro\n2 1 1:1 /usr /srv/usr rw - ext4 /dev/x rw\n",
    ));
    assert_eq!(
        settler.resolve(Path::new("/usr/bin/env")).err(),
        Some(NotSettled("a writable mount shows the same directory"))
    );
}

#[test]
fn relative_paths_and_paths_below_proc_are_not_settled() {
    let ws = leaked_tempdir();
    let mut settler = Settler::with_writable(ws);
    for path in ["bin/true", "/proc/self/exe", "/proc/self/fd/0", "/dev/fd/0"] {
        assert!(settler.resolve(Path::new(path)).is_err(), "{path}");
    }
}

#[test]
fn on_this_hosts_own_writable_root_nothing_is_settled() {
    // Outside a sandbox's view the root is writable (the test host), so the real check
    // refuses the same program the view above takes.
    if read_only(Path::new("/")) {
        return;
    }
    let mut settler = Settler::default();
    assert!(settler.resolve(Path::new("/bin/sh")).is_err());
}

#[test]
fn only_a_single_link_elf_file_through_read_only_directories_is_a_fixed_program() {
    let ws = leaked_tempdir();
    // Outside the writable directory: read-only in this view.
    let ro = leaked_tempdir();
    let mut settler = Settler::with_writable(ws);
    std::fs::copy("/bin/true", ro.join("prog")).unwrap();
    std::fs::copy("/bin/true", ws.join("prog")).unwrap();
    std::fs::write(ro.join("script"), "#!/bin/true\n").unwrap();
    std::fs::copy("/bin/true", ro.join("linked")).unwrap();
    std::fs::hard_link(ro.join("linked"), ro.join("second-name")).unwrap();
    symlink(ro.join("prog"), ws.join("to-prog")).unwrap();
    std::fs::copy("/bin/true", ro.join("prog.exe")).unwrap();
    // A 64-bit ELF header of another machine than this one (x86-64, or else AArch64).
    let mut foreign = std::fs::read("/bin/true").unwrap();
    let other: u16 = if cfg!(target_arch = "x86_64") {
        183
    } else {
        62
    };
    foreign[18..20].copy_from_slice(&other.to_le_bytes());
    std::fs::write(ro.join("foreign"), foreign).unwrap();
    let meta = |p: &Path| std::fs::metadata(p).unwrap();
    let prog = ro.join("prog");
    assert!(settler.fixed_program(&prog, &meta(&prog)).is_some());
    // Asked again (the answer is kept): still, for the same file only.
    assert!(settler.fixed_program(&prog, &meta(&prog)).is_some());
    assert!(
        settler
            .fixed_program(&prog, &meta(&ro.join("script")))
            .is_none(),
        "another file than the one the path named"
    );
    let not_fixed = [
        // A script runs its interpreter, and so may another machine's program or a name with
        // an extension (`binfmt_misc`).
        ro.join("script"),
        ro.join("foreign"),
        ro.join("prog.exe"),
        // A file the command can write, or reach through a writable directory.
        ws.join("prog"),
        ws.join("to-prog"),
        // A second link could be in a writable root.
        ro.join("linked"),
        ro.join("second-name"),
    ];
    for path in not_fixed {
        assert!(
            settler.fixed_program(&path, &meta(&path)).is_none(),
            "{}",
            path.display()
        );
    }
    // Relative: resolved against a working directory that can change.
    let relative = Path::new("prog");
    assert!(settler.fixed_program(relative, &meta(&prog)).is_none());
}

#[test]
fn a_fixed_program_names_its_interpreter_which_must_be_fixed_too() {
    use std::os::unix::ffi::OsStrExt;
    let ws = leaked_tempdir();
    let ro = leaked_tempdir();
    let mut settler = Settler::with_writable(ws);
    let meta = |p: &Path| std::fs::metadata(p).unwrap();
    let original = std::fs::read("/bin/true").unwrap();
    let loader = super::super::elf::interpreter(&mut std::fs::File::open("/bin/true").unwrap())
        .unwrap()
        .expect("/bin/true is dynamically linked");
    let prog = ro.join("prog");
    std::fs::write(&prog, &original).unwrap();
    let found = settler
        .fixed_program(&prog, &meta(&prog))
        .expect("a fixed program")
        .expect("the loader");
    assert_eq!(found.path.as_os_str().as_bytes(), &loader[..]);
    let real = meta(&std::fs::canonicalize(&found.path).unwrap());
    assert_eq!(
        (found.file.dev(), found.file.ino()),
        (real.dev(), real.ino())
    );
    // Where the interpreter is in a directory the command could write (or replace it in),
    // the same program is not fixed: a view in which the loader's directory is writable.
    let canonical = std::fs::canonicalize(&found.path).unwrap();
    let mut settler = Settler::with_writable(canonical.parent().unwrap());
    assert!(settler.fixed_program(&prog, &meta(&prog)).is_none());
    // A relative interpreter path is opened from the caller's working directory: never fixed.
    assert!(settler.stable_interpreter(Path::new("lib/ld.so")).is_none());
}

/// Run by [`a_proc_filesystem_mounted_outside_proc_names_no_fixed_program`] inside its own
/// user, mount and PID namespaces: mounts a proc filesystem at `BRIDLE_TEST_PROCFS` (which is
/// not below `/proc`) and checks that nothing through it is settled or fixed.
#[test]
#[ignore = "run inside namespaces by a_proc_filesystem_mounted_outside_proc_names_no_fixed_program"]
fn proc_filesystem_elsewhere_inside_namespaces() {
    let at = PathBuf::from(std::env::var_os("BRIDLE_TEST_PROCFS").expect("BRIDLE_TEST_PROCFS"));
    nix::mount::mount(
        Some("proc"),
        &at,
        Some("proc"),
        nix::mount::MsFlags::empty(),
        None::<&str>,
    )
    .expect("mounting a proc filesystem");
    let ws = leaked_tempdir();
    let mut settler = Settler::with_writable(ws);
    // `self/exe` names this test's program in the supervisor, and the caller's own in the
    // caller: never the same file for both.
    let exe = at.join("self/exe");
    let meta = std::fs::metadata(&exe).unwrap();
    assert!(settler.resolve(&exe).is_err(), "{}", exe.display());
    assert!(
        settler.fixed_program(&exe, &meta).is_none(),
        "{}",
        exe.display()
    );
    assert_eq!(settler.failure(&at.join("self/no-such-file")), None);
    println!("checked through {}", at.display());
}

#[test]
fn a_proc_filesystem_mounted_outside_proc_names_no_fixed_program() {
    let dir = leaked_tempdir();
    let at = dir.join("p");
    std::fs::create_dir(&at).unwrap();
    let test = std::env::current_exe().unwrap();
    let out = std::process::Command::new("unshare")
        .args(["--user", "--map-root-user", "--mount", "--pid", "--fork"])
        .arg(&test)
        .args([
            "--exact",
            "supervisor::settled::tests::proc_filesystem_elsewhere_inside_namespaces",
            "--ignored",
            "--nocapture",
        ])
        .env("BRIDLE_TEST_PROCFS", &at)
        .output()
        .expect("unshare (util-linux) runs");
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    if crate::host_lacks("userns") && !out.status.success() {
        return;
    }
    assert!(
        out.status.success() && stdout.contains("checked through"),
        "the check inside namespaces failed (a host without user namespaces says so in BRIDLE_HOST_LACKS=userns)\n{stdout}\n{stderr}"
    );
}
