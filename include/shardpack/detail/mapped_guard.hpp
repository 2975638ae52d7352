// Mapped reads that survive a shard truncated under them. Reading a page of a mapping past the
// end of its file raises SIGBUS, which kills the process: another tool that rewrites a shard in
// place (cp over it, rsync --inplace) would take a training job down instead of failing one read.
// The reader's own accesses to a mapped shard (its index, a record's stored bytes, a raw record
// copied into the caller's buffers) run inside guarded(): a SIGBUS at an address of that shard's
// mapping jumps back out of the access and becomes a shardpack::error naming the shard. Any other
// SIGBUS goes to the handler installed before (Python's faulthandler, a debugger's, the default).
//
// What it cannot guard: a zero-copy view (dataset::at of a raw record of a mapped shard, and the
// NumPy arrays made from it) read by the caller's own code after the file was truncated. Those
// views are checked when made (their pages are touched inside the guard); io_mode::pread, stream
// and blocks copy and never fault.
//
// The handler is installed at the first mapped read (SA_SIGINFO | SA_NODEFER: SIGBUS stays
// unblocked after the jump, so a second truncation is caught too) and again if another handler
// replaced it (see install_bus_handler); a guard costs a clock read, a sigsetjmp without the
// signal mask (no system call) and two thread-local stores.
#pragma once
#include <csetjmp>
#include <atomic>
#include <chrono>
#include <csignal>
#include <cstddef>
#include <mutex>
#include <string>

#include "error.hpp"

namespace shardpack::detail {

struct bus_guard {
    sigjmp_buf jump;
    const unsigned char* begin = nullptr;  // the mapping whose faults this guard takes
    const unsigned char* end = nullptr;
};

inline bus_guard*& active_bus_guard() {
    thread_local bus_guard* guard = nullptr;
    return guard;
}

inline struct sigaction& previous_bus_action() {
    static struct sigaction action {};
    return action;
}

extern "C" inline void shardpack_on_sigbus(int sig, siginfo_t* info, void* context) {
    bus_guard* g = active_bus_guard();
    const auto* at = static_cast<const unsigned char*>(info ? info->si_addr : nullptr);
    if (g && at >= g->begin && at < g->end) siglongjmp(g->jump, 1);
    const struct sigaction& before = previous_bus_action();
    if (before.sa_flags & SA_SIGINFO) {
        if (before.sa_sigaction) before.sa_sigaction(sig, info, context);
        return;
    }
    if (before.sa_handler == SIG_IGN) return;
    if (before.sa_handler == SIG_DFL) {
        // The default action: the access faults again on return, now fatally, as without us.
        ::signal(sig, SIG_DFL);
        return;
    }
    before.sa_handler(sig);
}

// Installs the handler, and installs it again when another was installed over it since (a test
// framework's per-test handlers, faulthandler.enable() after the first read): looked at once a
// process, then at most every 100 ms per thread (a clock read, not a system call, per guard).
inline void install_bus_handler() {
    using clock = std::chrono::steady_clock;
    thread_local clock::time_point next_look{};
    const clock::time_point now = clock::now();
    if (now < next_look) return;
    next_look = now + std::chrono::milliseconds(100);
    static std::mutex mutex;
    std::lock_guard<std::mutex> lock(mutex);
    struct sigaction current {};
    if (::sigaction(SIGBUS, nullptr, &current) == 0 && (current.sa_flags & SA_SIGINFO) &&
        current.sa_sigaction == shardpack_on_sigbus)
        return;
    struct sigaction action {};
    action.sa_sigaction = shardpack_on_sigbus;
    action.sa_flags = SA_SIGINFO | SA_NODEFER | SA_ONSTACK;
    sigemptyset(&action.sa_mask);
    ::sigaction(SIGBUS, &action, &previous_bus_action());
}

// Reads one byte of every page of [p, p + n): a truncated file faults here, in a frame that owns
// nothing, rather than in the middle of a decompression.
inline void touch_pages(const unsigned char* p, std::size_t n) {
    constexpr std::size_t page = 4096;
    volatile unsigned char sink = 0;
    for (std::size_t at = 0; at < n; at += page) sink = sink ^ p[at];
    if (n) sink = sink ^ p[n - 1];
    (void)sink;
}

// Runs f(); a SIGBUS at an address of [mapping, mapping + size) during it is thrown as an error
// naming what name() returns. With no mapping (a pread or engine source), just f(). Objects f
// made on the stack before the fault are abandoned, not destroyed (a leak, not a crash): the read
// paths touch a record's pages first (touch_pages), so a file truncated before the read faults
// there, where nothing is owned; only one truncated in the microseconds after the touch leaks.
template <class Name, class F>
auto guarded(const unsigned char* mapping, std::size_t size, Name&& name, F&& f) -> decltype(f()) {
    if (!mapping) return f();
    install_bus_handler();
    bus_guard guard;
    guard.begin = mapping;
    guard.end = mapping + size;
    bus_guard* const outer = active_bus_guard();
    if (sigsetjmp(guard.jump, 0) != 0) {
        active_bus_guard() = outer;
        throw error(name() + ": the mapped file ends before its bytes (truncated or rewritten in place by another "
                           "program while open); open the dataset again, or read with io=pread/stream/blocks");
    }
    active_bus_guard() = &guard;
    // The compiler must not move f's reads of the mapping before the guard is set, nor after
    // it is cleared: the handler runs in this thread, between any two instructions.
    std::atomic_signal_fence(std::memory_order_seq_cst);
    struct restore {
        bus_guard* outer;
        ~restore() {
            std::atomic_signal_fence(std::memory_order_seq_cst);
            active_bus_guard() = outer;
        }
    } restore_on_exit{outer};
    return f();
}

}  // namespace shardpack::detail
