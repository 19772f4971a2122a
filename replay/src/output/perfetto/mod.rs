//! `dump --perfetto`: Perfetto's native protobuf trace (a `Trace`, whose packets are written
//! one by one as its field 1, so the output is a stream), for the Perfetto UI and its trace
//! processor at any trace size.
//!
//! ```text
//! timed::Walk ── Call (entry/exit) ──▶ TrackEvent SLICE_BEGIN / SLICE_END on the task's track
//!             ── EventCall ─────────▶ TrackEvent INSTANT
//! perf-cpu*.dat ── tracks::Switches ─▶ GenericKernelTaskStateEvent (thread state strip)
//! FlowHook ── FlowIds ──────────────▶ flow_ids / terminating_flow_ids of slices and instants
//! ```
//!
//! Layout of the output:
//! * sequence 1: a `TrackDescriptor` per process and one per task (its thread), then the
//!   thread states, with their own timestamps;
//! * one packet sequence per task (`trusted_packet_sequence_id` = 2 + task index), whose
//!   first packet clears the incremental state and sets the sequence's default track (the
//!   task's), so its events carry no track id. Function and event names, annotation names and
//!   source locations are interned per sequence (`InternedData`) the first time the sequence
//!   uses them: a function's name iid is its id + 1.
//! * timestamps are the recorded ones, in nanoseconds;
//! * arguments and return values are debug annotations `args` and `retval` of the slice
//!   (the return value given with the slice's end, which the trace processor adds to the
//!   slice), an event's fields the annotation `fields` of its instant; a function's source
//!   location (`file:line` of the recording's debug info) is the slice's interned
//!   `SourceLocation`;
//! * kernel functions and tracepoints (`-k`) are in the same tracks, with category `kernel`.
//!
//! Memory is per task (its sequence's interned ids as bit sets, its open slice count) and per
//! function name met, never per record: the packets are encoded into one reused buffer.

pub mod flows;
mod interning;
pub mod io_flows;
mod packets;
pub mod proto;
pub mod tracks;

use super::dump::{write_notices, DumpOptions};
use crate::config::Config;
use crate::walk::timed::{Call, EventCall, Sink, Walk};
use crate::Result;
use flows::{Anchor, FlowHook, FlowIds, Hooks, Spawns};
use interning::{interned_empty, interned_name, source_location, split_event, Bits};
use io_flows::IoFlows;
use packets::{seq_field, template, Packets};
use proto::*;
use record_format::TraceDir;
use std::collections::HashMap;
use std::io::{self, Write};
use tracks::{Switch, Switches, THREAD_UUID};

/// Interned debug annotation names and categories, the same in every sequence.
const ANN_ARGS: u64 = 1;
const ANN_RETVAL: u64 = 2;
const ANN_FIELDS: u64 = 3;
const CAT_KERNEL: u64 = 1;
/// Event names are interned after the function names: iid EVENT_IID + n.
const EVENT_IID: u64 = 1 << 40;
/// Flow ids of the shipped [`Spawns`] hook start here.
const SPAWN_FLOW_BASE: u64 = 1;
/// Flow ids of the I/O requests ([`IoFlows`]) start here.
const IO_FLOW_BASE: u64 = 1 << 48;

/// One task's packet sequence.
#[derive(Debug, Default)]
struct Seq {
    started: bool,
    /// Its `trusted_packet_sequence_id` field, encoded.
    field: Vec<u8>,
    /// Function ids whose name (and location) this sequence interned.
    names: Bits,
    /// Event names interned (iid - EVENT_IID).
    events: Bits,
    /// Slices begun and not ended.
    open: u32,
}

struct Writer<'w, 'h> {
    out: Packets<'w>,
    /// The packet of the track events, whose `track_event` is always set (kept for the
    /// buffers of its fields).
    pkt: TracePacket,
    /// The interned data of the packet being built.
    interned: InternedData,
    /// An annotation not in use (kept for its string buffer).
    spare: Option<DebugAnnotation>,
    seqs: Vec<Seq>,
    /// Per task: its name and tid (thread states carry them).
    tasks: Vec<(String, u32)>,
    event_iids: HashMap<String, u64>,
    /// Per function: its source location once looked up (`Some(None)`: it has none).
    locs: Vec<Option<Option<SourceLocation>>>,
    /// Per function: the fields of its slice begin but the time and sequence, encoded (empty
    /// until needed); the same for every slice end.
    begins: Vec<Vec<u8>>,
    end: Vec<u8>,
    flows: &'h mut dyn FlowHook,
    ids: FlowIds,
    switches: Option<Switches>,
    /// The time of the next switch (`u64::MAX`: none).
    next_switch: u64,
    lost: u64,
}

impl Writer<'_, '_> {
    /// The track event being built.
    fn ev(&mut self) -> &mut TrackEvent {
        self.pkt.track_event.get_or_insert_with(TrackEvent::default)
    }

    /// Writes the thread states up to `time`.
    #[inline]
    fn states_until(&mut self, time: u64) -> io::Result<()> {
        if time < self.next_switch {
            return Ok(());
        }
        while let Some(s) = self.switches.as_mut().and_then(|w| w.next_until(time)) {
            self.state(s)?;
        }
        self.next_switch = self.switches.as_ref().map_or(u64::MAX, Switches::next_time);
        Ok(())
    }

    fn state(&mut self, s: Switch) -> io::Result<()> {
        let (comm, tid) = self.tasks.get(s.task).cloned().unwrap_or_default();
        tracks::state(&mut self.out, &s, comm, tid)
    }

    /// Starts the packet of an event of task `task` at `time` on the task's sequence; the
    /// sequence's first packet clears its state and sets its track.
    fn begin(&mut self, task: usize, time: u64) {
        let p = &mut self.pkt;
        p.timestamp = Some(time);
        p.trusted_packet_sequence_id = Some(2 + task as u32);
        let seq = &mut self.seqs[task];
        if seq.started {
            p.sequence_flags = Some(SEQ_NEEDS_INCREMENTAL_STATE);
            p.first_packet_on_sequence = None;
            p.trace_packet_defaults = None;
            return;
        }
        seq.started = true;
        p.sequence_flags = Some(SEQ_INCREMENTAL_STATE_CLEARED | SEQ_NEEDS_INCREMENTAL_STATE);
        p.first_packet_on_sequence = Some(true);
        p.trace_packet_defaults = Some(TracePacketDefaults {
            track_event_defaults: Some(TrackEventDefaults {
                track_uuid: Some(THREAD_UUID + task as u64),
            }),
        });
        let i = &mut self.interned;
        for (iid, name) in [
            (ANN_ARGS, "args"),
            (ANN_RETVAL, "retval"),
            (ANN_FIELDS, "fields"),
        ] {
            i.debug_annotation_names.push(interned_name(iid, name));
        }
        i.event_categories.push(interned_name(CAT_KERNEL, "kernel"));
    }

    /// Sets annotation `iid` of the event to `value`, or none.
    fn annotate(&mut self, iid: u64, value: Option<&str>) {
        let spare = &mut self.spare;
        let anns = &mut self
            .pkt
            .track_event
            .get_or_insert_with(TrackEvent::default)
            .debug_annotations;
        match value {
            Some(v) => {
                let mut a = anns.pop().or_else(|| spare.take()).unwrap_or_default();
                a.name_iid = Some(iid);
                let s = a.string_value.get_or_insert_with(String::new);
                s.clear();
                s.push_str(v);
                anns.push(a);
            }
            None => {
                if let Some(a) = anns.pop() {
                    *spare = Some(a);
                }
            }
        }
    }

    /// Writes the packet begun with [`Writer::begin`] with the event and flows set.
    fn finish(&mut self) -> io::Result<()> {
        let ev = self.pkt.track_event.get_or_insert_with(TrackEvent::default);
        ev.flow_ids.clear();
        ev.flow_ids.extend_from_slice(&self.ids.flows);
        ev.terminating_flow_ids.clear();
        ev.terminating_flow_ids
            .extend_from_slice(&self.ids.terminating);
        if interned_empty(&self.interned) {
            return self.out.put(&self.pkt);
        }
        self.pkt.interned_data = Some(std::mem::take(&mut self.interned));
        let r = self.out.put(&self.pkt);
        if let Some(mut i) = self.pkt.interned_data.take() {
            i.event_names.clear();
            i.debug_annotation_names.clear();
            i.source_locations.clear();
            i.event_categories.clear();
            self.interned = i;
        }
        r
    }

    /// The iid of event name `name` (interned in every sequence that uses it).
    fn event_iid(&mut self, name: &str) -> u64 {
        if let Some(&iid) = self.event_iids.get(name) {
            return iid;
        }
        let iid = EVENT_IID + self.event_iids.len() as u64;
        self.event_iids.insert(name.to_string(), iid);
        iid
    }
}

impl Sink for Writer<'_, '_> {
    fn wants_args(&self) -> bool {
        true
    }

    fn wants_events(&self) -> bool {
        true
    }

    fn wants_srcline(&mut self, func: crate::symbols::FuncId) -> bool {
        self.locs.get(func as usize).is_none_or(|l| l.is_none())
    }

    fn call(&mut self, c: &Call<'_>) -> io::Result<()> {
        self.states_until(c.time)?;
        let task = c.task;
        if task >= self.seqs.len() {
            return Ok(());
        }
        self.ids.clear();
        if c.exit {
            // An exit whose entry was not written (a fork child's first return) ends nothing.
            if self.seqs[task].open == 0 {
                return Ok(());
            }
            self.seqs[task].open -= 1;
            let at = Anchor::SliceEnd {
                task,
                tid: c.tid,
                time: c.time,
                func: c.func,
                name: c.name,
                retval: c.args,
                kernel: c.module == "[kernel]",
            };
            self.flows.flows(&at, &mut self.ids);
            if c.args.is_none() && self.ids.is_empty() && self.seqs[task].started {
                return self
                    .out
                    .put_parts(&self.seqs[task].field, c.time, &self.end);
            }
            self.begin(task, c.time);
            let ev = self.ev();
            ev.r#type = Some(TYPE_SLICE_END);
            ev.name_iid = None;
            ev.category_iids.clear();
            ev.source_location_iid = None;
            self.annotate(ANN_RETVAL, c.args);
            return self.finish();
        }
        self.seqs[task].open += 1;
        let started = self.seqs[task].started;
        let iid = match c.func {
            Some(f) => {
                let iid = u64::from(f) + 1;
                let fi = f as usize;
                if self.locs.len() <= fi {
                    self.locs.resize(fi + 1, None);
                }
                if self.locs[fi].is_none() {
                    let loc = c.srcline.map(|l| source_location(iid, c.name, l));
                    self.locs[fi] = Some(loc);
                }
                if self.seqs[task].names.insert(iid) {
                    self.interned.event_names.push(interned_name(iid, c.name));
                    if let Some(Some(l)) = &self.locs[fi] {
                        self.interned.source_locations.push(l.clone());
                    }
                }
                (iid, matches!(self.locs[fi], Some(Some(_))))
            }
            None => (self.event_name(task, c.name), false),
        };
        let (iid, located) = iid;
        let kernel = c.module == "[kernel]";
        let at = Anchor::Slice {
            task,
            tid: c.tid,
            time: c.time,
            func: c.func,
            name: c.name,
            args: c.args,
            kernel,
        };
        self.flows.flows(&at, &mut self.ids);
        if let Some(f) = c.func.filter(|_| {
            started && c.args.is_none() && self.ids.is_empty() && interned_empty(&self.interned)
        }) {
            let fi = f as usize;
            if self.begins.len() <= fi {
                self.begins.resize(fi + 1, Vec::new());
            }
            if self.begins[fi].is_empty() {
                self.begins[fi] = template(&TrackEvent {
                    r#type: Some(TYPE_SLICE_BEGIN),
                    name_iid: Some(iid),
                    source_location_iid: located.then_some(iid),
                    category_iids: if kernel { vec![CAT_KERNEL] } else { Vec::new() },
                    ..Default::default()
                });
            }
            return self
                .out
                .put_parts(&self.seqs[task].field, c.time, &self.begins[fi]);
        }
        self.begin(task, c.time);
        let ev = self.ev();
        ev.r#type = Some(TYPE_SLICE_BEGIN);
        ev.name_iid = Some(iid);
        ev.source_location_iid = located.then_some(iid);
        ev.category_iids.clear();
        if kernel {
            ev.category_iids.push(CAT_KERNEL);
        }
        self.annotate(ANN_ARGS, c.args);
        self.finish()
    }

    fn event(&mut self, e: &EventCall<'_>) -> io::Result<()> {
        self.states_until(e.time)?;
        let task = e.task;
        if task >= self.seqs.len() {
            return Ok(());
        }
        self.ids.clear();
        self.begin(task, e.time);
        let (name, fields) = split_event(e.text);
        let iid = self.event_name(task, name);
        let ev = self.ev();
        ev.r#type = Some(TYPE_INSTANT);
        ev.name_iid = Some(iid);
        ev.source_location_iid = None;
        ev.category_iids.clear();
        if e.kernel {
            ev.category_iids.push(CAT_KERNEL);
        }
        self.annotate(ANN_FIELDS, fields);
        let at = Anchor::Instant {
            task,
            tid: e.tid,
            time: e.time,
            text: e.text,
            kernel: e.kernel,
        };
        self.flows.flows(&at, &mut self.ids);
        self.finish()
    }

    fn lost(&mut self) {
        self.lost += 1;
    }
}

impl Writer<'_, '_> {
    /// The iid of event name `name`, interned in `task`'s sequence if it was not yet.
    fn event_name(&mut self, task: usize, name: &str) -> u64 {
        let iid = self.event_iid(name);
        if self.seqs[task].events.insert(iid - EVENT_IID) {
            self.interned.event_names.push(interned_name(iid, name));
        }
        iid
    }
}

/// Writes the Perfetto trace of `dir`, with the flows of the shipped hooks (a thread or
/// process creation to the created task's first slice; each I/O request of a `-k` trace from
/// its submission through the block layer and the device to its reaping); returns the
/// warnings.
pub fn dump(
    dir: &TraceDir,
    cfg: &Config,
    opts: &DumpOptions,
    out: &mut dyn Write,
    warn: &mut dyn FnMut(&str),
) -> Result<Vec<String>> {
    let mut spawns = Spawns::new(dir, SPAWN_FLOW_BASE);
    let mut io = IoFlows::new(dir, cfg, IO_FLOW_BASE)?;
    let mut hooks = Hooks(vec![&mut spawns, &mut io]);
    dump_with_flows(dir, cfg, opts, out, warn, &mut hooks)
}

/// [`dump`] with the flows `flows` names.
pub fn dump_with_flows(
    dir: &TraceDir,
    cfg: &Config,
    opts: &DumpOptions,
    out: &mut dyn Write,
    warn: &mut dyn FnMut(&str),
    flows: &mut dyn FlowHook,
) -> Result<Vec<String>> {
    // Source locations whenever the recording has them.
    let cfg = Config {
        srcline: true,
        ..cfg.clone()
    };
    let walk = Walk::with_sched(dir, &cfg, opts.no_args, false);
    // The output is binary: the notices go with the warnings.
    let mut notices = Vec::new();
    write_notices(&mut notices, &walk.notices)?;
    for line in String::from_utf8_lossy(&notices).lines() {
        warn(line);
    }
    let tasks: Vec<(String, u32)> = walk
        .tasks()
        .iter()
        .map(|t| (t.comm.clone(), t.tid))
        .collect();
    let show_states = !(cfg.no_sched || cfg.no_event);
    let switches = show_states.then(|| {
        let allowed = tasks
            .iter()
            .map(|(_, tid)| cfg.tids.is_empty() || cfg.tids.contains(tid))
            .collect();
        Switches::new(dir, allowed)
    });
    let mut w = Writer {
        out: Packets {
            out,
            buf: vec![0; packets::BUFFER],
            len: 0,
        },
        pkt: TracePacket {
            track_event: Some(TrackEvent::default()),
            ..Default::default()
        },
        interned: InternedData::default(),
        spare: None,
        seqs: (0..tasks.len())
            .map(|i| Seq {
                field: seq_field(2 + i as u32),
                ..Seq::default()
            })
            .collect(),
        tasks,
        event_iids: HashMap::new(),
        locs: Vec::new(),
        begins: Vec::new(),
        end: template(&TrackEvent {
            r#type: Some(TYPE_SLICE_END),
            ..Default::default()
        }),
        flows,
        ids: FlowIds::default(),
        next_switch: switches.as_ref().map_or(u64::MAX, Switches::next_time),
        switches,
        lost: 0,
    };
    tracks::descriptors(&mut w.out, walk.tasks())?;
    let warnings = walk.run(&mut w)?;
    w.states_until(u64::MAX)?;
    w.out.flush()?;
    if w.lost > 0 {
        warn(&format!(
            "Some of function trace records are lost. ({} times shown)",
            w.lost
        ));
    }
    Ok(warnings)
}

#[cfg(test)]
mod tests {
    use super::*;
    use prost::Message;

    /// A hook of the kind an I/O request linker is: a flow begun at one slice, ended at the
    /// end of another.
    struct MainToAtoi;

    impl FlowHook for MainToAtoi {
        fn flows(&mut self, at: &Anchor<'_>, ids: &mut FlowIds) {
            match *at {
                Anchor::Slice { name: "main", .. } => ids.flow(77),
                Anchor::SliceEnd { name: "atoi", .. } => ids.terminate(77),
                _ => {}
            }
        }
    }

    #[test]
    fn a_hook_flows_reach_begins_and_ends() {
        let path =
            std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../tests/fixtures/fib-args");
        let dir = TraceDir::open(&path).unwrap();
        let mut out = Vec::new();
        let opts = DumpOptions::default();
        dump_with_flows(
            &dir,
            &Config::default(),
            &opts,
            &mut out,
            &mut |_| {},
            &mut MainToAtoi,
        )
        .unwrap();
        let trace = Trace::decode(out.as_slice()).unwrap();
        let events: Vec<&TrackEvent> = trace
            .packet
            .iter()
            .filter_map(|p| p.track_event.as_ref())
            .collect();
        let begun: Vec<_> = events.iter().filter(|e| e.flow_ids == [77]).collect();
        let ended: Vec<_> = events
            .iter()
            .filter(|e| e.terminating_flow_ids == [77])
            .collect();
        assert_eq!((begun.len(), ended.len()), (1, 1));
        assert_eq!(begun[0].r#type, Some(TYPE_SLICE_BEGIN));
        assert_eq!(ended[0].r#type, Some(TYPE_SLICE_END));
        // Every begin has its end.
        let count = |t| events.iter().filter(|e| e.r#type == Some(t)).count();
        assert_eq!(count(TYPE_SLICE_BEGIN), count(TYPE_SLICE_END));
    }
}
