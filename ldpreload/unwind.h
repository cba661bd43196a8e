// Call-stack capture for the allocation hot path.
//
// An interposed entry point (malloc, operator new, ...) is compiled with frame
// pointers, so its own frame tells exactly where its caller resumes: the
// caller's pc (the entry point's return address), the caller's stack pointer
// after the return, and the caller's frame pointer (saved by the entry point's
// prologue). Unwinding starts there; frames[0] is always that return address.
//
// Every method is allocation-free, never faults (each memory read is checked
// against the thread's stack bounds) and stops at the first frame it cannot
// trust. The methods, fastest first:
//   kFramePointer  follows saved frame pointers; exact only where every
//                  caller keeps them (Debian's libraries do not).
//   kCfi           .eh_frame rules cached per return address: exact wherever
//                  unwind tables exist, a few ns per frame once cached.
//   kDwarf         libgcc's _Unwind_Backtrace: exact, ~1 us per stack; for
//                  checking the others.
#pragma once

#include <cstddef>
#include <cstdint>

namespace memlayout::preload {

enum class UnwindMethod : uint8_t { kFramePointer = 1, kCfi = 2, kDwarf = 3 };

struct UnwindStart {
  uintptr_t pc; // return address of the entry point = frames[0]
  uintptr_t sp; // caller's stack pointer once the entry point returned
  uintptr_t fp; // caller's frame pointer register (rbp) at that point
};

// Reads the calling entry point's frame. A macro, not a function, because it
// must see the entry point's own frame pointer.
#define MEMLAYOUT_UNWIND_START()                                                                   \
  ([](uintptr_t fp_) {                                                                             \
    return ::memlayout::preload::UnwindStart{reinterpret_cast<uintptr_t *>(fp_)[1], fp_ + 16,      \
                                             reinterpret_cast<uintptr_t *>(fp_)[0]};               \
  }(reinterpret_cast<uintptr_t>(__builtin_frame_address(0))))

// Fills frames[0..n) with return addresses, innermost first, and returns n
// (1 <= n <= max_depth when max_depth >= 1). Safe to call from any thread,
// inside signal handlers and while the process holds the loader lock.
//
// memo, when given, is set to a word the caller may keep something in for
// this exact stack (the recorder keeps its stack id): 0 the first time, what
// the caller stored when the same stack comes again. Only kCfi's stack cache
// provides one; otherwise *memo is null. Valid until the next unwind on this
// thread.
size_t unwind(UnwindMethod method, const UnwindStart &start, uintptr_t *frames, size_t max_depth,
              uint32_t **memo = nullptr);

// Learns the calling thread's stack bounds now. unwind() does this itself on a
// thread's first call, but for a secondary thread that means
// pthread_getattr_np, which may malloc: call this from a point where that is
// harmless (first allocation outside a signal handler, thread start).
// Idempotent and cheap after the first call.
void unwind_thread_init();

// Returns the calling thread's stack cache (about 210 KiB of address space,
// touched as entries are used, taken on its first kCfi unwind) for reuse by
// later threads. Call when the thread exits, after its last unwind; without
// it the block is simply not reused.
void unwind_thread_exit();

// Call after dlopen/dlclose returns: cached unwind rules are re-derived, so a
// rule for an unloaded library cannot serve code later mapped at its address.
// Without it the unwinder notices unloads by itself, but only when it next
// walks the module list (on a new return address, or every 64 Ki unwinds per
// thread).
void unwind_modules_changed();

// Parses "fp", "cfi", "dwarf"; returns false on anything else.
bool parse_unwind_method(const char *name, UnwindMethod *out);
const char *unwind_method_name(UnwindMethod method);

} // namespace memlayout::preload
