//! Library functions whose calls change the shape of the call stack, known by name to both
//! the runtime (which hooks them specially) and the analysis (which fixes the stack up when it
//! replays them): the one table of the exec, fork, setjmp and longjmp families.

/// What a call of a special library function does to the call stack.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StackEffect {
    /// `exec*`: on success the image is replaced; the task's stack ends here.
    Exec,
    /// `fork`, `vfork`, `daemon`: the call returns in two tasks.
    Fork,
    /// `setjmp` and relatives: returns once now and again at each `longjmp` to it.
    Setjmp,
    /// `longjmp` and relatives: returns at the level of the matching `setjmp`.
    Longjmp,
}

/// The stack effect of calling `name`, if it has one.
pub fn stack_effect(name: &str) -> Option<StackEffect> {
    Some(match name {
        "execl" | "execlp" | "execle" | "execv" | "execve" | "execvp" | "execvpe" => {
            StackEffect::Exec
        }
        "fork" | "vfork" | "daemon" => StackEffect::Fork,
        "setjmp" | "_setjmp" | "sigsetjmp" | "__sigsetjmp" => StackEffect::Setjmp,
        "longjmp" | "_longjmp" | "siglongjmp" | "__longjmp_chk" => StackEffect::Longjmp,
        _ => return None,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn families() {
        assert_eq!(stack_effect("execvpe"), Some(StackEffect::Exec));
        assert_eq!(stack_effect("daemon"), Some(StackEffect::Fork));
        assert_eq!(stack_effect("__sigsetjmp"), Some(StackEffect::Setjmp));
        assert_eq!(stack_effect("_longjmp"), Some(StackEffect::Longjmp));
        assert_eq!(stack_effect("__longjmp_chk"), Some(StackEffect::Longjmp));
        assert_eq!(stack_effect("printf"), None);
    }
}
