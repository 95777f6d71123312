//! Applying one layer onto the policy below it ([`Applier`]): key by key, with the combine rules
//! of [`super`], and what a workspace layer may not loosen.

use serde_saphyr::{Location, Spanned};

use super::rules::{compile_command_rule, compile_path_rule};
use super::{Applier, Direction, check_path_entry};
use crate::error::PolicyError;
use crate::glob::Glob;
use crate::origin::Sourced;
use crate::policy::Policy;
use crate::raw::{ListOp, RawProfile};
use crate::units::Limit;
use crate::vocab::Decision;

impl Applier<'_> {
    pub(super) fn apply(&self, policy: &mut Policy, raw: RawProfile) -> Result<(), PolicyError> {
        if let Some(extends) = &raw.extends
            && self.tighten_only()
        {
            return Err(self.widens(
                &extends.referenced,
                "extends",
                "it could pull in any profile",
            ));
        }
        if let Some(d) = raw.description {
            policy.description = Some(Sourced::new(d.value, self.at(&d.referenced)));
        }
        if let Some(abi) = raw.tested_kernel_abi {
            policy.tested_kernel_abi = Some(Sourced::new(abi.value, self.at(&abi.referenced)));
        }
        self.scalar(&mut policy.mode, raw.mode, "mode")?;
        self.scalar(&mut policy.approval, raw.approval, "approval")?;
        self.network(policy, raw.network)?;
        self.scalar(&mut policy.unix_sockets, raw.unix_sockets, "unix_sockets")?;
        if let Some(flag) = raw.allow_dangerous_workspace_root {
            if self.tighten_only() && flag.value && !policy.allow_dangerous_workspace_root.value {
                return Err(self.widens(
                    &flag.referenced,
                    "allow_dangerous_workspace_root",
                    "it allows `/` or `$HOME` as a workspace",
                ));
            }
            policy.allow_dangerous_workspace_root =
                Sourced::new(flag.value, self.at(&flag.referenced));
        }
        self.paths(
            &mut policy.readable_roots,
            raw.readable_roots,
            "readable_roots",
            Direction::ShrinkOnly,
        )?;
        self.paths(
            &mut policy.writable_roots,
            raw.writable_roots,
            "writable_roots",
            Direction::ShrinkOnly,
        )?;
        self.paths(
            &mut policy.protected_paths,
            raw.protected_paths,
            "protected_paths",
            Direction::GrowOnly,
        )?;
        self.paths(
            &mut policy.masked_paths,
            raw.masked_paths,
            "masked_paths",
            Direction::GrowOnly,
        )?;
        if let Some(limits) = raw.limits {
            let l = &mut policy.limits;
            self.limit(
                &mut l.processes,
                limits.processes.map(|s| map_spanned(s, |c| c.0)),
                "limits.processes",
            )?;
            self.limit(
                &mut l.memory,
                limits.memory.map(|s| map_spanned(s, |c| c.0)),
                "limits.memory",
            )?;
            self.limit(
                &mut l.file_size,
                limits.file_size.map(|s| map_spanned(s, |c| c.0)),
                "limits.file_size",
            )?;
            self.limit(
                &mut l.open_files,
                limits.open_files.map(|s| map_spanned(s, |c| c.0)),
                "limits.open_files",
            )?;
            self.limit(
                &mut l.cpu_time,
                limits.cpu_time.map(|s| map_spanned(s, |c| c.0)),
                "limits.cpu_time",
            )?;
            self.limit(
                &mut l.wall_time,
                limits.wall_time.map(|s| map_spanned(s, |c| c.0)),
                "limits.wall_time",
            )?;
            self.limit(
                &mut l.command_timeout,
                limits.command_timeout.map(|s| map_spanned(s, |c| c.0)),
                "limits.command_timeout",
            )?;
            self.limit(
                &mut l.command_timeout_max,
                limits.command_timeout_max.map(|s| map_spanned(s, |c| c.0)),
                "limits.command_timeout_max",
            )?;
            self.limit(
                &mut l.spill_size,
                limits.spill_size.map(|s| map_spanned(s, |c| c.0)),
                "limits.spill_size",
            )?;
        }
        if let Some(env) = raw.environment {
            let e = &mut policy.environment;
            if let Some(inherit) = env.inherit {
                if self.tighten_only() && inherit.value > e.inherit.value {
                    return Err(self.widens(
                        &inherit.referenced,
                        "environment.inherit",
                        "it passes every variable",
                    ));
                }
                e.inherit = Sourced::new(inherit.value, self.at(&inherit.referenced));
            }
            self.names(
                &mut e.allow,
                env.allow,
                "environment.allow",
                Direction::ShrinkOnly,
            )?;
            self.names(
                &mut e.scrub,
                env.scrub,
                "environment.scrub",
                Direction::GrowOnly,
            )?;
            for (name, value) in env.set.unwrap_or_default() {
                if self.tighten_only() {
                    return Err(self.widens(
                        &value.referenced,
                        &format!("environment.set.{name}"),
                        "it injects a variable into every command",
                    ));
                }
                if name.is_empty() || name.contains('=') || name.contains('\0') {
                    return Err(self.invalid(
                        &value.referenced,
                        "environment.set",
                        format!("`{}` is not a variable name", name.escape_debug()),
                    ));
                }
                e.set
                    .insert(name, Sourced::new(value.value, self.at(&value.referenced)));
            }
        }
        if let Some(cache) = raw.cache_home {
            self.scalar(&mut policy.cache_home.mode, cache.mode, "cache_home.mode")?;
            self.paths(
                &mut policy.cache_home.paths,
                cache.paths,
                "cache_home.paths",
                Direction::ShrinkOnly,
            )?;
        }
        if let Some(op) = raw.accept_missing {
            self.list(
                &mut policy.accept_missing,
                op,
                "accept_missing",
                Direction::ShrinkOnly,
                |g| g.code().to_owned(),
                |_, _| Ok(()),
            )?;
        }
        self.agent(&mut policy.agent, raw.agent)?;
        if let Some(rules) = raw.rules {
            if let Some(op) = rules.commands {
                self.rules(
                    &mut policy.command_rules,
                    op,
                    "rules.commands",
                    |r| r.id.clone(),
                    |r| r.decision,
                    compile_command_rule,
                )?;
            }
            if let Some(op) = rules.paths {
                self.rules(
                    &mut policy.path_rules,
                    op,
                    "rules.paths",
                    |r| r.id.clone(),
                    |r| r.decision,
                    compile_path_rule,
                )?;
            }
        }
        Ok(())
    }

    pub(crate) fn scalar<T: Ord + Copy + std::fmt::Display>(
        &self,
        slot: &mut Sourced<T>,
        new: Option<Spanned<T>>,
        key: &str,
    ) -> Result<(), PolicyError> {
        let Some(new) = new else { return Ok(()) };
        if self.tighten_only() && new.value > slot.value {
            return Err(self.widens(
                &new.referenced,
                key,
                format!(
                    "`{}` is wider than `{}` set at {}",
                    new.value, slot.value, slot.origin
                ),
            ));
        }
        *slot = Sourced::new(new.value, self.at(&new.referenced));
        Ok(())
    }

    pub(super) fn limit(
        &self,
        slot: &mut Sourced<Limit>,
        new: Option<Spanned<Limit>>,
        key: &str,
    ) -> Result<(), PolicyError> {
        let Some(new) = new else { return Ok(()) };
        let looser = match (new.value, slot.value) {
            (_, None) => false,
            (None, Some(_)) => true,
            (Some(a), Some(b)) => a > b,
        };
        if self.tighten_only() && looser {
            return Err(self.widens(
                &new.referenced,
                key,
                format!("it raises the limit set at {}", slot.origin),
            ));
        }
        *slot = Sourced::new(new.value, self.at(&new.referenced));
        Ok(())
    }

    pub(super) fn paths(
        &self,
        list: &mut Vec<Sourced<String>>,
        op: Option<ListOp<String>>,
        key: &str,
        dir: Direction,
    ) -> Result<(), PolicyError> {
        let Some(op) = op else { return Ok(()) };
        self.list(list, op, key, dir, Clone::clone, |entry, loc| {
            check_path_entry(entry).map_err(|m| self.invalid(loc, key, m))
        })
    }

    pub(super) fn names(
        &self,
        list: &mut Vec<Sourced<String>>,
        op: Option<ListOp<String>>,
        key: &str,
        dir: Direction,
    ) -> Result<(), PolicyError> {
        let Some(op) = op else { return Ok(()) };
        self.list(list, op, key, dir, Clone::clone, |entry, loc| {
            Glob::new(entry)
                .map(drop)
                .map_err(|m| self.invalid(loc, key, m))?;
            if entry.is_empty() || entry.contains('=') {
                return Err(self.invalid(
                    loc,
                    key,
                    format!("`{entry}` is not a variable name pattern"),
                ));
            }
            Ok(())
        })
    }

    /// The generic list combine for plain values, compared by `key_of`.
    pub(crate) fn list<T: Clone>(
        &self,
        list: &mut Vec<Sourced<T>>,
        op: ListOp<T>,
        key: &str,
        dir: Direction,
        key_of: impl Fn(&T) -> String,
        check: impl Fn(&T, &Location) -> Result<(), PolicyError>,
    ) -> Result<(), PolicyError> {
        self.check_direction(&op, key, dir)?;
        if let Some(replace) = op.replace {
            list.clear();
            for item in replace.value {
                check(&item.value, &item.referenced)?;
                if !list.iter().any(|e| key_of(&e.value) == key_of(&item.value)) {
                    list.push(Sourced::new(item.value, self.at(&item.referenced)));
                }
            }
            return Ok(());
        }
        for removed in &op.remove {
            let before = list.len();
            list.retain(|e| key_of(&e.value) != removed.value);
            if list.len() == before {
                return Err(self.invalid(
                    &removed.referenced,
                    key,
                    format!("cannot remove `{}`: it is not in the list", removed.value),
                ));
            }
        }
        for item in op.append {
            check(&item.value, &item.referenced)?;
            if !list.iter().any(|e| key_of(&e.value) == key_of(&item.value)) {
                list.push(Sourced::new(item.value, self.at(&item.referenced)));
            }
        }
        Ok(())
    }

    pub(super) fn check_direction<T>(
        &self,
        op: &ListOp<T>,
        key: &str,
        dir: Direction,
    ) -> Result<(), PolicyError> {
        if !self.tighten_only() {
            return Ok(());
        }
        if let Some(replace) = &op.replace {
            return Err(self.widens(
                &replace.referenced,
                &format!("{key}.replace"),
                "replacing could drop entries that protect you",
            ));
        }
        match dir {
            Direction::ShrinkOnly => {
                if let Some(item) = op.append.first() {
                    return Err(self.widens(
                        &item.referenced,
                        key,
                        "adding entries here grants more access",
                    ));
                }
            }
            Direction::GrowOnly => {
                if let Some(item) = op.remove.first() {
                    return Err(self.widens(
                        &item.referenced,
                        &format!("{key}.remove"),
                        "removing entries here grants more access",
                    ));
                }
            }
        }
        Ok(())
    }

    /// The list combine for rules: appended ids must be new; removal is by id.
    pub(super) fn rules<R, Raw>(
        &self,
        list: &mut Vec<R>,
        op: ListOp<Raw>,
        key: &str,
        id_of: impl Fn(&R) -> String,
        decision_of: impl Fn(&R) -> Decision,
        compile: impl Fn(&Self, Raw, &str) -> Result<R, PolicyError>,
    ) -> Result<(), PolicyError> {
        self.check_direction(&op, key, Direction::GrowOnly)?;
        let push = |list: &mut Vec<R>, raw: Spanned<Raw>| -> Result<(), PolicyError> {
            let rule = compile(self, raw.value, key)?;
            let id = id_of(&rule);
            if list.iter().any(|r| id_of(r) == id) {
                return Err(self.invalid(
                    &raw.referenced,
                    key,
                    format!("rule id `{id}` is already defined; remove it first to redefine it"),
                ));
            }
            if self.tighten_only() && decision_of(&rule) == Decision::Allow {
                return Err(self.widens(
                    &raw.referenced,
                    &format!("{key}[{id}]"),
                    "an `allow` rule skips approval",
                ));
            }
            list.push(rule);
            Ok(())
        };
        if let Some(replace) = op.replace {
            list.clear();
            for raw in replace.value {
                push(list, raw)?;
            }
            return Ok(());
        }
        for removed in &op.remove {
            let before = list.len();
            list.retain(|r| id_of(r) != removed.value);
            if list.len() == before {
                return Err(self.invalid(
                    &removed.referenced,
                    key,
                    format!(
                        "cannot remove rule `{}`: no rule has that id",
                        removed.value
                    ),
                ));
            }
        }
        for raw in op.append {
            push(list, raw)?;
        }
        Ok(())
    }
}

pub(super) fn map_spanned<A, B>(s: Spanned<A>, f: impl FnOnce(A) -> B) -> Spanned<B> {
    Spanned {
        value: f(s.value),
        referenced: s.referenced,
        defined: s.defined,
    }
}
