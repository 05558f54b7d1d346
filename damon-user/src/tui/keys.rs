//! Key bindings: one table that both the key handler and the help overlay read, so the help
//! cannot drift from what the keys do.
use ratatui::crossterm::event::{KeyCode, KeyEvent, KeyEventKind, KeyModifiers};

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Action {
    Next,
    Previous,
    Focus,
    Back,
    ToggleScale,
    ToggleZoom,
    WiderBuckets,
    NarrowerBuckets,
    ToggleWindow,
    ToggleCorrected,
    ToggleHeatmap,
    Freeze,
    Reset,
    SlowCalls,
    SlowOrder,
    Save,
    Help,
    Quit,
}

/// (keys as shown, what they do, the action), in the order the help overlay lists them.
pub const BINDINGS: &[(&str, &str, Action)] = &[
    ("Tab ↓ →  j", "select the next function", Action::Next),
    (
        "S-Tab ↑ ← k",
        "select the previous function",
        Action::Previous,
    ),
    ("Enter", "focus the selected function", Action::Focus),
    ("Esc", "back to all functions; close help", Action::Back),
    (
        "l",
        "linear / log2 bins (auto until pressed)",
        Action::ToggleScale,
    ),
    (
        "z",
        "zoom to the range holding 99 % of calls",
        Action::ToggleZoom,
    ),
    ("+ =", "wider linear buckets", Action::WiderBuckets),
    ("-", "narrower linear buckets", Action::NarrowerBuckets),
    (
        "w",
        "window: since start / last N seconds",
        Action::ToggleWindow,
    ),
    (
        "c",
        "raw / corrected latencies (− probe floor)",
        Action::ToggleCorrected,
    ),
    (
        "h",
        "histogram / heatmap (latency over time)",
        Action::ToggleHeatmap,
    ),
    (
        "f",
        "freeze the display (collection goes on)",
        Action::Freeze,
    ),
    ("r", "reset statistics", Action::Reset),
    (
        "x   o",
        "slow calls; o: slowest/newest first",
        Action::SlowCalls,
    ),
    ("s", "save a capture of everything so far", Action::Save),
    ("?", "this help", Action::Help),
    ("q  Ctrl-C", "quit", Action::Quit),
];

/// The action bound to a key press, if any (releases and repeats of other kinds are ignored).
pub fn action_for(key: KeyEvent) -> Option<Action> {
    if key.kind == KeyEventKind::Release {
        return None;
    }
    let ctrl = key.modifiers.contains(KeyModifiers::CONTROL);
    Some(match key.code {
        KeyCode::Char('c') if ctrl => Action::Quit,
        _ if ctrl => return None,
        KeyCode::Tab | KeyCode::Down | KeyCode::Right | KeyCode::Char('j') => Action::Next,
        KeyCode::BackTab | KeyCode::Up | KeyCode::Left | KeyCode::Char('k') => Action::Previous,
        KeyCode::Enter => Action::Focus,
        KeyCode::Esc => Action::Back,
        KeyCode::Char('l') => Action::ToggleScale,
        KeyCode::Char('z') => Action::ToggleZoom,
        KeyCode::Char('+' | '=') => Action::WiderBuckets,
        KeyCode::Char('-') => Action::NarrowerBuckets,
        KeyCode::Char('w') => Action::ToggleWindow,
        KeyCode::Char('c') => Action::ToggleCorrected,
        KeyCode::Char('h') => Action::ToggleHeatmap,
        KeyCode::Char('f') => Action::Freeze,
        KeyCode::Char('r') => Action::Reset,
        KeyCode::Char('x') => Action::SlowCalls,
        KeyCode::Char('o') => Action::SlowOrder,
        KeyCode::Char('s') => Action::Save,
        KeyCode::Char('?') => Action::Help,
        KeyCode::Char('q') => Action::Quit,
        _ => return None,
    })
}

/// Bucket widths offered by `+`/`-`: 1-2-5 steps from 1 ns to 10 s.
pub fn wider(width_ns: u64) -> u64 {
    steps().find(|&s| s > width_ns).unwrap_or(width_ns)
}

pub fn narrower(width_ns: u64) -> u64 {
    steps()
        .take_while(|&s| s < width_ns)
        .last()
        .unwrap_or(width_ns)
}

fn steps() -> impl Iterator<Item = u64> {
    (0..=9u32)
        .flat_map(|e| [1, 2, 5].map(|m| m * 10u64.pow(e)))
        .chain([10_000_000_000])
}

#[cfg(test)]
mod tests {
    use super::*;

    fn key(code: KeyCode) -> KeyEvent {
        KeyEvent::new(code, KeyModifiers::NONE)
    }

    #[test]
    fn every_action_is_bound_and_documented() {
        for &(_, _, action) in BINDINGS {
            let bound = [
                KeyCode::Tab,
                KeyCode::BackTab,
                KeyCode::Enter,
                KeyCode::Esc,
                KeyCode::Char('l'),
                KeyCode::Char('z'),
                KeyCode::Char('+'),
                KeyCode::Char('-'),
                KeyCode::Char('w'),
                KeyCode::Char('c'),
                KeyCode::Char('h'),
                KeyCode::Char('f'),
                KeyCode::Char('r'),
                KeyCode::Char('x'),
                KeyCode::Char('o'),
                KeyCode::Char('s'),
                KeyCode::Char('?'),
                KeyCode::Char('q'),
            ]
            .into_iter()
            .any(|c| action_for(key(c)) == Some(action));
            assert!(bound, "{action:?} is documented but no key does it");
        }
        assert_eq!(BINDINGS.len(), 17, "one line per action (o shares x's)");
        assert_eq!(action_for(key(KeyCode::Char('o'))), Some(Action::SlowOrder));
    }

    #[test]
    fn ctrl_c_quits_and_other_chords_do_nothing() {
        let ctrl = |c| KeyEvent::new(KeyCode::Char(c), KeyModifiers::CONTROL);
        assert_eq!(action_for(ctrl('c')), Some(Action::Quit));
        assert_eq!(action_for(ctrl('q')), None);
        let mut release = key(KeyCode::Char('q'));
        release.kind = KeyEventKind::Release;
        assert_eq!(action_for(release), None);
        assert_eq!(action_for(key(KeyCode::Char('y'))), None);
    }

    #[test]
    fn bucket_widths_step_1_2_5() {
        assert_eq!(wider(20), 50);
        assert_eq!(wider(50), 100);
        assert_eq!(narrower(20), 10);
        assert_eq!(narrower(1), 1);
        assert_eq!(wider(30), 50, "off-series widths join the series");
        assert_eq!(narrower(30), 20);
        assert_eq!(wider(10_000_000_000), 10_000_000_000);
        assert_eq!(wider(5_000_000_000), 10_000_000_000);
    }
}
