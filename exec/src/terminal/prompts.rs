//! The prompts bridle gives the terminal's bash, to see when what was typed has been read:
//! the main prompt once a command has finished, the continuation prompt once a line was read
//! that does not end one (a trailing `\`, an open quote or compound command, a here-document).

/// The main prompt (`PS1`), shown as `$ `.
pub const PROMPT_MARK: &str = "\u{1b}[bridle-prompt]$ ";

/// The continuation prompt (`PS2`), not shown.
pub const MORE_MARK: &str = "\u{1b}[bridle-more]";

/// Whether `bytes` end at a prompt: the shell waits for the next line.
pub(super) fn ends_at_prompt(bytes: &[u8]) -> bool {
    let text = String::from_utf8_lossy(bytes);
    let trimmed = text.trim_end_matches(['\r', '\n']);
    trimmed.ends_with(PROMPT_MARK.trim_end())
        || text.ends_with(PROMPT_MARK)
        || trimmed.ends_with(MORE_MARK)
}

/// The prompts the shell prints once it has read `input` whole: one per line ended (`\n` or
/// `\r`, as the Enter key) and per Ctrl-C, and, when a command was running as it was typed
/// (not `at_prompt`), one as that command ends, unless a Ctrl-C ends it.
pub(super) fn expected(input: &str, at_prompt: bool) -> usize {
    let lines = input.matches(['\n', '\r']).count();
    let interrupts = input.matches('\u{3}').count();
    let running = usize::from(!at_prompt && interrupts == 0 && lines > 0);
    lines + interrupts + running
}

/// Counts the prompts in output read piece by piece (a mark may be split between two pieces):
/// one per line the shell has read, when no program reads the lines instead.
#[derive(Debug, Default)]
pub(super) struct Prompts {
    /// The end of what was read, too short to hold a whole mark.
    carry: Vec<u8>,
    pub(super) count: usize,
}

impl Prompts {
    pub(super) fn feed(&mut self, piece: &[u8]) {
        let seen = self.carry.len();
        let mut bytes = std::mem::take(&mut self.carry);
        bytes.extend_from_slice(piece);
        for mark in [PROMPT_MARK.trim_end().as_bytes(), MORE_MARK.as_bytes()] {
            // A mark wholly within the carried bytes was counted with the piece before.
            self.count += bytes
                .windows(mark.len())
                .enumerate()
                .filter(|(at, w)| *w == mark && at + mark.len() > seen)
                .count();
        }
        let longest = PROMPT_MARK.len().max(MORE_MARK.len());
        let keep = bytes.len().min(longest - 1);
        self.carry = bytes[bytes.len() - keep..].to_vec();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn prompts_split_between_pieces_are_counted_once() {
        let text = format!("a{PROMPT_MARK}b{MORE_MARK}c{PROMPT_MARK}");
        for size in 1..text.len() {
            let mut prompts = Prompts::default();
            for piece in text.as_bytes().chunks(size) {
                prompts.feed(piece);
            }
            assert_eq!(prompts.count, 3, "pieces of {size}");
        }
    }

    #[test]
    fn a_prompt_is_expected_per_line_per_interrupt_and_for_a_command_still_running() {
        assert_eq!(expected("ls\n", true), 1);
        assert_eq!(expected("a\nb\r\n", true), 3);
        assert_eq!(expected("\u{3}echo a\n", true), 2);
        assert_eq!(expected("echo a\n", false), 2);
        assert_eq!(expected("\u{3}", false), 1);
        assert_eq!(expected("half a line", false), 0);
    }

    #[test]
    fn output_ends_at_either_prompt() {
        assert!(ends_at_prompt(format!("x\n{PROMPT_MARK}").as_bytes()));
        assert!(ends_at_prompt(format!("x\r\n{MORE_MARK}").as_bytes()));
        assert!(!ends_at_prompt(format!("{PROMPT_MARK}ls\r\n").as_bytes()));
    }
}
