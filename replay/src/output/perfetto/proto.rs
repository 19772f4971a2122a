//! The subset of Perfetto's trace protos that `dump --perfetto` writes, declared for prost.
//!
//! Field numbers are those of Perfetto's published `.proto` files
//! (`protos/perfetto/trace/trace.proto`, `trace_packet.proto`, `track_event/*.proto`,
//! `interned_data/interned_data.proto`, `generic_kernel/generic_task_state.proto`). Only the
//! fields used here are declared; members of a `oneof` in the original are plain optional
//! fields here, which encode the same on the wire as long as one of them is set. Perfetto's
//! protos are proto2: repeated scalars are not packed, and so are declared `packed = "false"`.

/// `TracePacket.sequence_flags`: the sequence's interned data and defaults start over here.
pub const SEQ_INCREMENTAL_STATE_CLEARED: u32 = 1;
/// `TracePacket.sequence_flags`: the packet refers to interned data of its sequence.
pub const SEQ_NEEDS_INCREMENTAL_STATE: u32 = 2;

/// `TrackEvent.Type`.
pub const TYPE_SLICE_BEGIN: i32 = 1;
pub const TYPE_SLICE_END: i32 = 2;
pub const TYPE_INSTANT: i32 = 3;

/// `GenericKernelTaskStateEvent.TaskStateEnum`.
pub const TASK_STATE_RUNNABLE: i32 = 2;
pub const TASK_STATE_RUNNING: i32 = 3;
pub const TASK_STATE_INTERRUPTIBLE_SLEEP: i32 = 4;

/// `Trace.packet`: the output is a stream of this field, one length-delimited packet each.
pub const TRACE_PACKET_FIELD: u32 = 1;

/// The whole trace; written packet by packet, never built.
#[derive(Clone, PartialEq, prost::Message)]
pub struct Trace {
    #[prost(message, repeated, tag = "1")]
    pub packet: Vec<TracePacket>,
}

#[derive(Clone, PartialEq, prost::Message)]
pub struct TracePacket {
    #[prost(uint64, optional, tag = "8")]
    pub timestamp: Option<u64>,
    #[prost(uint32, optional, tag = "10")]
    pub trusted_packet_sequence_id: Option<u32>,
    #[prost(message, optional, tag = "11")]
    pub track_event: Option<TrackEvent>,
    #[prost(message, optional, tag = "12")]
    pub interned_data: Option<InternedData>,
    #[prost(uint32, optional, tag = "13")]
    pub sequence_flags: Option<u32>,
    #[prost(message, optional, tag = "59")]
    pub trace_packet_defaults: Option<TracePacketDefaults>,
    #[prost(message, optional, tag = "60")]
    pub track_descriptor: Option<TrackDescriptor>,
    #[prost(bool, optional, tag = "87")]
    pub first_packet_on_sequence: Option<bool>,
    #[prost(message, optional, tag = "117")]
    pub generic_kernel_task_state_event: Option<GenericKernelTaskStateEvent>,
}

#[derive(Clone, PartialEq, prost::Message)]
pub struct TrackEvent {
    #[prost(uint64, repeated, packed = "false", tag = "3")]
    pub category_iids: Vec<u64>,
    #[prost(message, repeated, tag = "4")]
    pub debug_annotations: Vec<DebugAnnotation>,
    #[prost(int32, optional, tag = "9")]
    pub r#type: Option<i32>,
    #[prost(uint64, optional, tag = "10")]
    pub name_iid: Option<u64>,
    #[prost(uint64, optional, tag = "11")]
    pub track_uuid: Option<u64>,
    #[prost(string, optional, tag = "23")]
    pub name: Option<String>,
    #[prost(uint64, optional, tag = "34")]
    pub source_location_iid: Option<u64>,
    #[prost(fixed64, repeated, packed = "false", tag = "47")]
    pub flow_ids: Vec<u64>,
    #[prost(fixed64, repeated, packed = "false", tag = "48")]
    pub terminating_flow_ids: Vec<u64>,
}

#[derive(Clone, PartialEq, prost::Message)]
pub struct DebugAnnotation {
    #[prost(uint64, optional, tag = "1")]
    pub name_iid: Option<u64>,
    #[prost(string, optional, tag = "6")]
    pub string_value: Option<String>,
}

#[derive(Clone, PartialEq, prost::Message)]
pub struct InternedData {
    #[prost(message, repeated, tag = "1")]
    pub event_categories: Vec<InternedName>,
    #[prost(message, repeated, tag = "2")]
    pub event_names: Vec<InternedName>,
    #[prost(message, repeated, tag = "3")]
    pub debug_annotation_names: Vec<InternedName>,
    #[prost(message, repeated, tag = "4")]
    pub source_locations: Vec<SourceLocation>,
}

/// `EventCategory`, `EventName` and `DebugAnnotationName` have the same two fields.
#[derive(Clone, PartialEq, prost::Message)]
pub struct InternedName {
    #[prost(uint64, optional, tag = "1")]
    pub iid: Option<u64>,
    #[prost(string, optional, tag = "2")]
    pub name: Option<String>,
}

#[derive(Clone, PartialEq, prost::Message)]
pub struct SourceLocation {
    #[prost(uint64, optional, tag = "1")]
    pub iid: Option<u64>,
    #[prost(string, optional, tag = "2")]
    pub file_name: Option<String>,
    #[prost(string, optional, tag = "3")]
    pub function_name: Option<String>,
    #[prost(uint32, optional, tag = "4")]
    pub line_number: Option<u32>,
}

#[derive(Clone, PartialEq, prost::Message)]
pub struct TracePacketDefaults {
    #[prost(message, optional, tag = "11")]
    pub track_event_defaults: Option<TrackEventDefaults>,
}

#[derive(Clone, PartialEq, prost::Message)]
pub struct TrackEventDefaults {
    #[prost(uint64, optional, tag = "11")]
    pub track_uuid: Option<u64>,
}

#[derive(Clone, PartialEq, prost::Message)]
pub struct TrackDescriptor {
    #[prost(uint64, optional, tag = "1")]
    pub uuid: Option<u64>,
    #[prost(string, optional, tag = "2")]
    pub name: Option<String>,
    #[prost(message, optional, tag = "3")]
    pub process: Option<ProcessDescriptor>,
    #[prost(message, optional, tag = "4")]
    pub thread: Option<ThreadDescriptor>,
    #[prost(uint64, optional, tag = "5")]
    pub parent_uuid: Option<u64>,
}

#[derive(Clone, PartialEq, prost::Message)]
pub struct ProcessDescriptor {
    #[prost(int32, optional, tag = "1")]
    pub pid: Option<i32>,
    #[prost(string, repeated, tag = "2")]
    pub cmdline: Vec<String>,
    #[prost(string, optional, tag = "6")]
    pub process_name: Option<String>,
}

#[derive(Clone, PartialEq, prost::Message)]
pub struct ThreadDescriptor {
    #[prost(int32, optional, tag = "1")]
    pub pid: Option<i32>,
    #[prost(int32, optional, tag = "2")]
    pub tid: Option<i32>,
    #[prost(string, optional, tag = "5")]
    pub thread_name: Option<String>,
}

#[derive(Clone, PartialEq, prost::Message)]
pub struct GenericKernelTaskStateEvent {
    #[prost(int32, optional, tag = "1")]
    pub cpu: Option<i32>,
    #[prost(string, optional, tag = "2")]
    pub comm: Option<String>,
    #[prost(int64, optional, tag = "3")]
    pub tid: Option<i64>,
    #[prost(int32, optional, tag = "4")]
    pub state: Option<i32>,
}
