//! What the merge hands to consumers other than the call graph (`script`, `report --io`):
//! the decoded argument values of a record and the kernel tracepoint records by index.

use super::{Head, Merge};
use crate::symbols::FuncId;
use record_format::argspec::{decode_payload, ArgItem, ArgValue};

impl Merge<'_> {
    /// The values recorded in the payload of `h` (the arguments of an entry, the return
    /// value of an exit), a record of task `ti`, with the items of `func`'s spec they were
    /// recorded by; `None` when none were recorded or the payload does not decode.
    pub fn arg_values(
        &mut self,
        ti: usize,
        func: FuncId,
        h: &Head,
        ret: bool,
    ) -> Option<(&[ArgItem], Vec<ArgValue>)> {
        if !h.raw.more {
            return None;
        }
        let payload = self.payload(ti, h.payload);
        let spec = self.specs.get(func, self.sym.func(func));
        let items: &[ArgItem] = if ret { spec.ret.as_slice() } else { &spec.args };
        let refs: Vec<&ArgItem> = items.iter().collect();
        let values = decode_payload(&refs, payload)?;
        Some((items, values))
    }

    /// Kernel event `i` (a [`Head::kernel_event`]): its format and its record.
    pub fn kernel_event(&self, i: u32) -> Option<(&record_format::kernel::EventFormat, &[u8])> {
        let e = self.kernel_events.events.get(i as usize)?;
        Some((self.kernel_events.formats.get(e.format)?, &e.payload))
    }
}
