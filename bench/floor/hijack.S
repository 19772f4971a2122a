/* The least a -pg hook can do and still be a tracer: at the entry, read the time stamp counter,
 * store a 16-byte record (time, return address) into a per-thread ring, push the caller's return
 * address on a per-thread shadow stack and replace it with `floor_exit`; at the return, the same
 * record, pop the shadow stack and jump to the saved address (a `jmp`: a second `ret` would
 * misalign the return stack buffer, see libmcount's exit trampoline). No checks, no file, no
 * signal or longjmp safety. bench/record.sh preloads it to measure the floor of a traced call.
 *
 * Assembled twice: as `mcount` (called after the traced function's `push rbp; mov rbp, rsp`: its
 * return address is at 8(%rbp)) and, with -DFENTRY, as `__fentry__` (called before the prologue:
 * the return address is just above the hook's own, 24(%rsp) once rax and rdx are pushed).
 *
 * Per-thread block (initial-exec TLS): ring cursor, shadow depth, 4096 shadow slots, ring. */
#ifdef FENTRY
#define HOOK __fentry__
#define SLOT 24(%rsp)
#else
#define HOOK mcount
#define SLOT 8(%rbp)
#endif
#define SHADOW 16
#define RING (SHADOW + 4096 * 8)
#define RING_MASK 16383

/* Saves rax and rdx, then stores the time at the ring's cursor: r11 = the thread's block,
 * rcx = the cursor (in words). */
.macro stamp
	push %rax
	push %rdx
	rdtsc
	shl $32, %rdx
	or %rdx, %rax
	mov block@gottpoff(%rip), %r11
	add %fs:0, %r11
	mov (%r11), %rcx
	mov %rax, RING(%r11, %rcx, 8)
.endm

	.text
	.globl HOOK
	.type HOOK, @function
HOOK:
	stamp
	mov SLOT, %rax
	mov %rax, RING + 8(%r11, %rcx, 8)
	add $2, %rcx
	and $RING_MASK, %rcx
	mov %rcx, (%r11)
	mov 8(%r11), %rcx
	mov %rax, SHADOW(%r11, %rcx, 8)
	inc %rcx
	mov %rcx, 8(%r11)
	lea floor_exit(%rip), %rax
	mov %rax, SLOT
	pop %rdx
	pop %rax
	ret
	.size HOOK, . - HOOK

	.hidden floor_exit
	.type floor_exit, @function
floor_exit:
	stamp
	mov 8(%r11), %rax
	dec %rax
	mov %rax, 8(%r11)
	mov SHADOW(%r11, %rax, 8), %rax
	mov %rax, RING + 8(%r11, %rcx, 8)
	add $2, %rcx
	and $RING_MASK, %rcx
	mov %rcx, (%r11)
	pop %rdx
	mov %rax, %rcx
	pop %rax
	jmp *%rcx
	.size floor_exit, . - floor_exit

	.section .tbss, "awT", @nobits
	.align 8
block:
	.zero RING + (RING_MASK + 1) * 8 + 16
	.section .note.GNU-stack, "", @progbits
