//! Unit tests of the screen model.
use super::*;

#[test]
fn cursor_moves_and_erases_build_the_screen() {
    let mut s = Screen::new(3, 10);
    s.feed(b"hello\r\nworld\x1b[1;3HXY\x1b[3;5H\xe2\x94\x82!");
    assert_eq!(s.text(), "heXYo\nworld\n    \u{2502}!");
    s.feed(b"\x1b[2;2H\x1b[K");
    assert_eq!(s.text(), "heXYo\nw\n    \u{2502}!");
    s.feed(b"\x1b[2J");
    assert_eq!(s.text(), "\n\n");
}

#[test]
fn line_feed_at_the_bottom_scrolls_and_long_lines_wrap() {
    let mut s = Screen::new(2, 4);
    s.feed(b"abcdef\r\ngh");
    assert_eq!(s.text(), "ef\ngh");
}

#[test]
fn alternate_screen_keeps_the_main_screen_and_reports_what_is_left_on() {
    let mut s = Screen::new(2, 8);
    s.feed(b"$ top\r\n");
    s.feed(b"\x1b[?1049h\x1b[?25l\x1b[H\x1b[31mTOP\x1b[0m");
    assert_eq!(s.text(), "TOP\n");
    assert!(s.alternate_screen() && s.cursor_hidden());
    assert_eq!(s.restore_sequence(), b"\x1b[?1049l\x1b[?25h\x1b[0m\r\n");
    s.feed(b"\x1b[?25h\x1b[?1049l");
    assert_eq!(s.text(), "$ top\n");
    assert!(s.restore_sequence().is_empty());
}

#[test]
fn queries_get_the_answers_a_terminal_would_type() {
    let mut s = Screen::new(5, 10);
    s.feed(b"ab\x1b[6n\x1b[c\x1b[>c\x1b[?u\x1b[3;4H\x1b[6n");
    assert_eq!(
        s.take_answers(),
        b"\x1b[1;3R\x1b[?1;2c\x1b[>0;0;0c\x1b[3;4R".to_vec()
    );
    assert!(s.take_answers().is_empty());
    assert_eq!(s.text(), "ab\n\n\n\n");
}

#[test]
fn osc_and_charset_sequences_leave_no_trace() {
    let mut s = Screen::new(1, 20);
    s.feed(b"\x1b]0;title\x07\x1b(Bok\x1b]2;t\x1b\\!");
    assert_eq!(s.text(), "ok!");
}

#[test]
fn delete_and_insert_lines_respect_the_scroll_region() {
    let mut s = Screen::new(4, 3);
    s.feed(b"a\r\nb\r\nc\r\nd\x1b[1;3r\x1b[1;1H\x1b[M");
    assert_eq!(s.text(), "b\nc\n\nd");
    s.feed(b"\x1b[2;1H\x1b[L");
    assert_eq!(s.text(), "b\n\nc\nd");
}

#[test]
fn strip_ansi_keeps_lines() {
    assert_eq!(strip_ansi(b"\x1b[1ma\x1b[0m\r\nb"), "a\nb");
    assert_eq!(render(b"x\x1b[1;1Hy", 1, 4), "y");
}

/// As xterm does, a shorter window keeps the cursor's row in view (the top rows go), and the
/// cursor stays inside; a taller one adds rows above (no scrollback is kept to bring back).
#[test]
fn resizing_keeps_the_cursor_row_and_the_cursor_inside() {
    let mut s = Screen::new(3, 6);
    s.feed(b"abcdef\r\nghi\r\njkl\x1b[3;6H");
    s.resize(2, 4);
    assert_eq!(s.text(), "ghi\njkl");
    s.feed(b"X");
    assert_eq!(s.text(), "ghi\njklX");
    s.resize(3, 5);
    assert_eq!(s.text(), "\nghi\njklX");
}

/// What ratatui draws: a box, `▸ µ ±` (ambiguous width: one cell, as ratatui counts them) and a
/// wide character (two cells), each at the column a terminal puts it. The hand-written model
/// this replaced put `x` after `表` at column 2 instead of 3.
#[test]
fn wide_ambiguous_and_box_drawing_characters_land_at_their_columns() {
    let mut s = Screen::new(3, 12);
    s.feed("\x1b[?1049h\x1b[1;1H┌──┐\x1b[1;6H5µs±1▸\x1b[6n".as_bytes());
    assert_eq!(s.take_answers(), b"\x1b[1;12R".to_vec(), "one cell each");
    s.feed("\x1b[2;1H表x\x1b[6n".as_bytes());
    assert_eq!(
        s.take_answers(),
        b"\x1b[2;4R".to_vec(),
        "表 takes two cells"
    );
    s.feed("\x1b[3;1H└──┘\x1b[3;5H\x1b[38;5;2m█\x1b[0m|".as_bytes());
    assert_eq!(s.text(), "┌──┐ 5µs±1▸\n表x\n└──┘█|");
    // Overwriting the cell after the wide character keeps it whole.
    s.feed(b"\x1b[2;4HY");
    assert_eq!(s.text().lines().nth(1), Some("表xY"));
}
