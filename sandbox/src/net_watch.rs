//! Counting a confined command's attempts to reach the network directly, while it is off or
//! an allow-list (whose relay is on loopback: what goes through the proxy is not counted).
//!
//! The sandbox's network namespace has only loopback, so a connection or datagram to anything
//! else fails at once with `ENETUNREACH`, and the kernel counts it as `OutNoRoutes` in that
//! namespace's `/proc/net/snmp` (IPv4) and `Ip6OutNoRoutes` in `/proc/net/snmp6`. A DNS query
//! to a resolver on the host's loopback (`127.0.0.53`) reaches the sandbox's own loopback,
//! where nothing listens: the kernel counts it as UDP `NoPorts` (`Udp6NoPorts`). The parent
//! opens both files through the launcher's `/proc/PID/net` once the launcher is in the new
//! namespace; an open file keeps its namespace, so the counters can be read after the run ended.
//! This is what the kernel saw, not a guess from the command's error messages.

use std::io::{Read, Seek, SeekFrom};

/// Open handles on one sandbox's network counters.
#[derive(Debug)]
pub struct NetWatch {
    snmp: std::fs::File,
    snmp6: Option<std::fs::File>,
    baseline: u64,
}

impl NetWatch {
    /// Watches the network namespace of process `pid` (the launcher, already in the sandbox's
    /// namespace). `None` when its counters cannot be read.
    pub(crate) fn open(pid: i32) -> Option<NetWatch> {
        let snmp = std::fs::File::open(format!("/proc/{pid}/net/snmp")).ok()?;
        let snmp6 = std::fs::File::open(format!("/proc/{pid}/net/snmp6")).ok();
        let mut watch = NetWatch {
            snmp,
            snmp6,
            baseline: 0,
        };
        watch.baseline = watch.read_total()?;
        Some(watch)
    }

    /// How many times a process of the sandbox tried to send to (or connect to) an address
    /// outside it since the watch was opened. `None` when the counters cannot be read.
    pub fn attempts(&mut self) -> Option<u64> {
        Some(self.read_total()?.saturating_sub(self.baseline))
    }

    fn read_total(&mut self) -> Option<u64> {
        let snmp = read_again(&mut self.snmp)?;
        let v4 = ipv4_no_routes(&snmp)?;
        let dns4 = snmp_value(&snmp, "Udp: ", "NoPorts").unwrap_or(0);
        let v6 = match &mut self.snmp6 {
            Some(file) => {
                let snmp6 = read_again(file)?;
                let no_routes = ipv6_no_routes(&snmp6).unwrap_or(0);
                no_routes.saturating_add(snmp6_value(&snmp6, "Udp6NoPorts").unwrap_or(0))
            }
            None => 0,
        };
        Some(v4.saturating_add(dns4).saturating_add(v6))
    }
}

fn read_again(file: &mut std::fs::File) -> Option<String> {
    file.seek(SeekFrom::Start(0)).ok()?;
    let mut text = String::new();
    file.read_to_string(&mut text).ok()?;
    Some(text)
}

/// `OutNoRoutes` of the `Ip:` header/value line pair of `/proc/net/snmp`.
fn ipv4_no_routes(snmp: &str) -> Option<u64> {
    snmp_value(snmp, "Ip: ", "OutNoRoutes")
}

/// The field `name` of the `prefix` header/value line pair of `/proc/net/snmp`.
fn snmp_value(snmp: &str, prefix: &str, name: &str) -> Option<u64> {
    let mut pair = snmp.lines().filter(|l| l.starts_with(prefix));
    let names = pair.next()?.split_whitespace();
    let values = pair.next()?.split_whitespace();
    names
        .zip(values)
        .find(|(field, _)| *field == name)
        .and_then(|(_, value)| value.parse().ok())
}

/// `Ip6OutNoRoutes` of `/proc/net/snmp6` (one `name value` pair per line).
fn ipv6_no_routes(snmp6: &str) -> Option<u64> {
    snmp6_value(snmp6, "Ip6OutNoRoutes")
}

/// The field `name` of `/proc/net/snmp6`.
fn snmp6_value(snmp6: &str, name: &str) -> Option<u64> {
    snmp6.lines().find_map(|line| {
        let mut parts = line.split_whitespace();
        (parts.next()? == name).then(|| parts.next()?.parse().ok())?
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counters_are_read_from_the_kernel_formats() {
        let snmp = "Ip: Forwarding DefaultTTL InReceives OutNoRoutes ReasmTimeout\n\
                    Ip: 2 64 0 3 0\n\
                    Icmp: InMsgs\nIcmp: 0\n";
        assert_eq!(ipv4_no_routes(snmp), Some(3));
        assert_eq!(ipv4_no_routes("Icmp: InMsgs\nIcmp: 0\n"), None);
        let snmp6 = "Ip6InReceives                   \t0\nIp6OutNoRoutes                  \t7\n";
        assert_eq!(ipv6_no_routes(snmp6), Some(7));
        let udp = "Udp: InDatagrams NoPorts InErrors\nUdp: 5 2 0\n";
        assert_eq!(snmp_value(udp, "Udp: ", "NoPorts"), Some(2));
        assert_eq!(snmp6_value("Udp6NoPorts \t4\n", "Udp6NoPorts"), Some(4));
    }
}
