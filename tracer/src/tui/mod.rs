//! `utrace tui`: the call graph, report and info of a data directory in an interactive
//! terminal view (ratatui). [`model`] holds the state and the keys; this file draws it and
//! runs the terminal.

pub mod model;
pub mod tree;

use model::{App, Key, Mode, HELP};
use ratatui::crossterm::event::{self, Event, KeyCode, KeyEventKind, KeyModifiers};
use ratatui::layout::{Constraint, Layout, Rect};
use ratatui::style::{Modifier, Style};
use ratatui::text::Line;
use ratatui::widgets::{Block, Borders, Clear, Paragraph};
use ratatui::Frame;

/// Draws the whole screen and tells `app` how many rows its body has.
fn draw(f: &mut Frame, app: &mut App) {
    let [body, status] =
        Layout::vertical([Constraint::Min(2), Constraint::Length(1)]).areas(f.area());
    app.height = body.height.saturating_sub(1) as usize;
    app.scroll();
    let reversed = Style::default().add_modifier(Modifier::REVERSED);
    let mut lines: Vec<Line> = Vec::new();
    match app.mode {
        Mode::Graph => {
            lines.push(
                Line::from(tree::Tree::header(&app.fields))
                    .style(Style::default().add_modifier(Modifier::BOLD)),
            );
            for (k, &i) in app
                .visible
                .iter()
                .enumerate()
                .skip(app.top)
                .take(app.height)
            {
                let line = Line::from(app.tree.line(i, &app.fields));
                lines.push(if k == app.cursor {
                    line.style(reversed)
                } else {
                    line
                });
            }
        }
        Mode::Report => {
            lines.push(
                Line::from(app.report_header())
                    .style(Style::default().add_modifier(Modifier::BOLD)),
            );
            for r in (app.report_top..app.rows.len()).take(app.height) {
                let line = Line::from(app.report_line(r));
                lines.push(if r == app.report_cursor {
                    line.style(reversed)
                } else {
                    line
                });
            }
        }
        Mode::Info => {
            for l in app.info.iter().skip(app.info_top).take(app.height + 1) {
                lines.push(Line::from(l.as_str()));
            }
        }
    }
    f.render_widget(Paragraph::new(lines), body);

    let (left, right) = app.status();
    let text = match (&app.prompt, app.message.is_empty()) {
        (Some(p), _) => format!("Search: {p}"),
        (None, false) => app.message.clone(),
        (None, true) => left,
    };
    let width = status.width as usize;
    let pad = width.saturating_sub(text.chars().count() + right.len());
    let bar = format!("{text}{}{right}", " ".repeat(pad));
    f.render_widget(Paragraph::new(Line::from(bar).style(reversed)), status);

    if app.help {
        let w = 66.min(f.area().width);
        let h = (HELP.len() as u16 + 2).min(f.area().height);
        let area = Rect {
            x: f.area().width.saturating_sub(w) / 2,
            y: f.area().height.saturating_sub(h) / 2,
            width: w,
            height: h,
        };
        f.render_widget(Clear, area);
        let help: Vec<Line> = HELP.iter().map(|l| Line::from(*l)).collect();
        f.render_widget(
            Paragraph::new(help).block(Block::default().borders(Borders::ALL).title(" Help ")),
            area,
        );
    }
}

/// A terminal key as the model's [`Key`].
fn key_of(code: KeyCode, mods: KeyModifiers) -> Option<Key> {
    Some(match code {
        KeyCode::Char('c') if mods.contains(KeyModifiers::CONTROL) => Key::Char('q'),
        KeyCode::Char(c) => Key::Char(c),
        KeyCode::Up => Key::Up,
        KeyCode::Down => Key::Down,
        KeyCode::PageUp => Key::PageUp,
        KeyCode::PageDown => Key::PageDown,
        KeyCode::Home => Key::Home,
        KeyCode::End => Key::End,
        KeyCode::Enter => Key::Enter,
        KeyCode::Backspace => Key::Backspace,
        KeyCode::Esc => Key::Esc,
        _ => return None,
    })
}

/// Runs the tui on the terminal until `q`; the terminal is restored on every way out.
pub fn run(mut app: App) -> std::io::Result<()> {
    let mut terminal = ratatui::try_init()?;
    let result = (|| -> std::io::Result<()> {
        loop {
            terminal.draw(|f| draw(f, &mut app))?;
            let Event::Key(k) = event::read()? else {
                continue;
            };
            if k.kind != KeyEventKind::Press {
                continue;
            }
            if let Some(key) = key_of(k.code, k.modifiers) {
                // Ctrl-C quits from anywhere.
                if k.code == KeyCode::Char('c') && k.modifiers.contains(KeyModifiers::CONTROL) {
                    return Ok(());
                }
                if !app.key(key) {
                    return Ok(());
                }
            }
        }
    })();
    ratatui::restore();
    result
}
