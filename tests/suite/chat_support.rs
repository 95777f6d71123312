//! A real terminal for `bridle chat`: a tmux server of the test's own (its socket in the
//! test's temp dir), one window of a given size running the binary, keys sent to it, the
//! screen read back. Every wait has a deadline, and a timeout shows the screen.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use super::support::{ExecEnv, path_str};

/// How long a step may take before the test fails (the machine is shared and slow).
pub const STEP: Duration = Duration::from_secs(30);

/// A tmux server with one window running `bridle chat`; killed when dropped.
pub struct Tmux {
    socket: PathBuf,
}

impl Tmux {
    /// Starts `bridle ARGS` in a `width`x`height` window, in the workspace of `e`, with a
    /// minimal environment plus `env`. The window stays after bridle exits, showing
    /// `[bridle chat exited N]`.
    pub fn start(e: &ExecEnv, args: &[&str], env: &[(&str, &str)], size: (u16, u16)) -> Tmux {
        let socket = e
            .home
            .join(format!("tmux-{}", super::support::token("chat")));
        let mut line = format!(
            "cd {} && env -i HOME={} PATH=/usr/local/bin:/usr/bin:/bin TERM=xterm-256color LANG=C.UTF-8",
            quote(path_str(&e.workspace)),
            quote(path_str(&e.home)),
        );
        for (k, v) in env {
            line.push_str(&format!(" {k}={}", quote(v)));
        }
        line.push(' ');
        line.push_str(&quote(env!("CARGO_BIN_EXE_bridle")));
        for a in args {
            line.push(' ');
            line.push_str(&quote(a));
        }
        line.push_str("; echo \"[bridle chat exited $?]\"; sleep 600");
        let tmux = Tmux { socket };
        tmux.run(&[
            "-f",
            "/dev/null",
            "new-session",
            "-d",
            "-s",
            "chat",
            "-x",
            &size.0.to_string(),
            "-y",
            &size.1.to_string(),
            // The program and its arguments, run without a shell of the user's (bridle-ci
            // has none: its login shell is nologin).
            "/bin/sh",
            "-c",
            &line,
        ]);
        tmux
    }

    fn command(&self) -> Command {
        let mut cmd = Command::new("tmux");
        cmd.env("SHELL", "/bin/sh").arg("-S").arg(&self.socket);
        cmd
    }

    #[track_caller]
    fn run(&self, args: &[&str]) -> String {
        let out = self
            .command()
            .args(args)
            .output()
            .expect("tmux runs (is it installed?)");
        assert!(
            out.status.success(),
            "tmux {args:?}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8_lossy(&out.stdout).into_owned()
    }

    /// Types `text` (literally), then Enter.
    pub fn line(&self, text: &str) {
        self.type_text(text);
        self.key("Enter");
    }

    /// Sends one key (`C-c`, `C-d`, `Enter`).
    pub fn key(&self, key: &str) {
        self.run(&["send-keys", "-t", "chat", key]);
    }

    /// The screen and its scrollback, wrapped lines joined.
    pub fn screen(&self) -> String {
        self.run(&["capture-pane", "-p", "-J", "-t", "chat", "-S", "-500"])
    }

    /// The screen and its scrollback row by row, as the terminal shows them.
    pub fn rows(&self) -> String {
        self.run(&["capture-pane", "-p", "-t", "chat", "-S", "-500"])
    }

    /// Types `text` literally, without Enter.
    pub fn type_text(&self, text: &str) {
        self.run(&["send-keys", "-t", "chat", "-l", text]);
    }

    /// The screen with its colours and attributes as escape sequences.
    pub fn screen_with_attributes(&self) -> String {
        self.run(&["capture-pane", "-p", "-e", "-t", "chat", "-S", "-500"])
    }

    /// The pid of bridle (the only child of the window's shell), once it runs.
    #[track_caller]
    pub fn bridle_pid(&self) -> i32 {
        let shell = self.run(&["display-message", "-p", "-t", "chat", "#{pane_pid}"]);
        let shell = shell.trim();
        let mut found = None;
        super::support::wait_until(STEP, || {
            found = std::fs::read_to_string(format!("/proc/{shell}/task/{shell}/children"))
                .ok()
                .and_then(|c| c.split_whitespace().next().and_then(|p| p.parse().ok()));
            found.is_some()
        });
        found.expect("bridle runs in the window")
    }

    /// The window's size now.
    pub fn size(&self) -> (u16, u16) {
        let out = self.run(&[
            "display-message",
            "-p",
            "-t",
            "chat",
            "#{window_width} #{window_height}",
        ]);
        let mut it = out.split_whitespace().map(|n| n.parse().unwrap());
        (it.next().unwrap(), it.next().unwrap())
    }

    /// Resizes the window (the program gets SIGWINCH).
    pub fn resize(&self, width: u16, height: u16) {
        self.run(&[
            "resize-window",
            "-t",
            "chat",
            "-x",
            &width.to_string(),
            "-y",
            &height.to_string(),
        ]);
    }

    /// Waits until the screen shows `text` `count` times or more; fails with the screen when
    /// [`STEP`] passes first.
    #[track_caller]
    pub fn wait_for_n(&self, text: &str, count: usize) -> String {
        let start = Instant::now();
        loop {
            let screen = self.screen();
            if screen.matches(text).count() >= count {
                return screen;
            }
            assert!(
                start.elapsed() < STEP,
                "timed out waiting for {text:?} (x{count}); the screen:\n{screen}"
            );
            std::thread::sleep(Duration::from_millis(100));
        }
    }

    /// [`Tmux::wait_for_n`] once.
    #[track_caller]
    pub fn wait_for(&self, text: &str) -> String {
        self.wait_for_n(text, 1)
    }

    /// Waits for bridle to exit; returns its status.
    #[track_caller]
    pub fn exit_status(&self) -> i32 {
        const EXITED: &str = "[bridle chat exited ";
        let screen = self.wait_for(EXITED);
        let tail = &screen[screen.rfind(EXITED).unwrap() + EXITED.len()..];
        let digits: String = tail.chars().take_while(char::is_ascii_digit).collect();
        digits
            .parse()
            .unwrap_or_else(|_| panic!("no exit status on the screen:\n{screen}"))
    }
}

impl Drop for Tmux {
    fn drop(&mut self) {
        let _ = self.command().arg("kill-server").output();
        let _ = std::fs::remove_file(&self.socket);
    }
}

/// `s` quoted for sh.
fn quote(s: &str) -> String {
    format!("'{}'", s.replace('\'', "'\\''"))
}

/// `bridle chat` arguments for a scripted model (`script` written to the home), the sessions
/// in the home.
pub fn chat_args(e: &ExecEnv, script: &str, extra: &[&str]) -> Vec<String> {
    let file = e.home.join("script.yaml");
    std::fs::write(&file, script).unwrap();
    let mut args: Vec<String> = extra.iter().map(|s| (*s).to_owned()).collect();
    args.extend([
        "chat".to_owned(),
        "--model".to_owned(),
        format!("script:{}", path_str(&file)),
        "--session-dir".to_owned(),
        path_str(&sessions(e)).to_owned(),
    ]);
    args
}

/// Where the chats' sessions are.
pub fn sessions(e: &ExecEnv) -> PathBuf {
    e.home.join("sessions")
}

/// The events of the only session in `dir`, as `bridle log export` prints them.
pub fn exported_events(e: &ExecEnv, dir: &Path) -> Vec<serde_json::Value> {
    let out = e
        .bridle()
        .args(["log", "export", "last", "--session-dir"])
        .arg(dir)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect()
}
