//! Pseudo-terminals for the terminal tool and `bridle shell`.

use std::io;
use std::os::fd::{AsFd, OwnedFd};

/// A new pseudo-terminal pair of the given size: `(master, slave)`.
pub fn open_pty(rows: u16, cols: u16) -> io::Result<(OwnedFd, OwnedFd)> {
    let size = nix::pty::Winsize {
        ws_row: rows,
        ws_col: cols,
        ws_xpixel: 0,
        ws_ypixel: 0,
    };
    let pty = nix::pty::openpty(Some(&size), None).map_err(io::Error::from)?;
    Ok((pty.master, pty.slave))
}

/// The size (rows, columns) of the terminal `fd`, when it is one.
pub fn size(fd: impl AsFd) -> Option<(u16, u16)> {
    crate::sys::terminal_size(fd.as_fd()).ok()
}

/// Sets the size of the terminal `fd`.
pub fn set_size(fd: impl AsFd, rows: u16, cols: u16) -> io::Result<()> {
    crate::sys::set_terminal_size(fd.as_fd(), rows, cols)
}

/// Puts the terminal `fd` into raw mode; returns the previous settings for [`restore`].
pub fn make_raw(fd: impl AsFd) -> io::Result<nix::sys::termios::Termios> {
    let original = nix::sys::termios::tcgetattr(fd.as_fd()).map_err(io::Error::from)?;
    let mut raw = original.clone();
    nix::sys::termios::cfmakeraw(&mut raw);
    nix::sys::termios::tcsetattr(fd.as_fd(), nix::sys::termios::SetArg::TCSANOW, &raw)
        .map_err(io::Error::from)?;
    Ok(original)
}

/// Restores settings saved by [`make_raw`].
pub fn restore(fd: impl AsFd, settings: &nix::sys::termios::Termios) -> io::Result<()> {
    nix::sys::termios::tcsetattr(fd.as_fd(), nix::sys::termios::SetArg::TCSANOW, settings)
        .map_err(io::Error::from)
}

/// Discards input typed on the terminal `fd` but not read yet, so an answer to a question is
/// typed after the question is shown, not before.
pub fn discard_input(fd: impl AsFd) -> io::Result<()> {
    nix::sys::termios::tcflush(fd.as_fd(), nix::sys::termios::FlushArg::TCIFLUSH)
        .map_err(io::Error::from)
}

/// Waits up to `timeout` for input on `fd`; returns whether there is some (or end of file).
pub fn wait_readable(fd: impl AsFd, timeout: std::time::Duration) -> io::Result<bool> {
    use nix::poll::{PollFd, PollFlags, PollTimeout, poll};
    let millis = u16::try_from(timeout.as_millis()).unwrap_or(u16::MAX);
    let mut fds = [PollFd::new(fd.as_fd(), PollFlags::POLLIN)];
    let ready = poll(&mut fds, PollTimeout::from(millis)).map_err(io::Error::from)?;
    Ok(ready > 0)
}
