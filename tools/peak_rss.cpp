// peak_rss: runs a command and reports its peak resident memory and times.
//
//   peak_rss [--] COMMAND [ARGS...]
//
// fork + execvp the command, wait4() it, and print one JSON line on stdout:
//   {"exit":CODE,"signal":SIG,"max_rss_kb":KB,"seconds":WALL,"user_s":U,"sys_s":S}
// max_rss_kb is wait4's ru_maxrss (kilobytes on Linux): the peak RSS of the child, or of any
// descendant it waited for, whichever is larger. "signal" is 0 unless the child was killed by a
// signal, in which case "exit" is 128 + the signal. The child's stdout goes to peak_rss's
// stderr (its stderr stays stderr), so the JSON line is the only thing on peak_rss's stdout.
// SIGINT, SIGTERM and SIGHUP sent to peak_rss are passed on to the child.
//
// Exit: the child's exit code (128 + signal if it was killed); 127 if the command could not be
// run (JSON still printed, with "exec_error"); 2 on bad usage.
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstring>
#include <string>

namespace {

volatile sig_atomic_t child_pid = 0;

void forward(int sig) {
    if (child_pid > 0) ::kill(child_pid, sig);
}

[[noreturn]] void usage(const char* why) {
    if (why) std::fprintf(stderr, "peak_rss: %s\n", why);
    std::fprintf(stderr, "usage: peak_rss [--] COMMAND [ARGS...]\n");
    std::exit(2);
}

std::string json_string(const std::string& s) {
    std::string out = "\"";
    for (unsigned char c : s) {
        if (c == '"' || c == '\\') { out += '\\'; out += char(c); }
        else if (c < 0x20) { char b[8]; std::snprintf(b, sizeof b, "\\u%04x", c); out += b; }
        else out += char(c);
    }
    return out + "\"";
}

}  // namespace

int main(int argc, char** argv) {
    int first = 1;
    if (first < argc && std::strcmp(argv[first], "--") == 0) ++first;
    else if (first < argc && argv[first][0] == '-') usage(std::strcmp(argv[first], "-h") == 0 || std::strcmp(argv[first], "--help") == 0 ? nullptr : "put -- before a command that starts with '-'");
    if (first >= argc) usage("no command given");

    // A pipe that closes on exec tells the parent whether execvp failed, and why.
    int status_pipe[2];
    if (::pipe(status_pipe) != 0) {
        std::fprintf(stderr, "peak_rss: pipe: %s\n", std::strerror(errno));
        return 1;
    }
    ::fcntl(status_pipe[1], F_SETFD, FD_CLOEXEC);
    std::fflush(nullptr);

    const auto start = std::chrono::steady_clock::now();
    const pid_t pid = ::fork();
    if (pid < 0) {
        std::fprintf(stderr, "peak_rss: fork: %s\n", std::strerror(errno));
        return 1;
    }
    if (pid == 0) {
        ::close(status_pipe[0]);
        if (::dup2(STDERR_FILENO, STDOUT_FILENO) < 0) _exit(127);
        ::execvp(argv[first], argv + first);
        const int e = errno;
        ssize_t ignored = ::write(status_pipe[1], &e, sizeof e);
        (void)ignored;
        _exit(127);
    }
    ::close(status_pipe[1]);
    child_pid = pid;
    struct sigaction sa {};
    sa.sa_handler = forward;
    sigemptyset(&sa.sa_mask);
    sa.sa_flags = SA_RESTART;
    ::sigaction(SIGINT, &sa, nullptr);
    ::sigaction(SIGTERM, &sa, nullptr);
    ::sigaction(SIGHUP, &sa, nullptr);

    int exec_errno = 0;
    ssize_t got;
    do got = ::read(status_pipe[0], &exec_errno, sizeof exec_errno);
    while (got < 0 && errno == EINTR);
    if (got != sizeof exec_errno) exec_errno = 0;
    ::close(status_pipe[0]);

    int status = 0;
    struct rusage ru {};
    pid_t w;
    do w = ::wait4(pid, &status, 0, &ru);
    while (w < 0 && errno == EINTR);
    const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    if (w < 0) {
        std::fprintf(stderr, "peak_rss: wait4: %s\n", std::strerror(errno));
        return 1;
    }

    int code = 1, sig = 0;
    if (WIFEXITED(status)) code = WEXITSTATUS(status);
    else if (WIFSIGNALED(status)) { sig = WTERMSIG(status); code = 128 + sig; }
    const double user = double(ru.ru_utime.tv_sec) + double(ru.ru_utime.tv_usec) / 1e6;
    const double sys = double(ru.ru_stime.tv_sec) + double(ru.ru_stime.tv_usec) / 1e6;
    std::string extra;
    if (exec_errno != 0) {
        extra = ",\"exec_error\":" + json_string(std::string(argv[first]) + ": " + std::strerror(exec_errno));
        std::fprintf(stderr, "peak_rss: cannot run %s: %s\n", argv[first], std::strerror(exec_errno));
    }
    std::printf("{\"exit\":%d,\"signal\":%d,\"max_rss_kb\":%ld,\"seconds\":%.6f,\"user_s\":%.6f,\"sys_s\":%.6f%s}\n", code,
                sig, ru.ru_maxrss, seconds, user, sys, extra.c_str());
    std::fflush(stdout);
    return code;
}
