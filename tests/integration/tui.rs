//! `utrace tui` driven in a tmux pane: it opens on the call graph, folds, searches, shows the
//! report (and re-sorts it) and the info, and quits with `q`; `utrace PROG` pages its trace
//! on a terminal.

use std::path::Path;
use std::process::Command;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use crate::util::{self, Mode};

/// A detached tmux session running one command, on a tmux server of its own (`-L NAME`: tests
/// starting sessions at once would otherwise race to start the shared server); killed on drop.
struct Pane {
    name: String,
}

impl Pane {
    fn start(cmd: &str) -> Pane {
        static NEXT: AtomicUsize = AtomicUsize::new(0);
        let n = NEXT.fetch_add(1, Ordering::Relaxed);
        let name = format!("utrace-tui-{}-{n}", std::process::id());
        let ok = Command::new("tmux")
            .args([
                "-L",
                &name,
                "new-session",
                "-d",
                "-s",
                &name,
                "-x",
                "100",
                "-y",
                "30",
                cmd,
            ])
            .status()
            .expect("tmux")
            .success();
        assert!(ok, "tmux new-session failed");
        Pane { name }
    }

    fn send(&self, keys: &[&str]) {
        let ok = Command::new("tmux")
            .args(["-L", &self.name, "send-keys", "-t", &self.name])
            .args(keys)
            .status()
            .expect("tmux")
            .success();
        assert!(ok, "tmux send-keys failed");
    }

    /// The pane's text (`escapes`: with the SGR codes, to see the highlighted line).
    fn capture(&self, escapes: bool) -> String {
        let mut cmd = Command::new("tmux");
        cmd.args(["-L", &self.name, "capture-pane", "-p", "-t", &self.name]);
        if escapes {
            cmd.arg("-e");
        }
        let out = cmd.output().expect("tmux capture-pane");
        String::from_utf8_lossy(&out.stdout).into_owned()
    }

    /// Waits until the pane shows something `ok` accepts; panics with the last screen.
    fn wait(&self, what: &str, escapes: bool, ok: impl Fn(&str) -> bool) -> String {
        let start = Instant::now();
        loop {
            let screen = self.capture(escapes);
            if ok(&screen) {
                return screen;
            }
            if start.elapsed() > Duration::from_secs(10) {
                panic!("tui: {what} never showed; screen:\n{screen}");
            }
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    fn alive(&self) -> bool {
        Command::new("tmux")
            .args(["-L", &self.name, "has-session", "-t", &self.name])
            .stderr(std::process::Stdio::null())
            .status()
            .is_ok_and(|s| s.success())
    }
}

impl Drop for Pane {
    fn drop(&mut self) {
        let _ = Command::new("tmux")
            .args(["-L", &self.name, "kill-server"])
            .stderr(std::process::Stdio::null())
            .status();
    }
}

fn tmux_available() -> bool {
    Command::new("tmux")
        .arg("-V")
        .output()
        .is_ok_and(|o| o.status.success())
}

/// fib 5 without scheduling events: on a busy machine a pre-emption would add a
/// `linux:schedule` node that can top the self-time sort the tests rely on.
fn record_fib(dir: &Path) {
    let exe = util::testprog("fib", Mode::Pg);
    let mut cmd = Command::new(util::utrace_bin());
    cmd.args(["record", "--no-sched", "-d"])
        .arg(dir)
        .arg(&exe)
        .arg("5");
    util::run(cmd).assert_success();
}

/// The line of `screen` (captured with escapes) that is drawn reversed, other than the status
/// bar.
fn highlighted(screen: &str) -> Option<&str> {
    screen
        .lines()
        .find(|l| l.contains("\x1b[7m") && !l.contains("utrace "))
}

#[test]
fn tui_opens_folds_searches_and_quits() {
    if !tmux_available() {
        assert!(
            std::env::var_os("CI").is_none(),
            "tmux is missing (tests/setup.sh installs it)"
        );
        eprintln!("tui test skipped: no tmux");
        return;
    }
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("data");
    record_fib(&dir);
    let cmd = format!("{} tui -d {}", util::utrace_bin().display(), dir.display());
    let pane = Pane::start(&cmd);
    let screen = pane.wait("the graph", false, |s| s.contains("└─(1) main"));
    assert!(screen.contains("  TOTAL TIME : FUNCTION"), "{screen}");
    assert!(screen.contains("├─(1) __monstartup"), "{screen}");
    assert!(screen.contains("    ├─(1) atoi"), "{screen}");
    assert!(screen.contains("utrace graph: session "), "{screen}");

    // Fold main (the fourth line).
    pane.send(&["Down", "Down", "Down", "Enter"]);
    let screen = pane.wait("main folded", false, |s| s.contains("└─▶(1) main"));
    assert!(!screen.contains("atoi"), "{screen}");

    // Search unfolds the way to the match and puts the cursor on it.
    pane.send(&["/", "a", "t", "o", "i", "Enter"]);
    let screen = pane.wait("the match", true, |s| {
        highlighted(s).is_some_and(|l| l.contains("(1) atoi"))
    });
    assert!(screen.contains("(1) fib"), "{screen}");

    // The report, sorted by total, then by self time.
    pane.send(&["R"]);
    let screen = pane.wait("the report", false, |s| s.contains("*TOTAL TIME"));
    assert!(
        screen
            .lines()
            .any(|l| l.trim_end().ends_with(" fib") && l.contains(" 9 ")),
        "{screen}"
    );
    assert!(screen.contains("utrace report: "), "{screen}");
    pane.send(&["s"]);
    pane.wait("the self-time sort", false, |s| s.contains("*SELF TIME"));

    // Enter on a report row jumps to the function in the graph.
    pane.send(&["Home", "Enter"]);
    pane.wait("the jump", true, |s| {
        s.contains("TOTAL TIME : FUNCTION") && highlighted(s).is_some_and(|l| l.contains("─(1) "))
    });

    pane.send(&["I"]);
    pane.wait("the info", false, |s| s.contains("# program version"));
    pane.send(&["q", "h"]);
    pane.wait("the help", false, |s| s.contains(" Help "));
    pane.send(&["q", "q"]);
    let start = Instant::now();
    while pane.alive() && start.elapsed() < Duration::from_secs(10) {
        std::thread::sleep(Duration::from_millis(50));
    }
    assert!(!pane.alive(), "q did not quit:\n{}", pane.capture(false));
}

/// With scheduling events recorded, the graph shows the switch in `usleep` as a
/// `linux:schedule` node (as `graph` does) and the report a `linux:schedule` row (as `report`
/// does); Enter on the row jumps to the node.
#[test]
fn tui_shows_context_switches() {
    if !tmux_available() {
        assert!(
            std::env::var_os("CI").is_none(),
            "tmux is missing (tests/setup.sh installs it)"
        );
        eprintln!("tui test skipped: no tmux");
        return;
    }
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("data");
    let exe = util::testprog("sleep", Mode::Pg);
    let mut cmd = Command::new(util::utrace_bin());
    cmd.args(["record", "-d"]).arg(&dir).arg(&exe);
    util::run(cmd).assert_success();
    let cmd = format!("{} tui -d {}", util::utrace_bin().display(), dir.display());
    let pane = Pane::start(&cmd);
    let screen = pane.wait("the graph", false, |s| s.contains("└─(1) main"));
    let lines: Vec<&str> = screen.lines().collect();
    let usleep = lines.iter().position(|l| l.ends_with("└─(1) usleep"));
    // The first child of `usleep` (a second one, `(pre-empted)`, when the machine is busy).
    let sched = lines
        .iter()
        .position(|l| l.trim_end().ends_with("─(1) linux:schedule"));
    assert!(
        usleep.is_some() && sched == usleep.map(|u| u + 1),
        "no linux:schedule under usleep:\n{screen}"
    );

    pane.send(&["R"]);
    let screen = pane.wait("the report", false, |s| s.contains("*TOTAL TIME"));
    let rows: Vec<&str> = screen
        .lines()
        .skip_while(|l| !l.contains("*TOTAL TIME"))
        .skip(1)
        .take_while(|l| !l.trim().is_empty())
        .collect();
    let row = rows
        .iter()
        .position(|l| l.trim_end().ends_with("  linux:schedule"));
    assert!(row.is_some(), "no linux:schedule row:\n{screen}");
    // Sorted by total time: main, slow, usleep, then the switch inside usleep.
    pane.send(&["Home"]);
    for _ in 0..row.unwrap() {
        pane.send(&["Down"]);
    }
    pane.send(&["Enter"]);
    pane.wait("the jump to the node", true, |s| {
        s.contains("TOTAL TIME : FUNCTION")
            && highlighted(s).is_some_and(|l| l.contains("(1) linux:schedule"))
    });
    pane.send(&["q", "q"]);
}

#[test]
fn tui_needs_a_terminal() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("data");
    record_fib(&dir);
    let mut cmd = Command::new(util::utrace_bin());
    cmd.args(["tui", "-d"]).arg(&dir);
    let out = util::run(cmd);
    assert_eq!(out.status.code(), Some(1), "{out}");
    assert!(out.stderr.contains("tui needs a terminal"), "{out}");
    assert!(!out.stderr.contains("panicked"), "{out}");
}

/// `utrace PROG` on a terminal: the program's output first, then the trace through `$PAGER`,
/// and the exit status of a program that fails (1) or crashes (2).
#[test]
fn live_pages_the_trace_on_a_terminal() {
    if !tmux_available() {
        assert!(
            std::env::var_os("CI").is_none(),
            "tmux is missing (tests/setup.sh installs it)"
        );
        return;
    }
    let fib = util::testprog("fib", Mode::Pg);
    let crash = util::testprog("crash", Mode::Pg);
    let tmp = tempfile::tempdir().unwrap();
    let cmd = format!(
        "cd {dir} && export PAGER='sed s/^/PAGED:/'; {u} --no-libcall {fib} 5; echo STATUS=$?; \
         {u} --no-libcall {crash} 2>/dev/null | tail -3; {u} --no-libcall {crash} >/dev/null 2>&1; \
         echo CRASH=$?; sleep 30",
        dir = tmp.path().display(),
        u = util::utrace_bin().display(),
        fib = fib.display(),
        crash = crash.display(),
    );
    let pane = Pane::start(&cmd);
    let screen = pane.wait("the exit statuses", false, |s| s.contains("CRASH="));
    assert!(screen.contains("PAGED:# DURATION"), "{screen}");
    assert!(
        screen.contains("PAGED:") && screen.contains("|     fib() {"),
        "{screen}"
    );
    assert!(screen.contains("STATUS=0"), "{screen}");
    assert!(screen.contains("CRASH=2"), "{screen}");
}
