//! `--demangle=full` as uftrace 0.13 prints it: the text of libstdc++'s `__cxa_demangle`, which
//! uftrace calls (its libmcount links libstdc++). The function is looked up at run time, so that
//! utrace does not link libstdc++; without it, the caller falls back to `cpp_demangle`, whose
//! text differs for some names (a function returning a function pointer, the parameters of a
//! templated constructor, `sr` expressions with template arguments).

use std::ffi::{c_char, c_int, CStr, CString};
use std::sync::OnceLock;

/// `char *__cxa_demangle(const char *mangled, char *buf, size_t *len, int *status)`.
type CxaDemangle =
    unsafe extern "C" fn(*const c_char, *mut c_char, *mut libc::size_t, *mut c_int) -> *mut c_char;

/// The libstdc++ `__cxa_demangle`, looked up once; `None` when libstdc++ cannot be loaded.
fn cxa_demangle() -> Option<CxaDemangle> {
    static FUNC: OnceLock<Option<CxaDemangle>> = OnceLock::new();
    *FUNC.get_or_init(|| {
        // SAFETY: a constant NUL-terminated name; the handle is never closed, so the function
        // found in it stays valid for the life of the process.
        let handle = unsafe { libc::dlopen(c"libstdc++.so.6".as_ptr(), libc::RTLD_LAZY) };
        if handle.is_null() {
            return None;
        }
        // SAFETY: a live handle and a constant NUL-terminated name.
        let sym = unsafe { libc::dlsym(handle, c"__cxa_demangle".as_ptr()) };
        if sym.is_null() {
            return None;
        }
        // SAFETY: `__cxa_demangle` has this signature in the Itanium C++ ABI.
        Some(unsafe { std::mem::transmute::<*mut libc::c_void, CxaDemangle>(sym) })
    })
}

/// Whether libstdc++'s demangler is at hand.
pub fn available() -> bool {
    cxa_demangle().is_some()
}

/// libstdc++'s demangling of `mangled` (clone suffixes included, as `[clone .constprop.0]`);
/// `None` when it is not a mangled name or libstdc++ is missing.
pub fn demangle(mangled: &str) -> Option<String> {
    let func = cxa_demangle()?;
    let name = CString::new(mangled).ok()?;
    let mut status: c_int = 0;
    // SAFETY: a NUL-terminated input; a null buffer asks for a fresh malloc'd result, which is
    // freed below; `status` outlives the call.
    let out = unsafe {
        func(
            name.as_ptr(),
            std::ptr::null_mut(),
            std::ptr::null_mut(),
            &mut status,
        )
    };
    if out.is_null() {
        return None;
    }
    // SAFETY: on success the result is a NUL-terminated string that we own.
    let text = unsafe { CStr::from_ptr(out) }
        .to_string_lossy()
        .into_owned();
    // SAFETY: allocated by malloc inside `__cxa_demangle`, not used after this.
    unsafe { libc::free(out.cast()) };
    (status == 0).then_some(text)
}

#[cfg(test)]
mod tests {
    #[test]
    fn libstdcxx_text() {
        if !super::available() {
            return;
        }
        assert_eq!(
            super::demangle("_ZSt7forwardIRA256_cEOT_RNSt16remove_referenceIS2_E4typeE").as_deref(),
            Some("char (&std::forward<char (&) [256]>(std::remove_reference<char (&) [256]>::type&)) [256]")
        );
        assert_eq!(
            super::demangle("_Z3fibi.constprop.0").as_deref(),
            Some("fib(int) [clone .constprop.0]")
        );
        assert_eq!(super::demangle("main"), None);
    }
}
