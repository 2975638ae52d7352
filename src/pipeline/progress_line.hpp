// The build's status line on a terminal (--progress): rows done, rate, ETA.
#pragma once
#include <chrono>
#include <cstddef>
#include <cstdio>

namespace shardpack {

// One line, rewritten in place at most 4 times a second, and ended by a newline when it was
// shown.
class progress_line {
public:
    // total: the rows to come; 0 when not known (then no ETA).
    progress_line(bool enabled, std::size_t total) : enabled_(enabled), total_(total), start_(clock::now()), last_(start_) {}
    void update(std::size_t done) {
        if (!enabled_) return;
        const auto now = clock::now();
        if (done != total_ && now - last_ < std::chrono::milliseconds(250)) return;
        last_ = now;
        const double secs = std::chrono::duration<double>(now - start_).count();
        const double rate = secs > 0 ? double(done) / secs : 0;
        if (total_ == 0) {  // a sample stream of unknown length (build --samples -)
            std::fprintf(stderr, "\r%zu rows  %.1f samples/s   ", done, rate);
        } else {
            const double eta = rate > 0 && total_ > done ? double(total_ - done) / rate : 0;
            std::fprintf(stderr, "\r%zu/%zu rows  %.1f samples/s  ETA %d:%02d   ", done, total_, rate, int(eta) / 60,
                         int(eta) % 60);
        }
        std::fflush(stderr);
        shown_ = true;
    }
    ~progress_line() {
        if (shown_) std::fputc('\n', stderr);
    }

private:
    using clock = std::chrono::steady_clock;
    bool enabled_;
    std::size_t total_;
    clock::time_point start_, last_;
    bool shown_ = false;
};

}  // namespace shardpack
