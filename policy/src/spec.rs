//! The plain-data output of planning: what the sandbox must enforce for one session.

use std::collections::BTreeMap;
use std::path::PathBuf;

use serde::{Deserialize, Serialize};

use crate::rules::ExecRules;
use crate::vocab::{Guarantee, Network, SandboxMode, UnixSockets};

/// Which seccomp filter the launcher installs. The filter contents live in the `sandbox` crate;
/// the policy only names which one applies.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum SeccompProfile {
    /// No filter (danger-full-access).
    None,
    /// Deny privilege, namespace, tracing, kernel-interface and terminal-injection syscalls.
    Confined,
    /// `confined`, plus deny every socket family except unix.
    ConfinedNoNetwork,
    /// `confined-no-network`, except that inet sockets stay allowed: the sandbox's network
    /// namespace has only loopback, where the relay to bridle's proxy listens.
    ConfinedAllowList,
    /// For a call escalated to `danger-full-access` from a confined session: deny only what
    /// would undo or reach around its mount view (the mount family, `open_by_handle_at`,
    /// `setns`, kernel modules, kexec); everything else is allowed.
    MountLock,
}

/// Resource limits; `None` means unlimited.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct ResourceLimits {
    /// RLIMIT_NPROC.
    pub processes: Option<u64>,
    /// RLIMIT_DATA in bytes: a process's private writable memory (heap, private writable
    /// mappings), not address space reserved without access nor shared memory.
    pub memory_bytes: Option<u64>,
    /// RLIMIT_FSIZE in bytes.
    pub file_size_bytes: Option<u64>,
    /// RLIMIT_NOFILE.
    pub open_files: Option<u64>,
    /// RLIMIT_CPU in seconds.
    pub cpu_time_secs: Option<u64>,
    /// Wall-clock limit for one sandboxed command, in seconds.
    pub wall_time_secs: Option<u64>,
    /// Default per-call timeout of tool commands, in seconds.
    pub command_timeout_secs: Option<u64>,
    /// Largest per-call timeout a tool call may request, in seconds.
    pub command_timeout_max_secs: Option<u64>,
    /// Most bytes of one output spill file of a tool call (not a kernel limit: bridle writes
    /// spill files itself and stops at this size); a session's spill files together hold at
    /// most [`SESSION_SPILL_MULTIPLE`] times this.
    pub spill_size_bytes: Option<u64>,
}

/// How many times `limits.spill_size` all spill files of one session may hold together.
pub const SESSION_SPILL_MULTIPLE: u64 = 4;

/// The default `limits.spill_size`: 64 MiB.
pub const DEFAULT_SPILL_SIZE: u64 = 64 << 20;

impl ResourceLimits {
    /// The most bytes all spill files of one session may hold together (`None`: unlimited).
    pub fn session_spill_budget(&self) -> Option<u64> {
        self.spill_size_bytes
            .map(|size| size.saturating_mul(SESSION_SPILL_MULTIPLE))
    }
}

impl ResourceLimits {
    /// Whether any limit that the kernel enforces (rlimits, wall time) is set.
    pub fn any_os_limit(&self) -> bool {
        [
            self.processes,
            self.memory_bytes,
            self.file_size_bytes,
            self.open_files,
            self.cpu_time_secs,
            self.wall_time_secs,
        ]
        .iter()
        .any(Option::is_some)
    }
}

/// Writable cache directories for tools (`cache_home: per-workspace`): each path is an overlay
/// whose lower layer is the host's directory (read-only, never written) and whose changes are
/// kept in `dir`, one directory per workspace, outside every writable root.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct CacheHomeSpec {
    /// Where this workspace's cache changes live on the host.
    pub dir: PathBuf,
    /// The cache directories (absolute, `~` expanded), sorted.
    pub paths: Vec<PathBuf>,
}

/// What the sandbox must enforce for one session. Plain data: serialisable, comparable,
/// deterministic for the same inputs. All paths are absolute and lexically normalised.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SandboxSpec {
    /// The sandbox mode.
    pub mode: SandboxMode,
    /// The canonical workspace root.
    pub workspace: PathBuf,
    /// Guarantees that must hold (sorted, spec order). Any of them missing on the host is a
    /// refusal, unless listed in `accept_missing`.
    pub guarantees: Vec<Guarantee>,
    /// Guarantees the deployer accepts as missing (recorded and printed, never the default).
    pub accept_missing: Vec<Guarantee>,
    /// Roots readable from inside the sandbox.
    pub readable_roots: Vec<PathBuf>,
    /// Roots writable from inside the sandbox (workspace, extra roots, temp dir, `/dev/null`).
    pub writable_roots: Vec<PathBuf>,
    /// Paths inside writable roots that stay read-only (whether or not they exist yet).
    pub protected_paths: Vec<PathBuf>,
    /// Paths inside writable roots that do not exist and must not come into existence during
    /// the run: git metadata files (`commondir`, `config`, `config.worktree`) of git dirs found
    /// on disk, which would redirect or configure git. A missing file cannot be bound
    /// read-only, and a placeholder directory would break git, so the sandbox watches them.
    #[serde(default)]
    pub must_stay_absent: Vec<PathBuf>,
    /// Paths that are unreadable.
    pub masked_paths: Vec<PathBuf>,
    /// The masked paths that another run may remove at any moment (its session directories,
    /// which the registry lists): once one is gone nothing is left to hide, so the sandbox
    /// passes over the mounts kept only for it when they are gone too, instead of failing.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub masks_may_vanish: Vec<PathBuf>,
    /// Network setting.
    pub network: Network,
    /// With network `allow-list`: what the proxy decides by, and where the relay listens.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub allow_list: Option<crate::network::AllowListSpec>,
    /// Whether confined commands may create unix sockets.
    pub unix_sockets: UnixSockets,
    /// Which seccomp filter applies.
    pub seccomp: SeccompProfile,
    /// Resource limits.
    pub limits: ResourceLimits,
    /// The exact environment the command gets.
    pub env: BTreeMap<String, String>,
    /// The session's private temp directory on the host (exported as `TMPDIR`).
    pub temp_dir: PathBuf,
    /// Whether `/tmp` and `/dev/shm` inside the sandbox are private.
    pub private_tmp: bool,
    /// Writable cache directories, when the policy has them and the mode allows writes.
    #[serde(default)]
    pub cache_home: Option<CacheHomeSpec>,
    /// The command rules the exec supervisor checks at every exec of every process in the
    /// sandbox; `None` when the policy has none (then no supervisor runs).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub exec_rules: Option<ExecRules>,
    /// `danger-full-access` for one call escalated from a confined session: full access except
    /// that the protected paths stay read-only and bridle's own directories stay hidden (a mount
    /// view that keeps them, in a PID namespace). `writable_roots` then names the roots whose
    /// repositories are protected and inspected, not the only places the command may write.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub protected_kept: bool,
}
