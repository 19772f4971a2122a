//! The `.dbg` files of the libraries (`--srcline`, `-L`), written at the end of the recording
//! from the modules of the session maps and the `dlopen`ed libraries, as `.sym` files are
//! (data-format §8: `<basename>.dbg`, and for a second module of that basename the suffixed
//! name the readers try next). Only the source locations (`F:` and `L:` lines): the runtime
//! records no automatic arguments in libraries, so their `.dbg` files describe none. A module
//! without DWARF gets no file (uftrace writes one with the header alone; readers treat both
//! alike).

use std::collections::HashSet;
use std::path::Path;

/// The `.dbg` file names the readers try for the module at `path`, in order.
fn file_names(path: &str, build_id: Option<&str>) -> Vec<String> {
    record_format::sym::file_names(path, build_id)
        .into_iter()
        .map(|n| format!("{}.dbg", n.strip_suffix(".sym").unwrap_or(&n)))
        .collect()
}

/// Writes the `.dbg` file of every module of `modules` (path, build-id of the map) with DWARF,
/// but those that have one already (the program's, written before it ran). Returns whether
/// the directory has any `.dbg` file for these modules.
pub fn write_dbg_files(dir: &Path, modules: &[(String, Option<String>)]) -> anyhow::Result<bool> {
    let mut taken: HashSet<String> = HashSet::new();
    let mut any = false;
    for (path, map_build_id) in modules {
        let names = file_names(path, map_build_id.as_deref());
        // Written before the program ran: its header names this module.
        let existing = names.iter().take(2).find(|n| {
            std::fs::read_to_string(dir.join(n)).is_ok_and(|t| {
                record_format::dbg::parse_dbg(&t).path_name.as_deref() == Some(path.as_str())
            })
        });
        if let Some(n) = existing {
            taken.insert(n.clone());
            any = true;
            continue;
        }
        let Ok(bytes) = std::fs::read(path) else {
            continue;
        };
        let Some(debug) = super::read(&bytes, false) else {
            continue;
        };
        let Some(name) = names
            .into_iter()
            .take(2)
            .find(|n| !taken.contains(n) && !dir.join(n).exists())
        else {
            continue;
        };
        let build_id = crate::record::program::build_id_of(Path::new(path));
        let text = debug.text(path, build_id.as_deref());
        crate::record::write_file(dir, &name, text.as_bytes())?;
        taken.insert(name);
        any = true;
    }
    Ok(any)
}
