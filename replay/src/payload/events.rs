//! Text of EVENT records: built-in ids (`read:`/`diff:` counters, `watch:cpu`), SDT events
//! named in `events.txt`.

use record_format::event::{builtin, counter};
use std::collections::HashMap;

/// `a / b`, 0 when `b` is 0.
fn ratio(a: i64, b: i64) -> f64 {
    if b == 0 {
        0.0
    } else {
        a as f64 / b as f64
    }
}

fn u64s(data: &[u8]) -> Vec<u64> {
    data.chunks_exact(8)
        .map(|c| u64::from_le_bytes(c.try_into().unwrap_or([0; 8])))
        .collect()
}

/// The comment text for event `id` with `data`, or `None` for unknown ids: a name from
/// `events.txt`, or a built-in event with its values (`read:` counters as they are, `diff:`
/// ones signed, PMU differences with their ratio).
pub fn text(id: u64, data: &[u8], names: &HashMap<u64, String>) -> Option<String> {
    if let Some(n) = names.get(&id) {
        return Some(n.clone());
    }
    let (name, _) = builtin(id)?;
    let body = if let Some((is_read, fields, unit)) = counter(id) {
        let v: Vec<i64> = u64s(data).iter().map(|x| *x as i64).collect();
        let g = |i: usize| v.get(i).copied().unwrap_or(0);
        let mut body = counter_values(&v, fields, unit, !is_read);
        if !is_read {
            match id {
                100006 => body.push_str(&format!(" IPC={:.2}", ratio(g(1), g(0)))),
                100008 => body.push_str(&format!(" hit={:.2}%", 100.0 * ratio(g(0) - g(1), g(0)))),
                100010 => body.push_str(&format!(
                    " predict={:.2}%",
                    100.0 * ratio(g(0) - g(1), g(0))
                )),
                _ => {}
            }
        }
        body
    } else if id == 100011 {
        let cpu = data
            .get(..4)
            .map_or(0, |b| i32::from_le_bytes(b.try_into().unwrap_or([0; 4])));
        format!("cpu={cpu}")
    } else {
        String::new()
    };
    Some(if body.is_empty() {
        name.to_string()
    } else {
        format!("{name} ({body})")
    })
}

/// `vmsize=1KB vmrss=2KB ...`: the values of a counter event, with a sign when `signed`.
pub fn counter_values(v: &[i64], fields: &[&str], unit: &str, signed: bool) -> String {
    let mut out = String::new();
    for (i, f) in fields.iter().enumerate() {
        let x = v.get(i).copied().unwrap_or(0);
        if i > 0 {
            out.push(' ');
        }
        match signed {
            true => out.push_str(&format!("{f}={x:+}{unit}")),
            false => out.push_str(&format!("{f}={x}{unit}")),
        }
    }
    out
}
