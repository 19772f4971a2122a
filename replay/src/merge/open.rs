//! Building a [`Merge`]: the kernel records sorted to their tasks, a cursor per task, and
//! the symbolizer, specs, filters and gate that [`open_merge`] sets up from a [`Config`].

use super::gate::Gate;
use super::{outside, parse_extern, Cursor, Merge};
use crate::config::{Config, KernelView};
use crate::filter::Filters;
use crate::specs::Specs;
use crate::symbols::Symbolizer;
use record_format::dir::{GraphRecord, KernelRecords};
use record_format::{RecordKind, TraceDir};
use std::collections::{BinaryHeap, HashMap};

/// The records of `kernel`, by task index (`tids`: the tasks' tids), each in time order; the
/// events' texts stay in the returned [`KernelRecords`]; problems go to `warnings`.
fn kernel_records(
    kernel: &record_format::dir::KernelData,
    tids: &[u32],
    warnings: &mut Vec<String>,
) -> (Vec<Vec<GraphRecord>>, KernelRecords) {
    let mut out = vec![Vec::new(); tids.len()];
    let task_of: HashMap<u32, usize> = tids.iter().enumerate().map(|(i, &t)| (t, i)).collect();
    let mut recs = kernel.graph_records();
    warnings.append(&mut recs.problems);
    for cpu in std::mem::take(&mut recs.cpus) {
        for r in cpu {
            let tid = recs.owner(&r, |t| task_of.contains_key(&t));
            if let Some(&ti) = task_of.get(&tid) {
                out[ti].push(GraphRecord { tid, ..r });
            }
        }
    }
    for recs in &mut out {
        recs.sort_by_key(|r| r.time);
    }
    let lost = kernel.lost_events();
    if lost > 0 {
        warnings.push(format!(
            "the kernel lost {lost} events while recording: some kernel calls are missing"
        ));
    }
    (out, recs)
}

impl<'d> Merge<'d> {
    pub fn new(
        dir: &'d TraceDir,
        sym: Symbolizer<'d>,
        specs: Specs,
        filters: Filters,
        gate: Gate,
        kernel_view: KernelView,
    ) -> Merge<'d> {
        let cursors: Vec<Cursor<'d>> = dir
            .data
            .iter()
            .map(|d| Cursor {
                file: d,
                released: 0,
                tid: d.tid,
                bytes: d.bytes(),
                pos: 0,
                last_time: 0,
                session: None,
                sess_from: 1,
                sess_until: 0,
                first_session: None,
                memo: (0, None, 0),
                kernel: Vec::new(),
                kpos: 0,
                user_depth: 0,
                outside: outside::Outside::default(),
            })
            .collect();
        let n = cursors.len();
        let mut warnings = Vec::new();
        let mut cursors = cursors;
        let mut kernel_events = KernelRecords::default();
        if let Some(k) = &dir.kernel {
            let tids: Vec<u32> = cursors.iter().map(|c| c.tid).collect();
            let (by_task, events) = kernel_records(k, &tids, &mut warnings);
            for (c, recs) in cursors.iter_mut().zip(by_task) {
                c.kernel = recs;
            }
            kernel_events = events;
        }
        let mut event_names = HashMap::new();
        if let Some(t) = dir.read_text("events.txt") {
            event_names.extend(record_format::sdt::parse_events_txt(&t));
        }
        let mut m = Merge {
            sym,
            specs,
            filters,
            decided: Vec::new(),
            gate,
            cursors,
            heads: vec![None; n],
            heap: BinaryHeap::with_capacity(n),
            current: None,
            externs: dir
                .extern_data
                .as_deref()
                .map(parse_extern)
                .unwrap_or_default(),
            ext_pos: 0,
            event_names,
            kernel_events,
            kernel_view,
            plain: false,
            first_time: u64::MAX,
            user_passed_over: false,
            warnings,
        };
        m.gate.init(n);
        m.update_plain();
        for i in 0..n {
            m.load(i);
        }
        m.first_time = m
            .heads
            .iter()
            .flatten()
            .filter(|h| h.raw.kind != RecordKind::Lost)
            .map(|h| h.raw.time)
            .min()
            .unwrap_or(0);
        m
    }
}

/// The symbolizer, specs and filters of `dir` in a [`Merge`], with the `Usage:` notices they
/// produced.
pub(crate) fn open_merge<'d>(dir: &'d TraceDir, cfg: &Config) -> (Merge<'d>, Vec<String>) {
    let mut sym = Symbolizer::new(dir, cfg.demangle);
    if cfg.srcline || !cfg.loc_filters.is_empty() {
        sym.load_srclines();
    }
    let mut specs = Specs::new(dir);
    specs.select(&cfg.args, &cfg.retvals, cfg.match_type);
    let mut filters = Filters::new(cfg);
    let mut notices: Vec<String> = specs.notices.clone();
    notices.append(&mut filters.notices);
    let mut hints = Vec::new();
    let any_filter = !filters.is_empty();
    if any_filter || specs.has_selection() {
        let ids = sym.all_functions();
        if !filters.loc.is_empty() {
            filters.check_locations(ids.iter().filter_map(|&i| Some(sym.srcline(i)?.file())));
        }
        let funcs: Vec<_> = ids.iter().map(|&i| sym.func(i)).collect();
        if any_filter {
            if let Some(msg) = filters.check(&funcs, specs.binds_any(&funcs)) {
                notices.push(msg);
            }
        }
        hints = specs.selection_hints(&funcs);
    }
    let gate = Gate::new(
        cfg.time_filter,
        filters.has_time_trigger(),
        filters.has_caller,
    );
    let mut merge = Merge::new(dir, sym, specs, filters, gate, cfg.kernel);
    merge.warnings.extend(hints);
    (merge, notices)
}
