//! Text of EVENT records: built-in ids (`read:`/`diff:` counters, `watch:cpu`), SDT events
//! named in `events.txt`.

use record_format::event::builtin;
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

/// State kept across the events of a replay (none is needed today: a `diff:` event stores its
/// differences itself, as uftrace writes them).
#[derive(Debug, Default)]
pub struct EventState {}

impl EventState {
    /// The comment text for event `id` with `data`, or `None` for unknown ids.
    pub fn text(
        &mut self,
        _tid: u32,
        id: u64,
        data: &[u8],
        names: &HashMap<u64, String>,
    ) -> Option<String> {
        if let Some(n) = names.get(&id) {
            return Some(n.clone());
        }
        let (name, _) = builtin(id)?;
        let v = u64s(data);
        let body = match id {
            100001..=100010 => {
                let is_read = matches!(id, 100001 | 100002 | 100005 | 100007 | 100009);
                // read ids and their diff partners: statm 1/3, page-fault 2/4, pmu pairs.
                let kind = match id {
                    100001 | 100003 => 0,
                    100002 | 100004 => 1,
                    100005 | 100006 => 2,
                    100007 | 100008 => 3,
                    _ => 4,
                };
                // `read:` events hold the counters, `diff:` ones their differences (signed).
                let vals: Vec<i64> = v.iter().map(|x| *x as i64).collect();
                let sign = |x: i64| {
                    if is_read {
                        x.to_string()
                    } else {
                        format!("{x:+}")
                    }
                };
                let g = |i: usize| vals.get(i).copied().unwrap_or(0);
                match kind {
                    0 => format!(
                        "vmsize={}KB vmrss={}KB shared={}KB",
                        sign(g(0)),
                        sign(g(1)),
                        sign(g(2))
                    ),
                    1 => format!("major={} minor={}", sign(g(0)), sign(g(1))),
                    2 if !is_read => format!(
                        "cycles={} instructions={} IPC={:.2}",
                        sign(g(0)),
                        sign(g(1)),
                        ratio(g(1), g(0))
                    ),
                    2 => format!("cycles={} instructions={}", sign(g(0)), sign(g(1))),
                    3 if !is_read => format!(
                        "refers={} misses={} hit={:.2}%",
                        sign(g(0)),
                        sign(g(1)),
                        100.0 * ratio(g(0) - g(1), g(0))
                    ),
                    3 => format!("refers={} misses={}", sign(g(0)), sign(g(1))),
                    _ if !is_read => format!(
                        "branch={} misses={} predict={:.2}%",
                        sign(g(0)),
                        sign(g(1)),
                        100.0 * ratio(g(0) - g(1), g(0))
                    ),
                    _ => format!("branch={} misses={}", sign(g(0)), sign(g(1))),
                }
            }
            100011 => {
                let cpu = data
                    .get(..4)
                    .map_or(0, |b| i32::from_le_bytes(b.try_into().unwrap_or([0; 4])));
                format!("cpu={cpu}")
            }
            _ => String::new(),
        };
        Some(if body.is_empty() {
            name.to_string()
        } else {
            format!("{name} ({body})")
        })
    }
}
