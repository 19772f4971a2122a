//! Ways to reduce trace output to what must match between utrace and uftrace.
//!
//! [`by_task`] is the comparison uftrace's own test suite uses (spec/cli.md §12): columns left
//! of ` | ` (durations, TID widths, addresses, timestamps) are dropped, and the lines of each
//! task are grouped together so the interleaving of tasks does not matter. [`whole`] keeps the
//! order and every line, including the remaining-functions block after the first empty line.
//! [`flat`] masks the timestamps of `--flat` output.

/// Where [`by_task`] starts comparing.
#[derive(Clone, Copy, Debug)]
pub enum Anchor {
    /// At the first line whose function text starts with `main(` (uftrace's default: it skips
    /// `__monstartup();`, `__cxa_atexit();`, the header and `Usage:` lines).
    Main,
    /// At the first line whose function text contains this string (e.g. `-F b` hides main).
    Text(&'static str),
    /// At the beginning (header lines starting with `#` are still skipped).
    Start,
}

/// One line split into the TID it names (if any) and its function text.
struct Line<'a> {
    tid: Option<&'a str>,
    text: &'a str,
}

/// Splits a replay line at the first ` | ` (the field separator). Lines without it (`-f none`,
/// messages) are all function text. The TID is whatever stands inside `[...]` in the fields.
fn split(line: &str) -> Line<'_> {
    let line = line.trim_end();
    let (fields, text) = match line.find(" | ") {
        Some(at) => (&line[..at], &line[at + 3..]),
        // A `--task-newline` separator, `<spaces> |`, after trailing blanks were stripped.
        None if line.ends_with(" |") => (&line[..line.len() - 2], ""),
        None => ("", line),
    };
    let tid = fields.find('[').and_then(|open| {
        let rest = &fields[open + 1..];
        rest.find(']').map(|close| rest[..close].trim())
    });
    Line { tid, text }
}

fn is_header(line: &str) -> bool {
    line.starts_with('#')
}

/// uftrace's "task" comparison: skip up to the anchor, stop at the first empty line, keep the
/// function text of each line with trailing blanks removed, then list the lines of each task
/// together, tasks in order of first appearance. Lines without a TID (messages, `--task-newline`
/// separators) belong to the task of the line before them.
pub fn by_task(output: &str, anchor: Anchor) -> String {
    let mut started = matches!(anchor, Anchor::Start);
    let mut groups: Vec<(Option<&str>, Vec<&str>)> = Vec::new();
    let mut current: Option<usize> = None;

    for raw in output.lines() {
        if raw.trim_end().is_empty() {
            if started {
                break;
            }
            continue;
        }
        if is_header(raw) {
            continue;
        }
        let line = split(raw);
        if !started {
            started = match anchor {
                Anchor::Main => line.text.trim_start().starts_with("main("),
                Anchor::Text(needle) => line.text.contains(needle),
                Anchor::Start => true,
            };
            if !started {
                continue;
            }
        }
        let index = match line.tid {
            Some(tid) => match groups.iter().position(|(t, _)| *t == Some(tid)) {
                Some(index) => index,
                None => {
                    groups.push((Some(tid), Vec::new()));
                    groups.len() - 1
                }
            },
            None => match current {
                Some(index) => index,
                None => {
                    groups.push((None, Vec::new()));
                    groups.len() - 1
                }
            },
        };
        current = Some(index);
        groups[index].1.push(line.text);
    }

    let mut out = String::new();
    for (_, lines) in groups {
        for line in lines {
            out.push_str(line);
            out.push('\n');
        }
    }
    out
}

/// Folds `f() {` + `} /* f */` (same indentation, next line) into `f();` (with a return
/// value, `} = V; /* f */` into `f() = V;`). uftrace (and utrace, which prints what it prints)
/// shows a leaf only when no record of *another* task comes between the entry and the exit, so
/// two recordings of a multi-threaded program differ there with the interleaving alone.
pub fn fold_leaves(text: &str) -> String {
    let lines: Vec<&str> = text.lines().collect();
    let mut out = String::new();
    let mut i = 0;
    while i < lines.len() {
        let line = lines[i];
        let body = line.trim_start();
        let indent = &line[..line.len() - body.len()];
        if let (Some(name), Some(next)) = (body.strip_suffix(" {"), lines.get(i + 1)) {
            // `f(args) {` closes with `} /* f */` or, with a return value, `} = V; /* f */`.
            let func = name.split('(').next().unwrap_or(name);
            if let Some(rest) = next
                .strip_prefix(indent)
                .and_then(|n| n.strip_prefix('}'))
                .and_then(|n| n.strip_suffix(&format!(" /* {func} */")))
            {
                if rest.is_empty() {
                    out.push_str(&format!("{indent}{name};\n"));
                    i += 2;
                    continue;
                }
                if let Some(value) = rest.strip_prefix(" = ").and_then(|v| v.strip_suffix(';')) {
                    out.push_str(&format!("{indent}{name} = {value};\n"));
                    i += 2;
                    continue;
                }
            }
        }
        out.push_str(line);
        out.push('\n');
        i += 1;
    }
    out
}

/// Every line in order, including what follows empty lines (the remaining-functions block), with
/// header lines dropped (their widths differ between uftrace 0.13 and 0.19) and fields left of
/// ` | ` removed.
pub fn whole(output: &str) -> String {
    let mut out = String::new();
    for raw in output.lines() {
        if is_header(raw) {
            continue;
        }
        out.push_str(split(raw).text);
        out.push('\n');
    }
    out
}

/// `--flat` output with the numbers inside `time (...)` replaced by `#`, trailing blanks removed.
/// (Durations are part of the data, but masking keeps a failure readable.)
pub fn flat(output: &str) -> String {
    const KEY: &str = "time (";
    let mut out = String::new();
    for raw in output.lines() {
        let line = raw.trim_end();
        match line.find(KEY) {
            Some(at) => {
                let start = at + KEY.len();
                let end = line[start..].find(')').map_or(line.len(), |e| start + e);
                out.push_str(&line[..start]);
                out.push('#');
                out.push_str(&line[end..]);
            }
            None => out.push_str(line),
        }
        out.push('\n');
    }
    out
}

/// The TIDs named in replay output, in order of first appearance.
pub fn tids(output: &str) -> Vec<String> {
    let mut tids: Vec<String> = Vec::new();
    for raw in output.lines() {
        if let Some(tid) = split(raw).tid {
            if !tid.is_empty() && !tids.iter().any(|t| t == tid) {
                tids.push(tid.to_string());
            }
        }
    }
    tids
}

/// A line diff of `expected` (uftrace, `-`) against `actual` (utrace, `+`), with unchanged lines
/// prefixed by two spaces. Meant for the small outputs of the test programs.
pub fn diff(expected: &str, actual: &str) -> String {
    let a: Vec<&str> = expected.lines().collect();
    let b: Vec<&str> = actual.lines().collect();
    if a.len().saturating_mul(b.len()) > 4_000_000 {
        return format!("--- expected\n{expected}+++ actual\n{actual}");
    }
    // lcs[i][j]: length of the longest common subsequence of a[i..] and b[j..].
    let mut lcs = vec![vec![0u32; b.len() + 1]; a.len() + 1];
    for i in (0..a.len()).rev() {
        for j in (0..b.len()).rev() {
            lcs[i][j] = if a[i] == b[j] {
                lcs[i + 1][j + 1] + 1
            } else {
                lcs[i + 1][j].max(lcs[i][j + 1])
            };
        }
    }
    let (mut i, mut j) = (0, 0);
    let mut out = String::new();
    while i < a.len() || j < b.len() {
        if i < a.len() && j < b.len() && a[i] == b[j] {
            out.push_str(&format!("  {}\n", a[i]));
            i += 1;
            j += 1;
        } else if i < a.len() && (j == b.len() || lcs[i + 1][j] >= lcs[i][j + 1]) {
            out.push_str(&format!("- {}\n", a[i]));
            i += 1;
        } else {
            out.push_str(&format!("+ {}\n", b[j]));
            j += 1;
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    const THREADS: &str = "\
Usage: failed to set filter or trigger: nothing
# DURATION     TID     FUNCTION
   0.951 us [  7022] | __monstartup();
            [  7022] | main() {
  49.003 us [  7022] |   pthread_create();
            [  7022] |   pthread_join() {
            [  7024] | worker() {
   0.100 us [  7024] |   tiny();   
                     | 
            [  7025] | worker() {
   0.391 us [  7025] | } /* worker */
   0.911 us [  7024] | } /* worker */
 168.832 us [  7022] |   } /* pthread_join */
 241.300 us [  7022] | } /* main */

uftrace stopped tracing with remaining functions
";

    #[test]
    fn by_task_groups_from_main_and_stops_at_empty_line() {
        let expected = "\
main() {
  pthread_create();
  pthread_join() {
  } /* pthread_join */
} /* main */
worker() {
  tiny();

} /* worker */
worker() {
} /* worker */
";
        assert_eq!(by_task(THREADS, Anchor::Main), expected);
    }

    #[test]
    fn by_task_from_start_keeps_messages_and_startup_calls() {
        let got = by_task(THREADS, Anchor::Start);
        assert!(got.starts_with("Usage: failed to set filter or trigger: nothing\n"));
        assert!(got.contains("__monstartup();\nmain() {\n"));
        assert!(!got.contains("remaining"));
    }

    #[test]
    fn by_task_text_anchor_and_field_columns() {
        let out = "\
# DURATION     TID       ADDRESS        TIMESTAMP      TIMEDELTA   ELAPSED        TASK NAME      MODULE NAME   FUNCTION
   0.922 us [  7001] 55def4dc8050     1391.277668451                                   abc              abc | __monstartup();
            [  7001] 55def4dc8208     1391.277671496   0.050 us   3.045 us             abc              abc |     b() {
  backtrace [  7001] | /* [ 0] main */
";
        assert_eq!(
            by_task(out, Anchor::Text("b()")),
            "    b() {\n/* [ 0] main */\n"
        );
    }

    #[test]
    fn by_task_without_fields() {
        let out = "__monstartup();\nmain() {\n  a();\n} /* main */\n";
        assert_eq!(
            by_task(out, Anchor::Main),
            "main() {\n  a();\n} /* main */\n"
        );
    }

    #[test]
    fn whole_keeps_the_remaining_block() {
        let got = whole(THREADS);
        assert!(got.contains("} /* main */\n\nuftrace stopped tracing with remaining functions\n"));
        assert!(!got.contains("DURATION"));
    }

    #[test]
    fn flat_masks_times() {
        let out = "\n[0] ==> 7001/0: ip (main), time (1391277668451)\n[1] <== 7001/0: ip (main), time (1391277669373:922)\n";
        assert_eq!(
            flat(out),
            "\n[0] ==> 7001/0: ip (main), time (#)\n[1] <== 7001/0: ip (main), time (#)\n"
        );
    }

    #[test]
    fn tids_in_first_appearance_order() {
        assert_eq!(tids(THREADS), ["7022", "7024", "7025"]);
    }

    #[test]
    fn diff_marks_changed_lines() {
        assert_eq!(diff("a\nb\nc\n", "a\nx\nc\n"), "  a\n- b\n+ x\n  c\n");
        assert_eq!(diff("", "a\n"), "+ a\n");
    }
}
