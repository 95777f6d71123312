//! The id map of root's user namespace in an escalation to full access.

/// The identity map of every id `map` (the text of a `uid_map` or `gid_map`) maps: each
/// extent's ids, as this namespace sees them, onto themselves. The host's namespace maps all;
/// a container's namespace maps fewer, and a child namespace can map no more.
pub(super) fn identity_of(map: &str) -> Result<String, String> {
    let mut out = String::new();
    for line in map.lines().filter(|l| !l.trim().is_empty()) {
        let fields: Vec<&str> = line.split_whitespace().collect();
        let (Some(first), Some(count), 3) = (fields.first(), fields.get(2), fields.len()) else {
            return Err(format!("unreadable id map line {line:?}"));
        };
        out.push_str(&format!("{first} {first} {count}\n"));
    }
    if out.is_empty() {
        return Err("the id map is empty".to_owned());
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::identity_of;

    #[test]
    fn every_id_this_namespace_maps_is_mapped_onto_itself() {
        assert_eq!(
            identity_of("         0          0 4294967295\n").unwrap(),
            "0 0 4294967295\n"
        );
        // A container's root: ids 0-65535 of its namespace, whatever they are on the host.
        assert_eq!(
            identity_of("0 100000 65536\n65536 300000 10\n").unwrap(),
            "0 0 65536\n65536 65536 10\n"
        );
        assert!(identity_of("").is_err());
        assert!(identity_of("0 0\n").is_err());
    }
}
