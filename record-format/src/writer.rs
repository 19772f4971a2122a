//! `TraceWriter`: writes a data directory in uftrace's format (file version 4, v0.13 flavour).

use crate::argspec::{encode_payload, ArgItem, ArgValue};
use crate::error::{FormatError, Result};
use crate::info::Info;
use crate::maps::MapEntry;
use crate::raw::{event_payload_size, RawRecord, RecordKind};
use crate::sym::{write_sym, Symbol};
use crate::task::TaskLine;
use std::collections::BTreeMap;
use std::fs::{self, File, OpenOptions};
use std::io::{BufWriter, Write};
use std::path::{Path, PathBuf};

/// Writes the files of one data directory.
#[derive(Debug)]
pub struct TraceWriter {
    dir: PathBuf,
    task_txt: BufWriter<File>,
    dat: BTreeMap<u32, BufWriter<File>>,
}

impl TraceWriter {
    /// Creates `dir` (which must not exist yet) and an empty `task.txt` and `default.opts`.
    pub fn create(dir: &Path) -> Result<TraceWriter> {
        fs::create_dir(dir).map_err(|e| FormatError::io(dir, e))?;
        Self::open(dir)
    }

    /// Opens an existing directory for appending.
    pub fn open(dir: &Path) -> Result<TraceWriter> {
        let p = dir.join("task.txt");
        let task = OpenOptions::new()
            .create(true)
            .append(true)
            .open(&p)
            .map_err(|e| FormatError::io(&p, e))?;
        let opts = dir.join("default.opts");
        if !opts.exists() {
            File::create(&opts).map_err(|e| FormatError::io(&opts, e))?;
        }
        Ok(TraceWriter {
            dir: dir.to_path_buf(),
            task_txt: BufWriter::new(task),
            dat: BTreeMap::new(),
        })
    }

    pub fn dir(&self) -> &Path {
        &self.dir
    }

    fn write_file(&self, name: &str, data: &[u8]) -> Result<()> {
        let p = self.dir.join(name);
        fs::write(&p, data).map_err(|e| FormatError::io(&p, e))
    }

    pub fn task_line(&mut self, line: &TaskLine) -> Result<()> {
        writeln!(self.task_txt, "{line}").map_err(|e| FormatError::io(self.dir.join("task.txt"), e))
    }

    pub fn session_map(&self, sid: &str, maps: &[MapEntry]) -> Result<()> {
        let text: String = maps.iter().map(|m| format!("{m}\n")).collect();
        self.write_file(&format!("sid-{sid}.map"), text.as_bytes())
    }

    pub fn sym_file(
        &self,
        file_name: &str,
        path_name: &str,
        build_id: Option<&str>,
        syms: &[Symbol],
    ) -> Result<()> {
        self.write_file(file_name, write_sym(path_name, build_id, syms).as_bytes())
    }

    pub fn default_opts(&self, text: &str) -> Result<()> {
        self.write_file("default.opts", text.as_bytes())
    }

    fn dat(&mut self, tid: u32) -> Result<&mut BufWriter<File>> {
        if !self.dat.contains_key(&tid) {
            let p = self.dir.join(format!("{tid}.dat"));
            let f = OpenOptions::new()
                .create(true)
                .append(true)
                .open(&p)
                .map_err(|e| FormatError::io(&p, e))?;
            self.dat.insert(tid, BufWriter::new(f));
        }
        Ok(self.dat.get_mut(&tid).expect("inserted above"))
    }

    /// Appends a function record, with an argument or return-value payload when `values` is
    /// not empty.
    /// `rec.more` is derived from `values`.
    pub fn func_record(
        &mut self,
        tid: u32,
        rec: RawRecord,
        items: &[&ArgItem],
        values: &[ArgValue],
    ) -> Result<()> {
        let rec = RawRecord {
            more: !values.is_empty(),
            ..rec
        };
        let mut buf = rec.encode().to_vec();
        if !values.is_empty() {
            encode_payload(items, values, &mut buf);
        }
        let path = self.dir.join(format!("{tid}.dat"));
        self.dat(tid)?
            .write_all(&buf)
            .map_err(|e| FormatError::io(path, e))
    }

    /// Appends an EVENT record with optional data.
    pub fn event_record(&mut self, tid: u32, time: u64, id: u64, data: &[u8]) -> Result<()> {
        let rec = RawRecord {
            time,
            kind: RecordKind::Event,
            more: !data.is_empty(),
            depth: 0,
            addr: id,
        };
        let mut buf = rec.encode().to_vec();
        if !data.is_empty() {
            let start = buf.len();
            buf.extend_from_slice(&(data.len() as u16).to_le_bytes());
            buf.extend_from_slice(data);
            buf.resize(start + event_payload_size(data.len()), 0);
        }
        let path = self.dir.join(format!("{tid}.dat"));
        self.dat(tid)?
            .write_all(&buf)
            .map_err(|e| FormatError::io(path, e))
    }

    /// Appends a LOST record.
    pub fn lost_record(&mut self, tid: u32, count: u64) -> Result<()> {
        let rec = RawRecord {
            time: 0,
            kind: RecordKind::Lost,
            more: false,
            depth: 0,
            addr: count,
        };
        let path = self.dir.join(format!("{tid}.dat"));
        self.dat(tid)?
            .write_all(&rec.encode())
            .map_err(|e| FormatError::io(path, e))
    }

    /// Flushes everything and writes `info` last (its TASKINFO must list the data files).
    pub fn finish(mut self, info: &Info) -> Result<()> {
        self.task_txt
            .flush()
            .map_err(|e| FormatError::io(self.dir.join("task.txt"), e))?;
        for (tid, w) in &mut self.dat {
            w.flush()
                .map_err(|e| FormatError::io(self.dir.join(format!("{tid}.dat")), e))?;
        }
        self.write_file("info", &info.to_bytes())
    }
}
