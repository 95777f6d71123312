use std::sync::Arc;

use super::*;

fn target(dir: &Path, limit: Option<u64>, budget: &Arc<SpillBudget>) -> SpillTarget {
    SpillTarget {
        dir: dir.to_path_buf(),
        name: "out".into(),
        limit,
        budget: budget.clone(),
    }
}

fn unlimited(dir: &Path) -> SpillTarget {
    target(dir, None, &Arc::new(SpillBudget::new()))
}

fn letters(n: u32) -> Vec<u8> {
    (0..n)
        .map(|i| b'a' + u8::try_from(i % 26).unwrap())
        .collect()
}

#[test]
fn short_output_is_kept_whole_without_a_spill_file() {
    let dir = tempfile::tempdir().unwrap();
    let c = capture(&b"hello"[..], 16, unlimited(dir.path()), "t").unwrap();
    assert_eq!(c.render(), "hello");
    assert!(!c.truncated() && !dir.path().join("out").exists());
}

#[test]
fn long_output_keeps_head_and_tail_and_spills_everything() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("out");
    let data = letters(100_000);
    let c = capture(&data[..], 1000, unlimited(dir.path()), "t").unwrap();
    assert_eq!(c.head, data[..1000]);
    assert_eq!(c.tail, data[data.len() - 1000..]);
    assert_eq!(c.total, 100_000);
    assert_eq!(std::fs::read(&path).unwrap(), data);
    let text = c.render();
    assert!(
        text.contains("98000 bytes omitted") && text.contains(path.to_str().unwrap()),
        "{}",
        &text[..1100]
    );
}

#[test]
fn output_just_over_the_cap_does_not_duplicate_bytes() {
    let dir = tempfile::tempdir().unwrap();
    let data = b"0123456789ABC";
    let c = capture(&data[..], 10, unlimited(dir.path()), "t").unwrap();
    assert_eq!(c.head, b"0123456789");
    assert_eq!(c.tail, b"ABC");
    assert_eq!(std::fs::read(dir.path().join("out")).unwrap(), data);
}

#[test]
fn a_spill_stops_at_its_limit_and_says_how_much_was_dropped() {
    let dir = tempfile::tempdir().unwrap();
    let data = letters(300_000);
    let budget = Arc::new(SpillBudget::new());
    let c = capture(
        &data[..],
        1000,
        target(dir.path(), Some(100_000), &budget),
        "t",
    )
    .unwrap();
    let path = dir.path().join("out");
    assert_eq!(std::fs::read(&path).unwrap(), data[..100_000]);
    assert_eq!(
        (c.spilled, c.cut.clone()),
        (100_000, Some(SpillCut::SpillSize(100_000)))
    );
    let text = c.render();
    assert!(
        text.contains("the other 200000 bytes were not kept: limits.spill_size is"),
        "{}",
        &text[1000..1400]
    );
    // The tail is still the end of the stream.
    assert_eq!(c.tail, data[data.len() - 1000..]);
}

#[test]
fn a_zero_spill_size_keeps_no_file() {
    let dir = tempfile::tempdir().unwrap();
    let budget = Arc::new(SpillBudget::new());
    let c = capture(
        &letters(5000)[..],
        100,
        target(dir.path(), Some(0), &budget),
        "t",
    )
    .unwrap();
    assert_eq!(c.spill, None);
    assert!(
        c.render().contains("was not kept: limits.spill_size is 0"),
        "{}",
        c.render()
    );
    assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 0);
}

#[test]
fn spills_of_one_budget_stop_at_four_times_the_spill_size() {
    let dir = tempfile::tempdir().unwrap();
    let budget = Arc::new(SpillBudget::new());
    let data = letters(30_000);
    let mut spilled = Vec::new();
    for i in 0..6 {
        let mut t = target(dir.path(), Some(10_000), &budget);
        t.name = format!("bash-{i}");
        let c = capture(&data[..], 100, t, "t").unwrap();
        spilled.push((c.spilled, c.cut));
    }
    assert_eq!(
        spilled,
        [
            (10_000, Some(SpillCut::SpillSize(10_000))),
            (10_000, Some(SpillCut::SpillSize(10_000))),
            (10_000, Some(SpillCut::SpillSize(10_000))),
            (10_000, Some(SpillCut::SpillSize(10_000))),
            (0, Some(SpillCut::SessionBudget(40_000))),
            (0, Some(SpillCut::SessionBudget(40_000))),
        ]
    );
    // A new budget for the same directory counts what is already there.
    let fresh = Arc::new(SpillBudget::new());
    let mut t = target(dir.path(), Some(10_000), &fresh);
    t.name = "bash-next".into();
    let c = capture(&data[..], 100, t, "t").unwrap();
    assert_eq!(
        (c.spill, c.cut),
        (None, Some(SpillCut::SessionBudget(40_000)))
    );
}

#[test]
fn a_planted_file_or_symlink_is_never_followed_or_reused() {
    let dir = tempfile::tempdir().unwrap();
    let victim = dir.path().join("victim");
    std::fs::write(&victim, "original").unwrap();
    let mut t = unlimited(dir.path());
    t.name = "bash-1.stdout".into();
    std::os::unix::fs::symlink(&victim, dir.path().join("bash-1.stdout")).unwrap();
    std::fs::write(dir.path().join("bash-1-1.stdout"), "planted").unwrap();
    let data = letters(5000);
    let c = capture(&data[..], 100, t, "t").unwrap();
    assert_eq!(std::fs::read_to_string(&victim).unwrap(), "original");
    let planted = dir.path().join("bash-1-1.stdout");
    assert_eq!(std::fs::read_to_string(planted).unwrap(), "planted");
    let made = dir.path().join("bash-1-2.stdout");
    assert_eq!(c.spill.as_ref(), Some(&made));
    assert_eq!(std::fs::read(&made).unwrap(), data);
    use std::os::unix::fs::PermissionsExt;
    let mode = std::fs::metadata(&made).unwrap().permissions().mode();
    assert_eq!(mode & 0o777, 0o600);
}

#[test]
fn a_spill_no_result_names_is_removed() {
    let dir = tempfile::tempdir().unwrap();
    let c = capture(&letters(5000)[..], 100, unlimited(dir.path()), "t").unwrap();
    let path = c.spill.clone().unwrap();
    c.remove_spill_unless_named(&c.render());
    assert!(path.exists());
    c.remove_spill_unless_named("something else");
    assert!(!path.exists());
}
