use super::super::listing as names;
use super::*;

/// An empty directory (invisible to git), recorded outside the workspace.
fn is_bare_placeholder(dir: &Path) -> bool {
    let meta = std::fs::symlink_metadata(dir).unwrap();
    matches!(contents(dir), Contents::Empty)
        && Registry::open()
            .unwrap()
            .holds((meta.dev(), meta.ino()), dir)
}

#[test]
fn missing_protected_path_gets_an_empty_recorded_placeholder_that_is_removed() {
    let root = tempfile::tempdir().unwrap();
    let ws = root.path();
    std::fs::create_dir(ws.join(".git")).unwrap();
    let mut run = Placeholders::default();
    let chain = protected_chain(ws, &ws.join(".bridle"), &mut run).unwrap();
    assert_eq!(chain, vec![ws.join(".bridle")]);
    assert!(is_bare_placeholder(&ws.join(".bridle")));
    run.remove();
    assert_eq!(names(ws), [".git"]);
}

/// `git clone URL .` needs an empty directory.
#[test]
fn a_root_without_a_repository_gets_no_placeholder_at_its_top() {
    let root = tempfile::tempdir().unwrap();
    let ws = root.path();
    let mut run = Placeholders::default();
    let chain = protected_chain(ws, &ws.join(".bridle"), &mut run).unwrap();
    assert_eq!(chain, Vec::<PathBuf>::new());
    assert_eq!(run.take_absent_at_end(), [ws.join(".bridle")]);
    assert!(names(ws).is_empty());
    // Deeper down, placeholders are made as before.
    std::fs::create_dir(ws.join("sub")).unwrap();
    let chain = protected_chain(ws, &ws.join("sub/.husky"), &mut run).unwrap();
    assert_eq!(chain, vec![ws.join("sub"), ws.join("sub/.husky")]);
    run.remove();
    assert_eq!(names(ws), ["sub"]);
}

#[test]
fn a_missing_git_dir_gets_no_placeholder() {
    let root = tempfile::tempdir().unwrap();
    let ws = root.path();
    let mut run = Placeholders::default();
    let chain = protected_chain(ws, &ws.join("sub/.git/hooks"), &mut run);
    assert_eq!(chain.unwrap(), Vec::<PathBuf>::new());
    std::fs::create_dir(ws.join("sub")).unwrap();
    let chain = protected_chain(ws, &ws.join("sub/.git/hooks"), &mut run);
    assert_eq!(chain.unwrap(), Vec::<PathBuf>::new());
    assert!(!ws.join("sub/.git").exists());
    // A profile that protects `sub/.git` itself still gets one.
    let chain = protected_chain(ws, &ws.join("sub/.git"), &mut run).unwrap();
    assert_eq!(chain, vec![ws.join("sub"), ws.join("sub/.git")]);
    run.remove();
    assert!(!ws.join("sub/.git").exists());
}

#[test]
fn placeholder_stays_while_another_run_holds_it() {
    let root = tempfile::tempdir().unwrap();
    let ws = root.path();
    std::fs::create_dir(ws.join(".git")).unwrap();
    let mut first = Placeholders::default();
    let mut second = Placeholders::default();
    protected_chain(ws, &ws.join(".git/hooks"), &mut first).unwrap();
    // The second run protects the first run's placeholder as it is.
    let chain = protected_chain(ws, &ws.join(".git/hooks/x"), &mut second).unwrap();
    assert_eq!(chain, vec![ws.join(".git"), ws.join(".git/hooks")]);
    first.remove();
    assert!(ws.join(".git/hooks").is_dir(), "removed under another run");
    // The last run out removes it, though it did not create it.
    second.remove();
    assert!(!ws.join(".git/hooks").exists());
    assert!(ws.join(".git").is_dir());
}

#[test]
fn a_placeholder_of_an_earlier_version_is_recognised_and_removed() {
    let root = tempfile::tempdir().unwrap();
    let ws = root.path();
    std::fs::create_dir(ws.join(".bridle")).unwrap();
    assert_eq!(names(ws), [".bridle"]);
    std::fs::write(ws.join(".bridle").join(PLACEHOLDER_MARKER), "").unwrap();
    let mut run = Placeholders::default();
    let chain = protected_chain(ws, &ws.join(".bridle/x"), &mut run).unwrap();
    assert_eq!(chain, vec![ws.join(".bridle")]);
    run.remove();
    assert!(!ws.join(".bridle").exists());
}

#[test]
fn existing_directories_are_held_and_never_removed() {
    let root = tempfile::tempdir().unwrap();
    let ws = root.path();
    std::fs::create_dir_all(ws.join(".git/hooks")).unwrap();
    std::fs::create_dir_all(ws.join(".bridle")).unwrap();
    let mut run = Placeholders::default();
    let chain = protected_chain(ws, &ws.join(".git/hooks"), &mut run).unwrap();
    assert_eq!(chain, vec![ws.join(".git"), ws.join(".git/hooks")]);
    // An empty directory of the user's is not taken for a placeholder.
    let chain = protected_chain(ws, &ws.join(".bridle/x"), &mut run).unwrap();
    assert_eq!(chain, vec![ws.join(".bridle"), ws.join(".bridle/x")]);
    run.remove();
    assert!(ws.join(".git/hooks").is_dir());
    assert!(ws.join(".bridle").is_dir());
    assert!(!ws.join(".bridle/x").exists());
}

/// As root the placeholder is made anyway (root creates in a mode-555 directory); as any
/// other user the directory that refuses it is protected whole, never a refusal.
#[test]
fn a_directory_that_refuses_the_placeholder_is_protected_whole() {
    use std::os::unix::fs::PermissionsExt;
    let root = tempfile::tempdir().unwrap();
    let ws = root.path();
    let module = ws.join(".git/modules/m");
    std::fs::create_dir_all(&module).unwrap();
    std::fs::set_permissions(&module, std::fs::Permissions::from_mode(0o555)).unwrap();
    let mut run = Placeholders::default();
    let chain = protected_chain(ws, &module.join("hooks"), &mut run);
    std::fs::set_permissions(&module, std::fs::Permissions::from_mode(0o755)).unwrap();
    let chain = chain.unwrap();
    let as_root = std::fs::metadata("/proc/self").is_ok_and(|m| m.uid() == 0);
    let target = chain.last().unwrap();
    if as_root {
        assert_eq!(*target, module.join("hooks"));
    } else {
        assert_eq!(*target, module);
    }
    run.remove();
}

#[test]
fn symlink_on_a_protected_path_is_refused() {
    let root = tempfile::tempdir().unwrap();
    let ws = root.path();
    std::os::unix::fs::symlink("/", ws.join(".git")).unwrap();
    let mut run = Placeholders::default();
    let err = protected_chain(ws, &ws.join(".git/hooks"), &mut run).unwrap_err();
    assert_eq!(err.guarantee, Guarantee::FsProtect);
}
