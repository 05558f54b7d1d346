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

#[test]
fn resizing_keeps_the_top_left_and_the_cursor_inside() {
    let mut s = Screen::new(3, 6);
    s.feed(b"abcdef\r\nghi\r\njkl\x1b[3;6H");
    s.resize(2, 4);
    assert_eq!(s.text(), "abcd\nghi");
    s.feed(b"X");
    assert_eq!(s.text(), "abcd\nghiX");
    s.resize(3, 5);
    assert_eq!(s.text(), "abcd\nghiX\n");
}
