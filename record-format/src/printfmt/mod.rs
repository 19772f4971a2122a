//! The text of a tracepoint record, from its format's `print fmt:` line.
//!
//! The line is a C string literal and the arguments the kernel's `TP_printk` passes to it:
//! `REC->field` reads, casts, arithmetic, `?:`, `__get_str`, `__print_symbolic` and
//! `__print_flags`. [`render`] evaluates them against a record's payload; anything it does not
//! understand (a helper it does not know, a payload too short) makes it list the event's own
//! fields as `name=value` instead, so an event always gets a readable text.

mod eval;
mod expr;
mod spec;

use crate::kernel::EventFormat;
use eval::{Eval, Value};
pub use expr::int_literal;
use expr::{lex, Parser, Tok};
use spec::{pad, Spec, Width};

/// Names a kernel address: the symbol and the offset into it.
pub type Symbols<'a> = &'a dyn Fn(u64) -> Option<(String, u64)>;

/// The text of the record `payload` of event `fmt`.
pub fn render(fmt: &EventFormat, payload: &[u8], sym: Symbols) -> String {
    try_render(fmt, payload, sym).unwrap_or_else(|| fallback(fmt, payload))
}

fn try_render(fmt: &EventFormat, payload: &[u8], sym: Symbols) -> Option<String> {
    let tokens = lex(&fmt.print_fmt)?;
    let mut p = Parser {
        tokens: &tokens,
        at: 0,
    };
    let Some(Tok::Str(text)) = p.next() else {
        return None;
    };
    let mut args = Vec::new();
    while p.eat(",") {
        args.push(p.expr()?);
    }
    if p.at != tokens.len() {
        return None;
    }
    let ev = Eval { fmt, payload };
    let mut values = args.iter().map(|a| ev.eval(a));
    let mut out = String::new();
    let mut rest = text.as_str();
    while let Some(pos) = rest.find('%') {
        out.push_str(&rest[..pos]);
        let (spec, after) = Spec::parse(&rest[pos + 1..])?;
        rest = after;
        if spec.conv == '%' {
            out.push('%');
            continue;
        }
        let width = match spec.width {
            Width::Star => Some(values.next()??.int()? as i64),
            Width::Fixed(w) => Some(w as i64),
            Width::None => None,
        };
        let value = values.next()??;
        let body = spec.format(&value, sym)?;
        pad(&mut out, &body, width, &spec);
    }
    out.push_str(rest);
    // Arguments the format never used mean it was not understood.
    values.next().is_none().then_some(out)
}

/// `name=value` of each field the event adds to the common ones.
fn fallback(fmt: &EventFormat, payload: &[u8]) -> String {
    let ev = Eval { fmt, payload };
    let mut parts = Vec::new();
    for f in fmt.fields.iter().filter(|f| !f.name.starts_with("common_")) {
        let text = match ev.field(f) {
            Some(Value::Str(s)) => s,
            Some(Value::Int(v, true)) => (v as i64).to_string(),
            Some(Value::Int(v, false)) => format!("{v:#x}"),
            None => "?".to_string(),
        };
        parts.push(format!("{}={}", f.name, text));
    }
    parts.join(" ")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn format(system: &str, text: &str) -> EventFormat {
        EventFormat::parse(system, text).expect("format parses")
    }

    fn no_symbols(_: u64) -> Option<(String, u64)> {
        None
    }

    fn put(p: &mut Vec<u8>, off: usize, bytes: &[u8]) {
        if p.len() < off + bytes.len() {
            p.resize(off + bytes.len(), 0);
        }
        p[off..off + bytes.len()].copy_from_slice(bytes);
    }

    const COMMON: &str = "\tfield:unsigned short common_type;\toffset:0;\tsize:2;\tsigned:0;\n\
        \tfield:unsigned char common_flags;\toffset:2;\tsize:1;\tsigned:0;\n\
        \tfield:unsigned char common_preempt_count;\toffset:3;\tsize:1;\tsigned:0;\n\
        \tfield:int common_pid;\toffset:4;\tsize:4;\tsigned:1;\n";

    fn page_fault() -> EventFormat {
        format(
            "exceptions",
            &format!(
                "name: page_fault_user\nID: 190\nformat:\n{COMMON}\
                 \tfield:unsigned long address;\toffset:8;\tsize:8;\tsigned:0;\n\
                 \tfield:unsigned long ip;\toffset:16;\tsize:8;\tsigned:0;\n\
                 \tfield:unsigned long error_code;\toffset:24;\tsize:8;\tsigned:0;\n\n\
                 print fmt: \"address=%ps ip=%ps error_code=0x%lx\", (void *)REC->address, (void *)REC->ip, REC->error_code\n"
            ),
        )
    }

    fn fault_payload() -> Vec<u8> {
        let mut p = vec![0u8; 32];
        put(&mut p, 8, &0x7f00_1234_5000u64.to_le_bytes());
        put(&mut p, 16, &0x40_1136u64.to_le_bytes());
        put(&mut p, 24, &6u64.to_le_bytes());
        p
    }

    #[test]
    fn page_fault_addresses_without_symbols_are_hex() {
        let text = render(&page_fault(), &fault_payload(), &no_symbols);
        assert_eq!(text, "address=0x7f0012345000 ip=0x401136 error_code=0x6");
    }

    #[test]
    fn symbol_conversions_name_the_address() {
        let f = format(
            "test",
            &format!(
                "name: t\nID: 1\nformat:\n{COMMON}\
                 \tfield:unsigned long ip;\toffset:8;\tsize:8;\tsigned:0;\n\n\
                 print fmt: \"%pS %ps %pS\", (void *)REC->ip, (void *)REC->ip, (void *)(REC->ip - 0x10)\n"
            ),
        );
        let mut p = vec![0u8; 16];
        put(&mut p, 8, &0xffff_0000_0000_1010u64.to_le_bytes());
        let sym = |a: u64| {
            (a >= 0xffff_0000_0000_1000)
                .then(|| ("vfs_read".to_string(), a - 0xffff_0000_0000_1000))
        };
        assert_eq!(render(&f, &p, &sym), "vfs_read+0x10 vfs_read vfs_read");
    }

    fn block_issue() -> EventFormat {
        format(
            "block",
            &format!(
                "name: block_rq_issue\nID: 2108\nformat:\n{COMMON}\
                 \tfield:dev_t dev;\toffset:8;\tsize:4;\tsigned:0;\n\
                 \tfield:sector_t sector;\toffset:16;\tsize:8;\tsigned:0;\n\
                 \tfield:unsigned int nr_sector;\toffset:24;\tsize:4;\tsigned:0;\n\
                 \tfield:unsigned int bytes;\toffset:28;\tsize:4;\tsigned:0;\n\
                 \tfield:unsigned short ioprio;\toffset:32;\tsize:2;\tsigned:0;\n\
                 \tfield:char rwbs[10];\toffset:34;\tsize:10;\tsigned:0;\n\
                 \tfield:char comm[16];\toffset:44;\tsize:16;\tsigned:0;\n\
                 \tfield:__data_loc char[] cmd;\toffset:60;\tsize:4;\tsigned:0;\n\n\
                 print fmt: \"%d,%d %s %u (%s) %llu + %u %s,%u,%u [%s]\", ((unsigned int) ((REC->dev) >> 20)), ((unsigned int) ((REC->dev) & ((1U << 20) - 1))), REC->rwbs, REC->bytes, __get_str(cmd), (unsigned long long)REC->sector, REC->nr_sector, __print_symbolic((((REC->ioprio) >> 13) & (8 - 1)), {{ IOPRIO_CLASS_NONE, \"none\" }}, {{ IOPRIO_CLASS_RT, \"rt\" }}, {{ IOPRIO_CLASS_BE, \"be\" }}, {{ IOPRIO_CLASS_IDLE, \"idle\" }}, {{ IOPRIO_CLASS_INVALID, \"invalid\"}}), (((REC->ioprio) >> 3) & ((1 << 10) - 1)), ((REC->ioprio) & ((1 << 3) - 1)), REC->comm\n"
            ),
        )
    }

    fn block_payload() -> Vec<u8> {
        let mut p = vec![0u8; 64];
        put(&mut p, 8, &(254u32 << 20).to_le_bytes());
        put(&mut p, 16, &123_456u64.to_le_bytes());
        put(&mut p, 24, &8u32.to_le_bytes());
        put(&mut p, 28, &4096u32.to_le_bytes());
        put(&mut p, 34, b"WS\0");
        put(&mut p, 44, b"ksys\0");
        // An empty `cmd` at the end of the record.
        put(&mut p, 60, &64u32.to_le_bytes());
        p
    }

    #[test]
    fn block_issue_reads_device_strings_and_symbolic_class() {
        let text = render(&block_issue(), &block_payload(), &no_symbols);
        assert_eq!(text, "254,0 WS 4096 () 123456 + 8 none,0,0 [ksys]");
    }

    #[test]
    fn data_loc_strings_are_read_at_their_offset() {
        let mut p = block_payload();
        put(&mut p, 60, &((4u32 << 16) | 64).to_le_bytes());
        put(&mut p, 64, b"abc\0");
        let text = render(&block_issue(), &p, &no_symbols);
        assert!(text.contains("4096 (abc) 123456"), "{text}");
    }

    #[test]
    fn sched_switch_state_flags_and_conditionals() {
        let f = format(
            "sched",
            &format!(
                "name: sched_switch\nID: 372\nformat:\n{COMMON}\
                 \tfield:char prev_comm[16];\toffset:8;\tsize:16;\tsigned:0;\n\
                 \tfield:pid_t prev_pid;\toffset:24;\tsize:4;\tsigned:1;\n\
                 \tfield:int prev_prio;\toffset:28;\tsize:4;\tsigned:1;\n\
                 \tfield:long prev_state;\toffset:32;\tsize:8;\tsigned:1;\n\
                 \tfield:char next_comm[16];\toffset:40;\tsize:16;\tsigned:0;\n\
                 \tfield:pid_t next_pid;\toffset:56;\tsize:4;\tsigned:1;\n\
                 \tfield:int next_prio;\toffset:60;\tsize:4;\tsigned:1;\n\n\
                 print fmt: \"prev_comm=%s prev_pid=%d prev_prio=%d prev_state=%s%s ==> next_comm=%s next_pid=%d next_prio=%d\", REC->prev_comm, REC->prev_pid, REC->prev_prio, (REC->prev_state & ((((0x00000000 | 0x00000001 | 0x00000002 | 0x00000004 | 0x00000008 | 0x00000010 | 0x00000020 | 0x00000040) + 1) << 1) - 1)) ? __print_flags(REC->prev_state & ((((0x00000000 | 0x00000001 | 0x00000002 | 0x00000004 | 0x00000008 | 0x00000010 | 0x00000020 | 0x00000040) + 1) << 1) - 1), \"|\", {{ 0x00000001, \"S\" }}, {{ 0x00000002, \"D\" }}, {{ 0x00000004, \"T\" }}, {{ 0x00000008, \"t\" }}, {{ 0x00000010, \"X\" }}, {{ 0x00000020, \"Z\" }}, {{ 0x00000040, \"P\" }}, {{ 0x00000080, \"I\" }}) : \"R\", REC->prev_state & (((0x00000000 | 0x00000001 | 0x00000002 | 0x00000004 | 0x00000008 | 0x00000010 | 0x00000020 | 0x00000040) + 1) << 1) ? \"+\" : \"\", REC->next_comm, REC->next_pid, REC->next_prio\n"
            ),
        );
        let mut p = vec![0u8; 64];
        put(&mut p, 8, b"prog\0");
        put(&mut p, 24, &4242i32.to_le_bytes());
        put(&mut p, 28, &120i32.to_le_bytes());
        put(&mut p, 32, &3i64.to_le_bytes());
        put(&mut p, 40, b"swapper/1\0");
        put(&mut p, 56, &0i32.to_le_bytes());
        put(&mut p, 60, &(-1i32).to_le_bytes());
        assert_eq!(
            render(&f, &p, &no_symbols),
            "prev_comm=prog prev_pid=4242 prev_prio=120 prev_state=S|D ==> next_comm=swapper/1 next_pid=0 next_prio=-1"
        );
        put(&mut p, 32, &0i64.to_le_bytes());
        assert!(render(&f, &p, &no_symbols).contains("prev_state=R ==>"));
    }

    #[test]
    fn sys_enter_reads_array_elements_with_long_conversions() {
        let f = format(
            "raw_syscalls",
            &format!(
                "name: sys_enter\nID: 443\nformat:\n{COMMON}\
                 \tfield:long id;\toffset:8;\tsize:8;\tsigned:1;\n\
                 \tfield:unsigned long args[6];\toffset:16;\tsize:48;\tsigned:0;\n\n\
                 print fmt: \"NR %ld (%lx, %lx, %lx, %lx, %lx, %lx)\", REC->id, REC->args[0], REC->args[1], REC->args[2], REC->args[3], REC->args[4], REC->args[5]\n"
            ),
        );
        let mut p = vec![0u8; 64];
        put(&mut p, 8, &1i64.to_le_bytes());
        put(&mut p, 16, &3u64.to_le_bytes());
        put(&mut p, 24, &0x7ffd_0000_1000u64.to_le_bytes());
        put(&mut p, 32, &4096u64.to_le_bytes());
        assert_eq!(
            render(&f, &p, &no_symbols),
            "NR 1 (3, 7ffd00001000, 1000, 0, 0, 0)"
        );
    }

    #[test]
    fn widths_flags_and_negative_numbers() {
        let f = format(
            "test",
            &format!(
                "name: t\nID: 1\nformat:\n{COMMON}\
                 \tfield:int v;\toffset:8;\tsize:4;\tsigned:1;\n\
                 \tfield:char name[8];\toffset:12;\tsize:8;\tsigned:0;\n\n\
                 print fmt: \"[%5d|%-5d|%05d|%x|%#x|%-6s|%3s|%%|%c]\", REC->v, REC->v, REC->v, REC->v, 255, REC->name, REC->name, 'A'\n"
            ),
        );
        let mut p = vec![0u8; 20];
        put(&mut p, 8, &(-42i32).to_le_bytes());
        put(&mut p, 12, b"ab\0");
        assert_eq!(
            render(&f, &p, &no_symbols),
            "[  -42|-42  |-0042|ffffffd6|0xff|ab    | ab|%|A]"
        );
    }

    #[test]
    fn unknown_helpers_fall_back_to_the_fields() {
        let f = format(
            "test",
            &format!(
                "name: t\nID: 1\nformat:\n{COMMON}\
                 \tfield:unsigned int mask;\toffset:8;\tsize:4;\tsigned:0;\n\
                 \tfield:char comm[16];\toffset:12;\tsize:16;\tsigned:0;\n\n\
                 print fmt: \"mask=%s\", __get_bitmask(mask)\n"
            ),
        );
        let mut p = vec![0u8; 28];
        put(&mut p, 8, &0x30u32.to_le_bytes());
        put(&mut p, 12, b"kworker\0");
        assert_eq!(render(&f, &p, &no_symbols), "mask=0x30 comm=kworker");
    }

    #[test]
    fn truncated_payloads_never_panic() {
        let f = block_issue();
        let full = block_payload();
        for n in 0..full.len() {
            let text = render(&f, &full[..n], &no_symbols);
            assert!(n > 8 || text.contains('?'), "{n}: {text}");
        }
        // A `__data_loc` pointing past the end.
        let mut p = full.clone();
        put(&mut p, 60, &((200u32 << 16) | 60).to_le_bytes());
        assert!(render(&f, &p, &no_symbols).contains("cmd=?"));
    }

    fn int_event(print: &str) -> EventFormat {
        format(
            "test",
            &format!(
                "name: t\nID: 1\nformat:\n{COMMON}\
                 \tfield:int v;\toffset:8;\tsize:4;\tsigned:1;\n\nprint fmt: {print}\n"
            ),
        )
    }

    #[test]
    fn operators_follow_c_precedence() {
        let mut p = vec![0u8; 12];
        put(&mut p, 8, &(-5i32).to_le_bytes());
        let f = int_event(
            "\"%d %d %d %u %d %lx\", 1 + 2 * 3, (1 + 2) * 3, REC->v < 0 ? -REC->v : REC->v, (unsigned char)300, 7 % 4 << 1 == 6 && 1, ~0UL >> 60",
        );
        assert_eq!(render(&f, &p, &no_symbols), "7 9 5 44 1 f");
        // `4 / 0` is not a value: the fallback lists the fields.
        let f = int_event("\"%d\", !REC->v || 4 / 0");
        assert_eq!(render(&f, &p, &no_symbols), "v=-5");
    }
}
