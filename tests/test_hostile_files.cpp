// Every command in every role it reads or writes, against each hostile kind of file (issue #18):
// a symbolic link, a FIFO, a device, a folder, a huge sparse file, another user's file, an input
// named as an output. Each cell runs the CLI in a child process under a time limit and asserts
// the exit code, a message naming the thing, the time and peak RSS, and that nothing outside the
// command's own files changed. The C++ reader's cells run in a forked child the same way.
//
// The table is printed (one line a cell) to stdout, and to the file SHARDPACK_HOSTILE_TABLE
// names when set. SHARDPACK_HOSTILE_CLI runs another shardpack binary (to record the results
// of an earlier version; its failures are then expected and reported, not asserted).
// Takes about 10-20 s.
#include <catch2/catch.hpp>
#include <fcntl.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <functional>
#include <iostream>
#include <map>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "shardpack/reader.hpp"
#include "test_skip.hpp"
#include "test_support.hpp"

namespace fs = std::filesystem;
using namespace shardpack;

namespace {

using test::sanitizer_factor;
constexpr double time_limit_s = 20.0 * sanitizer_factor;      // a hang shows as "timed out"
constexpr long rss_limit_kib = 400 * 1024 * sanitizer_factor;  // any cell: far below a whole-file read of the sparse file
constexpr std::uint64_t sparse_size = std::uint64_t(4) << 30;  // 4 GiB, no blocks

// Runs `program args` (or, with program empty, `body` in a forked child) under time_limit_s,
// its stdout discarded.
test::bounded_result run_cell(const std::string& program, const std::vector<std::string>& args,
                              const std::function<int()>& body = {}) {
    test::bounded_options o;
    o.limit_s = time_limit_s;
    o.keep_stdout = false;
    o.body = body;
    return test::run_bounded(program, args, o);
}

// What a tree holds, links not followed: per path its type, mode, owner, size, mtime, inode.
using tree_state = std::map<std::string, std::string>;
tree_state snapshot(const std::string& root, const std::vector<std::string>& own) {
    tree_state out;
    std::error_code ec;
    for (auto it = fs::recursive_directory_iterator(root, fs::directory_options::none, ec);
         !ec && it != fs::recursive_directory_iterator(); it.increment(ec)) {
        const std::string rel = fs::relative(it->path(), root).string();
        bool mine = false;
        for (const auto& o : own) mine = mine || rel == o || rel.compare(0, o.size() + 1, o + "/") == 0;
        if (mine) {
            if (it->is_directory(ec) && !it->is_symlink(ec)) it.disable_recursion_pending();
            continue;
        }
        struct stat st {};
        if (::lstat(it->path().c_str(), &st) != 0) continue;
        std::ostringstream s;
        s << st.st_mode << " " << st.st_uid << " " << (S_ISDIR(st.st_mode) ? 0 : st.st_size) << " " << st.st_mtim.tv_sec << "."
          << st.st_mtim.tv_nsec << " " << st.st_ino;
        out[rel] = s.str();
    }
    return out;
}

bool is_root() { return ::geteuid() == 0; }

void make_fifo(const std::string& p) {
    fs::remove_all(p);
    REQUIRE(::mkfifo(p.c_str(), 0644) == 0);
}
// A character device (/dev/zero's numbers); false when not root.
bool make_device(const std::string& p) {
    if (!is_root()) return false;
    fs::remove_all(p);
    return ::mknod(p.c_str(), S_IFCHR | 0644, makedev(1, 5)) == 0;
}
void make_sparse(const std::string& p) {
    fs::remove_all(p);
    { std::ofstream(p.c_str()); }
    fs::resize_file(p, sparse_size);
}
void make_folder(const std::string& p) {
    fs::remove_all(p);
    fs::create_directories(p);
}
void make_link(const std::string& p, const std::string& target) {
    fs::remove_all(p);
    fs::create_symlink(target, p);
}
// Gives the file to another user (nobody); false when not root.
bool give_away(const std::string& p) { return is_root() && ::lchown(p.c_str(), 65534, 65534) == 0; }

// The folders every cell starts from, made once: sample inputs, a dataset, and the two parts
// of a --partition build (with --on-error skip, so that they have a rejected.csv).
struct world {
    test::temp_dir dir{"hostile-base"};
    std::string cli;
    bool other_cli = false;
    world() {
        // For the push cells: credentials and an endpoint on a closed port (9, discard), so
        // that a push which got past its local checks would fail loudly, not reach a network.
        ::setenv("AWS_ACCESS_KEY_ID", "hostile-test", 1);
        ::setenv("AWS_SECRET_ACCESS_KEY", "hostile-test", 1);
        ::setenv("AWS_REGION", "us-east-1", 1);
        ::setenv("AWS_ENDPOINT_URL", "http://127.0.0.1:9", 1);
        ::setenv("SHARDPACK_S3_MAX_ATTEMPTS", "1", 1);
        const char* other = std::getenv("SHARDPACK_HOSTILE_CLI");
        other_cli = other && *other;
        cli = other_cli ? other : SHARDPACK_CLI;
        const auto r = test::run_command(SHARDPACK_SAMPLE_TOOL, {"--out", dir / "src", "--count", "12", "--width", "24", "--height", "16"});
        REQUIRE(r.code == 0);
        const std::vector<std::string> in = {"--csv", dir / "src/list.csv", "--classes", dir / "src/class_dict.csv", "--shard-size", "8KiB"};
        auto with = [&](std::vector<std::string> a) {
            std::vector<std::string> all = {"build"};
            all.insert(all.end(), in.begin(), in.end());
            all.insert(all.end(), a.begin(), a.end());
            return all;
        };
        REQUIRE(test::run_command(SHARDPACK_CLI, with({"--out", dir / "ds"})).code == 0);
        for (int k = 0; k < 2; ++k)
            REQUIRE(test::run_command(SHARDPACK_CLI, with({"--out", dir / ("p" + std::to_string(k)), "--partition",
                                                             std::to_string(k) + "/2", "--on-error", "skip"}))
                        .code == 0);
    }
};

world& base() {
    static world w;
    return w;
}

// One cell: what it plants, the command line, what it expects.
struct cell {
    std::string command, role, kind;
    // Plants the hostile thing in the fresh copy at `d` and returns the arguments; returns an
    // empty list when the cell cannot run here (the reason in `skip`).
    std::function<std::vector<std::string>(const std::string& d, std::string& skip)> setup;
    enum expect_kind { refused, succeeds } expect = refused;
    std::string names;             // a substring the message must hold (refused)
    std::vector<std::string> own;  // paths (relative) the command may create or change
    std::function<std::string(const std::string& d)> after;  // further checks; "" when fine
    std::function<int(const std::string& d)> in_process;     // the C++ reader, run in a child
    long rss_limit = rss_limit_kib;                           // peak RSS allowed, KiB
};

std::string shard_of(const std::string& dir) {
    for (const auto& e : fs::directory_iterator(dir))
        if (e.path().extension() == ".spk") return e.path().filename().string();
    return {};
}

std::vector<std::string> build_args(const std::string& d, std::vector<std::string> extra) {
    std::vector<std::string> a = {"build", "--csv", d + "/src/list.csv", "--classes", d + "/src/class_dict.csv", "--out", d + "/out"};
    a.insert(a.end(), extra.begin(), extra.end());
    return a;
}
// The parts' lock files: merge takes each part's lock (writing its pid there) so that a rebuild
// of the part waits; they are its own files.
const std::vector<std::string> merge_own = {"merged", "p0/.shardpack.lock", "p1/.shardpack.lock"};
std::vector<std::string> merge_args(const std::string& d) { return {"merge", "--out", d + "/merged", d + "/p0", d + "/p1"}; }
// push checks the local dataset in full before it sends a byte: every hostile cell is refused
// there, so the server it names is never reached (world() points it at a closed port).
std::vector<std::string> push_args(const std::string& d) { return {"push", d + "/ds", "s3://hostile-bucket/ds"}; }
std::vector<std::string> colors_args(const std::string& d, std::vector<std::string> extra) {
    std::vector<std::string> a = {"colors", "--csv", d + "/src/list.csv", "--classes", d + "/src/class_dict.csv"};
    a.insert(a.end(), extra.begin(), extra.end());
    return a;
}

// The kinds planted at a path, for roles where every kind is refused.
using planter = std::function<bool(const std::string& path, const std::string& d, std::string& skip)>;
const std::vector<std::pair<std::string, planter>>& hostile_kinds() {
    static const std::vector<std::pair<std::string, planter>> kinds = {
        {"FIFO", [](const std::string& p, const std::string&, std::string&) { make_fifo(p); return true; }},
        {"device", [](const std::string& p, const std::string&, std::string& skip) {
             if (make_device(p)) return true;
             skip = "not root: cannot make a device node";
             return false;
         }},
        {"folder", [](const std::string& p, const std::string&, std::string&) { make_folder(p); return true; }},
        {"sparse 4 GiB", [](const std::string& p, const std::string&, std::string&) { make_sparse(p); return true; }},
    };
    return kinds;
}

std::vector<cell> make_table() {
    std::vector<cell> t;
    // Roles whose every hostile kind must be refused, naming the file.
    struct role {
        std::string command, name, rel;  // rel: the planted path
        std::function<std::vector<std::string>(const std::string& d)> args;
        std::vector<std::string> own;
        bool link_refused = false;      // a link there is refused too (our own files); else followed
    };
    const std::vector<role> roles = {
        {"build", "--csv list", "src/list.csv", [](const std::string& d) { return build_args(d, {}); }, {"out"}},
        {"build", "--classes table", "src/class_dict.csv", [](const std::string& d) { return build_args(d, {}); }, {"out"}},
        {"build", "--config file", "cfg.toml", [](const std::string& d) { return build_args(d, {"--config", d + "/cfg.toml"}); }, {"out"}},
        {"build", "image in the list", "src/images/img_0000.png", [](const std::string& d) { return build_args(d, {}); }, {"out"}},
        {"merge", "part manifest.json", "p0/manifest.json", merge_args, merge_own, true},
        {"merge", "part fingerprints.tsv", "p0/fingerprints.tsv", merge_args, merge_own, true},
        {"merge", "part rejected.csv", "p1/rejected.csv", merge_args, merge_own, true},
        {"colors", "--csv list", "src/list.csv", [](const std::string& d) { return colors_args(d, {}); }, {}},
        {"colors", "--classes table", "src/class_dict.csv", [](const std::string& d) { return colors_args(d, {}); }, {}},
        {"inspect", "manifest.json", "ds/manifest.json", [](const std::string& d) { return std::vector<std::string>{"inspect", d + "/ds"}; }, {}, false},
        {"verify", "manifest.json", "ds/manifest.json", [](const std::string& d) { return std::vector<std::string>{"verify", d + "/ds"}; }, {}, false},
        {"push", "manifest.json", "ds/manifest.json", push_args, {}, false},
        {"export", "manifest.json", "ds/manifest.json",
         [](const std::string& d) { return std::vector<std::string>{"export", d + "/ds", "--index", "0", "--out", d + "/x/r"}; }, {"x"}, false},
    };
    for (const auto& r : roles) {
        for (const auto& [kind, plant] : hostile_kinds()) {
            cell c;
            c.command = r.command;
            c.role = r.name;
            c.kind = kind;
            c.names = fs::path(r.rel).filename().string();
            c.own = r.own;
            c.setup = [r, plant = plant](const std::string& d, std::string& skip) {
                if (!plant(d + "/" + r.rel, d, skip)) return std::vector<std::string>{};
                return r.args(d);
            };
            t.push_back(c);
        }
        if (r.link_refused) {
            cell c;
            c.command = r.command;
            c.role = r.name;
            c.kind = "symlink";
            c.names = fs::path(r.rel).filename().string();
            c.own = r.own;
            c.setup = [r](const std::string& d, std::string&) {
                const std::string p = d + "/" + r.rel;
                fs::rename(p, p + ".real");
                make_link(p, fs::path(p).filename().string() + ".real");
                return r.args(d);
            };
            t.push_back(c);
        }
    }
    // inspect: report.json is our own file, read back for counts: a hostile one is left out
    // with a warning (exit 0), never waited on or read whole.
    for (const auto& [kind, plant] : hostile_kinds()) {
        cell c{"inspect", "report.json", kind};
        c.setup = [plant = plant](const std::string& d, std::string& skip) {
            if (!plant(d + "/ds/report.json", d, skip)) return std::vector<std::string>{};
            return std::vector<std::string>{"inspect", d + "/ds"};
        };
        c.expect = cell::succeeds;
        t.push_back(c);
    }
    {
        cell c{"inspect", "report.json", "symlink"};
        c.setup = [](const std::string& d, std::string&) {
            fs::rename(d + "/ds/report.json", d + "/elsewhere.json");
            make_link(d + "/ds/report.json", d + "/elsewhere.json");
            return std::vector<std::string>{"inspect", d + "/ds", "--json"};
        };
        c.expect = cell::succeeds;
        t.push_back(c);
    }
    // A shard file: every reading command refuses a FIFO, a folder or a device there.
    for (const std::string command : {"verify", "inspect", "export", "push"}) {
        for (const auto& [kind, plant] : hostile_kinds()) {
            if (kind == "sparse 4 GiB") continue;  // a shard of the wrong size: the reader's own checks
            cell c{command, "shard", kind};
            c.names = ".spk";
            c.own = {"x"};
            c.setup = [command, plant = plant](const std::string& d, std::string& skip) {
                if (!plant(d + "/ds/" + shard_of(d + "/ds"), d, skip)) return std::vector<std::string>{};
                std::vector<std::string> a = {command, d + "/ds"};
                if (command == "export") a.insert(a.end(), {"--index", "0", "--out", d + "/x/r"});
                if (command == "push") a = push_args(d);
                return a;
            };
            t.push_back(c);
        }
    }
    // The C++ reader: dataset::open on a folder whose manifest or shard is hostile.
    for (const std::string what : {"manifest.json", "shard"}) {
        for (const auto& [kind, plant] : hostile_kinds()) {
            if (what == "shard" && kind == "sparse 4 GiB") continue;
            cell c{"reader (C++)", what, kind};
            c.names = what == "shard" ? ".spk" : what;
            c.setup = [what, plant = plant](const std::string& d, std::string& skip) {
                const std::string target = what == "shard" ? d + "/ds/" + shard_of(d + "/ds") : d + "/ds/manifest.json";
                if (!plant(target, d, skip)) return std::vector<std::string>{};
                return std::vector<std::string>{"-"};
            };
            c.in_process = [](const std::string& d) {
                try {
                    const auto ds = dataset::open(d + "/ds");
                    (void)ds.at(0);
                    std::fprintf(stderr, "opened\n");
                    return 0;
                } catch (const std::exception& e) {
                    std::fprintf(stderr, "%s\n", e.what());
                    return 1;
                }
            };
            t.push_back(c);
        }
    }

    // Writing roles: an output whose path holds something not ours, or an input.
    const auto write_dict_cell = [&](const std::string& kind, std::function<bool(const std::string&, std::string&)> plant,
                                     std::string rel) {
        cell c{"colors", "--write-dict", kind};
        c.names = fs::path(rel).filename().string();
        c.setup = [plant, rel](const std::string& d, std::string& skip) {
            if (!plant(d, skip)) return std::vector<std::string>{};
            return colors_args(d, {"--write-dict", d + "/" + rel});
        };
        t.push_back(c);
    };
    write_dict_cell("input: the CSV list", [](const std::string&, std::string&) { return true; }, "src/list.csv");
    write_dict_cell("input: the class table", [](const std::string&, std::string&) { return true; }, "src/class_dict.csv");
    write_dict_cell("input: a mask", [](const std::string&, std::string&) { return true; }, "src/masks/img_0000.png");
    write_dict_cell("FIFO", [](const std::string& d, std::string&) { make_fifo(d + "/dict.csv"); return true; }, "dict.csv");
    write_dict_cell("device", [](const std::string& d, std::string& skip) {
        if (make_device(d + "/dict.csv")) return true;
        skip = "not root";
        return false;
    }, "dict.csv");
    write_dict_cell("folder", [](const std::string& d, std::string&) { make_folder(d + "/dict.csv"); return true; }, "dict.csv");
    write_dict_cell("symlink", [](const std::string& d, std::string&) {
        test::write_file(d + "/target.csv", "keep\n");
        make_link(d + "/dict.csv", "target.csv");
        return true;
    }, "dict.csv");
    write_dict_cell("another user's file", [](const std::string& d, std::string& skip) {
        test::write_file(d + "/dict.csv", "theirs\n");
        if (give_away(d + "/dict.csv")) return true;
        skip = "not root: cannot give a file away";
        return false;
    }, "dict.csv");
    {
        cell c{"build", "--report", "input: the CSV list"};
        c.names = "list.csv";
        c.own = {"out"};
        c.setup = [](const std::string& d, std::string&) { return build_args(d, {"--report", d + "/src/list.csv"}); };
        t.push_back(c);
    }
    for (const std::string kind : {"symlink", "another user's file", "FIFO"}) {
        cell c{"build", "--report", kind};
        c.names = "rep.json";
        c.setup = [kind](const std::string& d, std::string& skip) {
            if (kind == "FIFO") make_fifo(d + "/rep.json");
            else if (kind == "symlink") {
                test::write_file(d + "/target.json", "keep");
                make_link(d + "/rep.json", "target.json");
            } else {
                test::write_file(d + "/rep.json", "theirs");
                if (!give_away(d + "/rep.json")) {
                    skip = "not root: cannot give a file away";
                    return std::vector<std::string>{};
                }
            }
            return build_args(d, {"--report", d + "/rep.json"});
        };
        t.push_back(c);
    }
    {
        cell c{"export", "--out", "another user's file at PREFIX.image.png"};
        c.names = "r.image.png";
        c.setup = [](const std::string& d, std::string& skip) {
            test::write_file(d + "/r.image.png", "theirs");
            if (!give_away(d + "/r.image.png")) {
                skip = "not root: cannot give a file away";
                return std::vector<std::string>{};
            }
            return std::vector<std::string>{"export", d + "/ds", "--index", "0", "--out", d + "/r"};
        };
        t.push_back(c);
    }
    {
        cell c{"build", "--out", "a dataset whose manifest.json is another user's"};
        c.names = "manifest.json (user 65534)";
        c.setup = [](const std::string& d, std::string& skip) {
            if (!give_away(d + "/ds/manifest.json")) {
                skip = "not root: cannot give a file away";
                return std::vector<std::string>{};
            }
            return std::vector<std::string>{"build", "--csv", d + "/src/list.csv", "--classes", d + "/src/class_dict.csv", "--out", d + "/ds"};
        };
        t.push_back(c);
    }
    {
        cell c{"merge", "--out", "input: a part itself"};
        c.names = "p0";
        c.own = merge_own;
        c.setup = [](const std::string& d, std::string&) {
            return std::vector<std::string>{"merge", "--out", d + "/p0", d + "/p0", d + "/p1"};
        };
        t.push_back(c);
    }
    {
        cell c{"build", "--out", "input: the images' folder"};
        c.names = "src";
        c.setup = [](const std::string& d, std::string&) {
            return std::vector<std::string>{"build", "--csv", d + "/src/list.csv", "--classes", d + "/src/class_dict.csv", "--out", d + "/src"};
        };
        t.push_back(c);
    }
    {
        cell c{"build", "output fingerprints.tsv", "sparse 4 GiB"};
        c.own = {"ds"};
        c.expect = cell::succeeds;
        c.setup = [](const std::string& d, std::string&) {
            make_sparse(d + "/ds/fingerprints.tsv");
            return std::vector<std::string>{"build", "--csv", d + "/src/list.csv", "--classes", d + "/src/class_dict.csv", "--out",
                                            d + "/ds", "--memory-limit", "256MiB"};
        };
        t.push_back(c);
    }
    {
        // 48 MiB of well-formed lines (a dataset of ~300,000 rows) under a 256 MiB budget: not
        // read whole (a rebuild keeps at most budget/8 of fingerprints), the build goes on.
        cell c{"build", "output fingerprints.tsv", "48 MiB of lines, --memory-limit 256MiB"};
        c.own = {"ds"};
        // Under ASan the allocator's quarantine keeps up to 256 MiB of freed memory resident (a
        // build under this budget measured 305 MiB), so only the uninstrumented build can tell a
        // read of the 48 MiB list from none; the sanitized run keeps the general bound.
        c.rss_limit = sanitizer_factor == 1 ? 64 * 1024 : rss_limit_kib;
        c.expect = cell::succeeds;
        c.setup = [](const std::string& d, std::string&) {
            std::string text = test::read_file(d + "/ds/fingerprints.tsv");
            const std::string header = text.substr(0, text.find('\n') + 1);
            std::string line = "images/img_0000.png\tmasks/img_0000.png\t100\t1\t0000000000000000\t100\t1\t0000000000000000\t-1\t0\t0:1\n";
            const std::size_t n = (std::size_t(48) << 20) / line.size();
            std::string body = header + "#shard\tshard-x.spk\t" + std::to_string(n) + "\n";
            body.reserve(body.size() + n * line.size());
            for (std::size_t i = 0; i < n; ++i) body += line;
            test::write_file(d + "/ds/fingerprints.tsv", body);
            return std::vector<std::string>{"build", "--csv", d + "/src/list.csv", "--classes", d + "/src/class_dict.csv", "--out",
                                            d + "/ds", "--memory-limit", "256MiB"};
        };
        t.push_back(c);
    }
    {
        cell c{"build", "output fingerprints.tsv", "FIFO"};
        c.names = "fingerprints.tsv (a FIFO)";
        c.setup = [](const std::string& d, std::string&) {
            make_fifo(d + "/ds/fingerprints.tsv");
            return std::vector<std::string>{"build", "--csv", d + "/src/list.csv", "--classes", d + "/src/class_dict.csv", "--out", d + "/ds"};
        };
        t.push_back(c);
    }
    {
        cell c{"merge", "--out", "input: inside a part"};
        c.own = merge_own;
        c.names = "p0";
        c.setup = [](const std::string& d, std::string&) {
            return std::vector<std::string>{"merge", "--out", d + "/p0/inner", d + "/p0", d + "/p1"};
        };
        c.after = [](const std::string& d) { return fs::exists(d + "/p0/inner") ? "left an empty folder p0/inner" : ""; };
        t.push_back(c);
    }
    {
        cell c{"merge", "part shard", "symlink (relative)"};
        c.own = merge_own;
        c.expect = cell::succeeds;
        c.setup = [](const std::string& d, std::string&) {
            const std::string s = shard_of(d + "/p0");
            fs::rename(d + "/p0/" + s, d + "/p0/real.bin");
            make_link(d + "/p0/" + s, "real.bin");
            return merge_args(d);
        };
        c.after = [](const std::string& d) -> std::string {
            for (const auto& e : fs::directory_iterator(d + "/merged"))
                if (fs::is_symlink(e.symlink_status())) return "the merged dataset holds a link: " + e.path().filename().string();
            const auto r = test::run_command(SHARDPACK_CLI, {"verify", d + "/merged"});
            return r.code == 0 ? "" : "the merged dataset does not verify: " + r.err;
        };
        t.push_back(c);
    }
    {
        cell c{"merge", "part shard", "another user's file"};
        c.own = merge_own;
        c.expect = cell::succeeds;
        c.setup = [](const std::string& d, std::string& skip) {
            if (!give_away(d + "/p0/" + shard_of(d + "/p0"))) {
                skip = "not root: cannot give a file away";
                return std::vector<std::string>{};
            }
            return merge_args(d);
        };
        c.after = [](const std::string& d) -> std::string {
            for (const auto& e : fs::directory_iterator(d + "/merged")) {
                struct stat st {};
                ::lstat(e.path().c_str(), &st);
                if (e.path().extension() == ".spk" && st.st_uid != ::geteuid())
                    return "a merged shard belongs to user " + std::to_string(st.st_uid) + " (hard-linked to the part's)";
            }
            return "";
        };
        t.push_back(c);
    }
    {
        cell c{"merge", "part fingerprints.tsv", "edited (a key changed)"};
        c.own = merge_own;
        c.names = "fingerprints.tsv";
        c.setup = [](const std::string& d, std::string&) {
            std::string text = test::read_file(d + "/p0/fingerprints.tsv");
            const auto at = text.find("img_0");
            REQUIRE(at != std::string::npos);
            text[at + 4] = 'X';
            test::write_file(d + "/p0/fingerprints.tsv", text);
            return merge_args(d);
        };
        t.push_back(c);
    }
    {
        cell c{"merge", "part manifest.json", "edited build.shard_size"};
        c.own = merge_own;
        c.names = "the member build does not match partition.options_digest";
        c.setup = [](const std::string& d, std::string&) {
            std::string text = test::read_file(d + "/p0/manifest.json");
            const auto at = text.find("8192", text.find("\"shard_size\""));
            REQUIRE(at != std::string::npos);
            text.replace(at, 4, "4096");
            test::write_file(d + "/p0/manifest.json", text);
            return merge_args(d);
        };
        t.push_back(c);
    }
    {
        cell c{"merge", "part manifest.json", "a member removed (partition.records_digest)"};
        c.names = "the member partition.records_digest is missing";
        c.own = merge_own;
        c.setup = [](const std::string& d, std::string&) {
            std::string text = test::read_file(d + "/p1/manifest.json");
            const auto at = text.find("\"records_digest\"");
            REQUIRE(at != std::string::npos);
            text.replace(at, 16, "\"records_digesX\"");
            test::write_file(d + "/p1/manifest.json", text);
            return merge_args(d);
        };
        t.push_back(c);
    }
    {
        cell c{"export", "--out", "FIFO at PREFIX.image.png"};
        c.names = "r.image.png";
        c.setup = [](const std::string& d, std::string&) {
            make_fifo(d + "/r.image.png");
            return std::vector<std::string>{"export", d + "/ds", "--index", "0", "--out", d + "/r"};
        };
        t.push_back(c);
    }
    {
        cell c{"export", "--out", "symlink at PREFIX.image.png"};
        c.names = "r.image.png";
        c.setup = [](const std::string& d, std::string&) {
            test::write_file(d + "/target.png", "keep");
            make_link(d + "/r.image.png", "target.png");
            return std::vector<std::string>{"export", d + "/ds", "--index", "0", "--out", d + "/r"};
        };
        t.push_back(c);
    }
    return t;
}

std::string one_line(std::string s) {
    for (char& ch : s)
        if (ch == '\n' || ch == '\t') ch = ' ';
    if (s.size() > 160) s = s.substr(0, 157) + "...";
    return s;
}

}  // namespace

TEST_CASE("every command refuses hostile files in every role: exit code, message, time, memory, nothing else changed",
          "[hostile][io]") {
    world& w = base();
    const auto table = make_table();
    std::ofstream report_file;
    if (const char* p = std::getenv("SHARDPACK_HOSTILE_TABLE"); p && *p) report_file.open(p);
    std::ostringstream lines;
    lines << "command\trole\tkind\tresult\texit\tseconds\tpeak_rss_MiB\tmessage\n";
    int failures = 0, index = 0;
    std::vector<std::string> skipped;  // cells whose environment is missing (not root)
    double worst_s = 0;
    long worst_rss = 0;
    for (const auto& c : table) {
        const std::string d = w.dir / ("cell-" + std::to_string(index++));
        fs::create_directories(d);
        for (const char* sub : {"src", "ds", "p0", "p1"})
            fs::copy(w.dir / sub, d + "/" + sub, fs::copy_options::recursive | fs::copy_options::copy_symlinks);
        std::string skip;
        const auto args = c.setup(d, skip);
        if (args.empty()) {
            lines << c.command << "\t" << c.role << "\t" << c.kind << "\tSKIPPED (" << skip << ")\n";
            skipped.push_back(c.command + " / " + c.role + " / " + c.kind + " (" + skip + ")");
            continue;
        }
        const tree_state before = snapshot(d, c.own);
        const test::bounded_result r = c.in_process ? run_cell("", {}, [&] { return c.in_process(d); }) : run_cell(w.cli, args);
        const tree_state after = snapshot(d, c.own);
        std::vector<std::string> problems;
        if (r.timed_out) problems.push_back("timed out (hang)");
        if (r.max_rss_kib > c.rss_limit) problems.push_back("peak RSS " + std::to_string(r.max_rss_kib / 1024) + " MiB");
        if (c.expect == cell::refused) {
            if (r.code != 1 && r.code != 2) problems.push_back("exit " + std::to_string(r.code) + ", not a refusal (1 or 2)");
            else if (!c.names.empty() && r.err.find(c.names) == std::string::npos) problems.push_back("the message does not name " + c.names);
        } else if (r.code != 0) {
            problems.push_back("exit " + std::to_string(r.code));
        }
        if (!r.timed_out) {  // a killed command may leave its own temporaries; its changes are judged above
            for (const auto& [path, state] : before) {
                const auto it = after.find(path);
                if (it == after.end()) problems.push_back("removed " + path);
                else if (it->second != state) problems.push_back("changed " + path);
            }
            for (const auto& [path, state] : after)
                if (!before.count(path)) problems.push_back("created " + path);
        }
        if (c.after && !r.timed_out)
            if (std::string why = c.after(d); !why.empty()) problems.push_back(why);
        worst_s = std::max(worst_s, r.seconds);
        worst_rss = std::max(worst_rss, r.max_rss_kib);
        std::string result = problems.empty() ? (c.expect == cell::refused ? "refused" : "ok") : "FAIL: ";
        for (std::size_t i = 0; i < problems.size(); ++i) result += (i ? "; " : "") + problems[i];
        char figures[64];
        std::snprintf(figures, sizeof figures, "%.2f\t%.0f", r.seconds, double(r.max_rss_kib) / 1024);
        lines << c.command << "\t" << c.role << "\t" << c.kind << "\t" << result << "\t" << r.code << "\t" << figures << "\t"
              << one_line(r.err) << "\n";
        if (!problems.empty()) ++failures;
        if (!w.other_cli || c.in_process) {
            INFO(c.command << " / " << c.role << " / " << c.kind << ": " << result << "\nstderr: " << r.err);
            CHECK(problems.empty());
        }
        std::error_code ec;
        fs::remove_all(d, ec);
    }
    lines << "cells: " << table.size() << ", failing: " << failures << "; worst time " << worst_s << " s, worst peak RSS "
          << worst_rss / 1024 << " MiB\n";
    std::cout << lines.str();
    if (report_file) report_file << lines.str();
    // A cell that could not run is not a pass: the case reports itself skipped, naming them,
    // when every cell that ran passed (a failure fails the case whatever was skipped).
    if (!skipped.empty() && failures == 0) {
        std::string which;
        for (const auto& s : skipped) which += (which.empty() ? "" : "; ") + s;
        SHARDPACK_SKIP(skipped.size() << " of " << table.size() << " cells could not run here (the other "
                                      << table.size() - skipped.size() << " passed): " << which);
    }
}
