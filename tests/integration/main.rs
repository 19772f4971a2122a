//! Integration tests: one test binary (ripgrep's layout) with a small helper module.
//!
//! * `replay_diff`: uftrace records the test programs, then `utrace replay` must print what
//!   `uftrace replay` prints (needs gcc and uftrace);
//! * `fixtures`: `utrace replay` on committed uftrace data against committed golden output
//!   (needs neither);
//! * `bad_input`: broken data directories must give an error, never a panic;
//! * `crafted`: directories written by record-format (lost records, unfinished calls),
//!   replayed by both tools;
//! * `symbols`: replay without `.sym` files reads the ELF files instead;
//! * `cxx_names`: C++ names in uftrace's simple demangling (a test program, a corpus of
//!   mangled names) and regex filters on them;
//! * `record`: the recorder's checks, messages and statuses, `live`;
//! * `record_arg_locations`: argument locations, long doubles and floats among integers
//!   (testprogs/locs.c) against uftrace, with its known-wrong values corrected;
//! * `record_dwarf_args`: argument specs from DWARF (`-a`, `-A .`) on structs, classes, long
//!   double and the rest, the `.dbg` file and the replays against uftrace;
//! * `record_filters`: record-time filters and depth limits, applied while recording;
//! * `record_options`: `--keep-pid`, `--no-randomize-addr`, `--libmcount-single` against
//!   uftrace; the steps `-vv`, `--debug` and `--debug-domain` print; `--version`'s words;
//! * `record_runtime`: `--clock` (records stamped by that clock), `--no-pltbind`, `-b`, `-F`
//!   naming no function, against uftrace;
//! * `record_flight`: the flight recorder (`--flight-recorder`): each way of dumping (signal,
//!   trigger, time threshold, crash, exit) keeps the newest calls, complete, and drops the old;
//! * `record_libcalls`: library calls through the PLT hooks, lazy and `-z now` builds;
//! * `record_attach`: `record -p PID` and `live -p PID` on running `-O2` programs (one thread,
//!   threads started before and while attached, twice in a row, signals arriving meanwhile)
//!   and the refusals;
//! * `record_attach_faults`: attaches that go wrong (a thread that never stops, another user's
//!   process, an exec mid-session, libmcount.so replaced since an earlier attach);
//! * `record_attach_hijack`: attaches with `-P .` (text unpatched at the detach), C++ exceptions
//!   and stack walks in the attached process, a later attach with other settings refused;
//! * `record_events`: `-W cpu`, user SDT events (`-E`) against uftrace, a program with its own
//!   SIGTRAP handler, `--keep-pid`;
//! * `record_autoargs`: `-a` on library calls (the built-in prototypes) against uftrace, and
//!   on the calls of a `dlopen`ed library;
//! * `record_autoargs_dlopen`: `-a` on the calls of a `dlopen`ed library (`malloc`), with
//!   triggers and a time filter, against uftrace where its recorder and reader can compare;
//! * `record_processes`: vfork children that work and exec, fork with allocations, longjmp from
//!   several depths and in a loop, pthread_exit and daemon, with library calls, against uftrace;
//! * `record_sessions`: programs that exec (one task, new sessions) and spawn: `replay --tid`,
//!   `info`, `info --task`, `report --task` and `task.txt` against uftrace;
//! * `record_sched`: scheduling events (`perf-cpu*.dat`) recorded by default, replayed by
//!   uftrace as its own; `--no-sched`, `--no-event`, threads, children and `--keep-pid`;
//! * `graph_sched`: `utrace graph` with scheduling events (`linux:schedule` nodes) against
//!   uftrace's graph of the same data, both tools' recordings;
//! * `record_patch`: dynamic patching (`-P`/`-U`, `-Z`) of patchable, `-mnop-mcount`, plain
//!   `-O2`, `-pg -mfentry` and `-pg` builds with a linked and a `dlopen`ed library, against
//!   uftrace; the analysis of patched functions; checksums unchanged under patching;
//! * `record_patch_real`: lua 5.4 and zstd built at `-O2` from Debian's sources, `-P .`:
//!   same output as untraced, the same call counts as uftrace's for the functions both patched;
//! * `record_matrix`: every test program in every build mode recorded by utrace and by
//!   uftrace, both replays of utrace's data against uftrace's;
//! * `survival`: programs that crash, are killed or exit with threads running still leave a
//!   complete, replayable data directory.
//! * `analysis_dump`: `utrace dump` in every format against uftrace (fresh recordings and
//!   goldens of the fixtures), the chrome JSON and the SVG flame graph parsed.
//! * `analysis_diff`, `analysis_golden`: `utrace report`, `graph` and `info` against uftrace
//!   (fresh recordings of the test programs; goldens of the fixtures);
//! * `report_conformance`: `utrace report` against uftrace 0.13's, whole outputs, for every
//!   `--avg-*`, `-s`, `--task -f` and `--diff-policy`/`--sort-column` combination, on data
//!   recorded by both tools (uftrace's with its scheduling events);
//! * `replay_sched`: context switches in replay, dump and the rest, both tools on one data
//!   directory recorded with scheduling events;
//! * `replay_extern`: `extern.dat` lines in replay against uftrace (times, `-r`, `--flat`,
//!   filters);
//! * `replay_select`: replay-time `-A`/`-R` selection of recorded arguments;
//! * `slow_path`: every test program recorded on libmcount's fast and slow paths, same trace;
//! * `tui`: `utrace tui` driven in tmux (open, fold, search, report, info, quit);
//! * `kernel_replay`, `kernel_record`: kernel data (`-k`) in the analysis commands (crafted
//!   pages, against uftrace) and recorded from this kernel's system call events;
//! * `kernel_io`: `record -k` + `report --io` on the libaio, io_uring and O_SYNC testprogs
//!   (requests linked from submission to reaping, at the sectors FIEMAP gives);
//! * `analysis_histogram`: `report --histogram` on crafted data with known durations.
//! * `srcline`: `--srcline` (the `.dbg` files, replay, report, graph, chrome) and `-L` at
//!   record and replay time against uftrace (testprogs/srcline.c and its library);
//! * `stack_walks`: a traced program calling `backtrace()` and `_Unwind_Backtrace()` sees the
//!   stack it sees untraced; one reading its own return addresses and frame-pointer chain, and
//!   C++ exceptions through 200 frames, against uftrace and the untraced run.
//! * `special_files`: a symlink to `/dev/zero` or `/dev/urandom`, a FIFO or a directory in place
//!   of each data file: every analysis command ends at once, stays small and names the file
//!   (`bounded.rs` runs utrace with a time and an address-space limit and measures its peak RSS);
//!   `fuzz_dirs` (ignored: minutes) sends many damaged directories through every command.
//! * `recv`: `utrace recv` and `record --host` against uftrace 0.13 both ways (the received
//!   directories replayed like local recordings), utrace to utrace over IPv4 and IPv6,
//!   `--run-cmd`, senders that break off or send garbage, SIGTERM/SIGINT, and the errors.
//! * `script`: `script -S` (Python and Lua), `record -S`, `live -S`, `script --record` against
//!   uftrace's script engines on the same data; script errors; no libpython in `utrace`.
//! * `install`: `utrace` copied alone records with the libmcount.so built into it, written out
//!   to a private cache directory (planted links and files replaced, `--libmcount-path` first).
//!
//! Build the binary first: `cargo build --release && cargo test --release -p utrace-tests`.

mod analysis_diff;
mod analysis_dump;
mod analysis_dump_formats;
mod analysis_golden;
mod analysis_histogram;
mod analysis_perfetto;
mod bad_input;
mod bounded;
mod crafted;
mod cxx_names;
mod fixtures;
mod fuzz_dirs;
mod graph_sched;
mod install;
mod kernel_io;
mod kernel_record;
mod kernel_replay;
mod kernel_writes;
mod normalize;
mod record;
mod record_agent;
mod record_arg_locations;
mod record_args;
mod record_attach;
mod record_attach_faults;
mod record_attach_hijack;
mod record_autoargs;
mod record_autoargs_dlopen;
mod record_dwarf_args;
mod record_events;
mod record_filters;
mod record_flight;
mod record_libcalls;
mod record_matrix;
mod record_options;
mod record_patch;
mod record_patch_real;
mod record_processes;
mod record_runtime;
mod record_sched;
mod record_sessions;
mod recorder_faults;
mod recv;
mod replay_diff;
mod replay_extern;
mod replay_sched;
mod replay_select;
mod report_conformance;
mod script;
mod script_events;
mod script_live;
mod slow_path;
mod special_files;
mod srcline;
mod stack_walks;
mod survival;
mod symbols;
mod tui;
mod util;
