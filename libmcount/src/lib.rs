//! utrace's runtime, preloaded into the traced program (`LD_PRELOAD=libmcount.so`).
//!
//! Data flow: instrumented code calls `mcount` / `__fentry__` (gcc `-pg`, `-pg -mfentry`) or
//! `__cyg_profile_func_enter/exit` (`-finstrument-functions`). The naked trampolines in
//! [`arch`] save the argument registers and call the shims in [`entry`], which take the
//! calling thread's [`thread::ThreadState`] (lazily created, reached through an initial-exec
//! TLS slot), push a [`rstack::Frame`], hijack the function's return slot so that it returns
//! into the exit trampoline, and write a 16-byte ENTRY record into the thread's
//! `<dir>/<tid>.dat` through an `mmap`ed window ([`buffer`]). The exit trampoline pops the
//! frame, writes the EXIT record and resumes at the original return address.
//!
//! [`session`] reads the environment contract of `record_format::env` in the library
//! constructor into [`config`] (what hooks and threads read), writes `sid-<SID>.map` and the
//! `SESS`/`TASK` lines of `task.txt` ([`tasklog`]), and handles process exit (a process that
//! was already running gets the same settings from a file instead: `utrace record -p` loads
//! libmcount into it and calls [`attach`]'s `utrace_attach`, later `utrace_detach`); [`lifecycle`]
//! creates each thread's state and handles thread exit and `fork`; [`unwind`] keeps C++
//! exceptions working through hijacked frames. Tracing is off when `UTRACE_DIR` is unset.
//! Every bit a frame carries ([`rstack::Frame::flags`]) is allocated in [`frame_flags`];
//! `UTRACE_SLOW_PATH=1` sends every hook through the Rust handlers (for tests). `-W cpu`
//! (`thread::watch`) runs on those handlers; `-E` user SDT probes ([`sdt`]) are `int3`s that a
//! `SIGTRAP` handler records; with `--keep-pid`, [`kept_pid`] holds the program's `exit()`
//! until the recorder has finished. `-P`/`-U` ([`patch`]) write hook calls into functions
//! built without them, in the constructor and for `dlopen`ed libraries; fully patched
//! functions enter and leave through the dynamic trampolines of `arch::dynamic`, which save
//! every scratch register (their frames carry `frame_flags::DYN_EXIT`).
//!
//! Module layers, each using only the ones before it (no cycles): `sys`, `log`, `frame_flags`,
//! `rstack`, `clock`, [`cpu`] (register areas, thread pointer, trampoline addresses) at the
//! bottom; `patch` (writes code; its `table` is where `entry` finds moved prologues, and
//! `dlopen` calls it for new libraries); `filter`, `config`, `flight`, `args`, `buffer`, `plt`;
//! `thread`;
//! `dlopen`, `lifecycle`; `entry`, `crash`, `wrap`, `unwind`, `sdt`, `kept_pid`; [`arch`] (the
//! trampolines, which call the handlers of `entry`, `unwind` and `dlopen`), `session` and
//! `attach` at the top.
//!
//! Process exit: the `.fini_array` destructor runs from `exit()` after the `atexit` handlers
//! and the executable's destructors (which are therefore still traced); it closes the calling
//! thread's window and cuts its file to the data. No separate `atexit` handler is registered:
//! one registered by the constructor would run *before* the executable's destructors and the
//! handlers registered earlier, and stop tracing too soon. Other threads' windows stay mapped
//! (they may still be writing); since records are written into the page cache, nothing needs
//! flushing on any exit path, including `_exit`, `exec` and SIGKILL.
//!
//! Hook context rules (runtime spec §5): no allocation, no locks, no panics, raw system calls
//! ([`sys`]), `errno` preserved, one recursion guard per thread.

pub mod agent;
pub mod aio;
pub mod arch;
pub mod args;
pub mod attach;
pub mod buffer;
pub mod clock;
pub mod config;
pub mod counters;
pub mod cpu;
pub mod crash;
pub mod dlopen;
pub mod entry;
pub mod filter;
pub mod flight;
pub mod frame_flags;
pub mod kept_pid;
pub mod late_args;
pub mod lifecycle;
pub mod log;
pub mod patch;
pub mod plt;
pub mod rstack;
pub mod sdt;
pub mod session;
pub mod signals;
pub mod sys;
pub mod tasklog;
pub mod thread;
pub mod unwind;
pub mod unwind_got;
pub mod wrap;

#[used]
#[unsafe(link_section = ".init_array")]
static INIT: extern "C" fn() = session::init;

#[used]
#[unsafe(link_section = ".fini_array")]
static FINI: extern "C" fn() = session::fini;
