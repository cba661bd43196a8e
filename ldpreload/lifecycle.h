// The recorder's life in the process: start, threads, fork, exec, dlopen and
// every way a process ends. The program's own behaviour (output, exit status,
// signals) must come out unchanged whatever happens here.
#pragma once

#include "recorder.h"

namespace memlayout::preload {

// Starts recording if the process has not decided yet; returns whether
// events are being recorded now. Safe to call from any entry point.
bool initialize();

// Opens this process's trace file if it is not open yet (forked children
// open theirs on their first block). Returns false when there is no trace.
bool ensure_trace_open();
// The same from a signal handler (a forked child killed before its first
// write): waits for no lock, and lists the modules the child inherited.
bool ensure_trace_open_from_signal();

// Registers the log with the thread-exit destructor.
void arm_thread_exit(ThreadLog *log);

// Writes everything and a kEnd record. Once per process image, except that a
// failed exec resumes recording. kSignal comes from a signal handler: it
// takes only locks that are free and compresses nothing.
void finish_trace(trace::EndReason reason, int exit_status);

} // namespace memlayout::preload
