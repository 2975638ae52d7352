// The output folder is shardpack's only when it says so: a build writes into a missing, empty or
// shardpack folder, never over a file it did not write, never through a symbolic link, never
// over its own inputs, and never over a dataset of a newer format without --force. Rebuilds keep
// the replaced manifest's shards for readers that read it.
#include <catch2/catch.hpp>

#include <sys/wait.h>
#include <unistd.h>

#include <filesystem>
#include <map>

#include "errors.hpp"
#include "dataset/folder_ledger.hpp"
#include "dataset/folder_ownership.hpp"
#include "io/output_file.hpp"
#include "io/output_folder.hpp"
#include "io/output_lock.hpp"
#include "inspect/dataset_verifier.hpp"
#include "shardpack/reader.hpp"
#include "test_support.hpp"

using namespace shardpack;
using namespace shardpack::test;
namespace fs = std::filesystem;

namespace {

struct fixture : sample_fixture {
    explicit fixture(int count = 6) : sample_fixture("own", count, 64, 48, {"--size", "32x24", "--shard-size", "8KiB"}) {}
};

// Every regular file below `dir` (links as "-> target"), with its content: a folder's exact state.
std::map<std::string, std::string> snapshot(const std::string& dir) {
    std::map<std::string, std::string> files;
    for (auto it = fs::recursive_directory_iterator(dir); it != fs::recursive_directory_iterator(); ++it) {
        const std::string rel = fs::relative(it->path(), dir).string();
        if (it->is_symlink()) files[rel] = "-> " + fs::read_symlink(it->path()).string();
        else if (it->is_regular_file()) files[rel] = read_file(it->path().string());
        else files[rel] = "<folder>";
    }
    return files;
}

// A folder of someone's own files, several named like shardpack's.
void make_user_folder(const std::string& dir) {
    fs::create_directories(dir + "/.partial");
    write_file(dir + "/notes.txt", "my notes\n");
    write_file(dir + "/rejected.csv", "my,rejects\n");
    write_file(dir + "/shard-00000-x.spk", "my shard\n");
    write_file(dir + "/a.tmp-1", "my temp\n");
    write_file(dir + "/.partial/x", "my partial\n");
    write_file(dir + "/manifest.json", "{\"name\": \"my web app\", \"version\": 3}\n");
    write_file(dir + "/report.json", "{\"quarter\": 3}\n");
}

std::vector<std::string> shards_in(const std::string& dir) {
    std::vector<std::string> names;
    for (const auto& e : fs::directory_iterator(dir))
        if (e.path().extension() == ".spk") names.push_back(e.path().filename().string());
    std::sort(names.begin(), names.end());
    return names;
}

std::vector<std::string> manifest_shards(const std::string& dir) {
    std::vector<std::string> names;
    const auto m = detail::json::parse(read_file(dir + "/manifest.json"));
    for (const auto& s : m.at("shards").as_array())
        names.push_back(s.at("file").as_string());
    std::sort(names.begin(), names.end());
    return names;
}

}  // namespace

TEST_CASE("a folder of user files survives a build pointed at it, with and without --force", "[ownership]") {
    fixture f;
    const std::string out = f.dir / "mine";
    make_user_folder(out);
    const auto before = snapshot(out);

    const auto plain = cli(f.build_args(out));
    REQUIRE(plain.code == 2);
    REQUIRE_THAT(plain.err, Catch::Contains("is not empty and holds no shardpack dataset") && Catch::Contains("manifest.json") &&
                                Catch::Contains("notes.txt") && Catch::Contains("--force"));
    REQUIRE(snapshot(out) == before);  // not even a lock file

    // --force builds beside foreign files, but never over them: these names are a dataset's.
    const auto forced = cli(f.build_args(out, {"--force"}));
    REQUIRE(forced.code == 2);
    REQUIRE_THAT(forced.err, Catch::Contains("never overwrites or removes files that are not its own") &&
                                 Catch::Contains(".partial, manifest.json, rejected.csv, report.json"));
    REQUIRE(snapshot(out) == before);

    // Without the files a build would replace, --force builds beside the rest and removes
    // none of them, in this build or the ones after (content changes, old shards go).
    for (const char* name : {"manifest.json", "report.json", "rejected.csv", ".partial"}) fs::remove_all(out + "/" + name);
    const auto rest = snapshot(out);
    REQUIRE(cli(f.build_args(out)).code == 2);
    REQUIRE(cli(f.build_args(out, {"--force", "--on-error", "skip"})).code == 0);
    REQUIRE(dataset::open(out).size() == 6);
    for (int seed = 1; seed <= 3; ++seed) {
        const auto r = cli(f.build_args(out, {"--shuffle", "--seed", std::to_string(seed)}));  // now shardpack's: no --force
        INFO(r.err);
        REQUIRE(r.code == 0);
    }
    auto now = snapshot(out);
    for (const auto& [name, content] : rest) {
        INFO(name);
        REQUIRE(now.count(name) == 1);
        REQUIRE(now[name] == content);
    }
    REQUIRE(fs::exists(out + "/" + folder_ledger::file_name));
    REQUIRE_FALSE(fs::exists(out + "/rejected.csv"));  // its own, from the --on-error skip build, removed since
}

TEST_CASE("ownership: --out the CSV's folder, or an input where a build writes, is refused before anything is written", "[ownership]") {
    fixture f;
    write_file(f.src + "/report.json", "{\"mine\": 1}\n");
    const auto before = snapshot(f.src);
    const auto in_csv_folder = cli({"build", "--csv", f.src + "/list.csv", "--classes", f.src + "/class_dict.csv", "--out", f.src});
    REQUIRE(in_csv_folder.code == 2);
    REQUIRE_THAT(in_csv_folder.err, Catch::Contains("holds no shardpack dataset") && Catch::Contains("inputs among them") &&
                                        Catch::Contains("list.csv"));
    REQUIRE(snapshot(f.src) == before);
    // A folder above the inputs' is foreign as well.
    REQUIRE(cli(f.build_args(f.dir.str())).code == 2);
    REQUIRE(snapshot(f.src) == before);

    const std::string out = f.dir / "ds";
    REQUIRE(cli(f.build_args(out, {"--on-error", "skip"})).code == 0);
    // A list named like the rejected rows' list, fed back in.
    fs::remove(out + "/rejected.csv");
    fs::copy_file(f.src + "/list.csv", out + "/rejected.csv");
    auto r = cli({"build", "--csv", out + "/rejected.csv", "--root", f.src, "--classes", f.src + "/class_dict.csv", "--out", out,
                  "--size", "32x24"});
    REQUIRE(r.code == 2);
    REQUIRE_THAT(r.err, Catch::Contains("--csv " + out + "/rejected.csv lies in the output folder"));
    REQUIRE(read_file(out + "/rejected.csv") == read_file(f.src + "/list.csv"));

    const std::string manifest = read_file(out + "/manifest.json");
    r = cli(f.build_args(out, {"--report", out + "/manifest.json"}));
    REQUIRE(r.code == 2);
    REQUIRE_THAT(r.err, Catch::Contains("--report " + out + "/manifest.json lies in the output folder"));
    r = cli(f.build_args(out, {"--report", f.src + "/list.csv"}));
    REQUIRE(r.code == 2);
    REQUIRE_THAT(r.err, Catch::Contains("is the input"));
    // An image the list names where the build writes.
    fs::copy_file(f.src + "/images/img_0000.png", out + "/report.json", fs::copy_options::overwrite_existing);
    write_file(f.dir / "list2.csv", "image,mask\n" + out + "/report.json," + f.src + "/masks/img_0000.png\n");
    r = cli({"build", "--csv", f.dir / "list2.csv", "--classes", f.src + "/class_dict.csv", "--out", out, "--size", "32x24"});
    REQUIRE(r.code == 2);
    REQUIRE_THAT(r.err, Catch::Contains("list2.csv:2: image " + out + "/report.json lies in the output folder"));
    REQUIRE(read_file(out + "/manifest.json") == manifest);

    // System folders are refused by the same rule: "/" is not empty and not a dataset. Only
    // looked at here (the claim lists it, writes nothing); the CLI is shown a stand-in.
    REQUIRE_THROWS_WITH(claim_output_folder("/", false), Catch::Contains("holds no shardpack dataset"));
    fs::create_directories(f.dir / "etc");
    write_file(f.dir / "etc/passwd", "root:x:0:0\n");
    r = cli(f.build_args(f.dir / "etc"));
    REQUIRE(r.code == 2);
    REQUIRE_THAT(r.err, Catch::Contains("it holds passwd"));
    REQUIRE(snapshot(f.dir / "etc").size() == 1);
}

TEST_CASE("symbolic links at the lock, .partial, manifest.json, report.json or --out are refused, their targets untouched", "[ownership][symlink]") {
    fixture f;
    const std::string out = f.dir / "ds";
    REQUIRE(cli(f.build_args(out)).code == 0);
    const std::string target = f.dir / "target";
    fs::create_directories(target);
    write_file(target + "/keep.txt", "precious\n");
    write_file(target + "/x.tmp-9", "precious\n");
    write_file(target + "/shard-00000-0123456789abcdef.spk", "precious\n");
    write_file(target + "/fingerprints.tsv", "precious\n");
    write_file(f.dir / "target.file", "precious\n");
    const auto targets = snapshot(target);

    for (const char* name : {".shardpack.lock", ".partial", "manifest.json", "report.json", ".shardpack"}) {
        INFO(name);
        const std::string at = out + "/" + name;
        const std::string saved = f.dir / "saved";
        fs::remove_all(saved);
        if (fs::exists(at)) fs::rename(at, saved);
        fs::create_symlink(std::string(name) == std::string(".partial") ? target : f.dir / "target.file", at);
        const auto r = cli(f.build_args(out, {"--full", "--shuffle"}));
        REQUIRE(r.code == 2);
        REQUIRE_THAT(r.err, Catch::Contains(std::string(name) + " is a symbolic link") && Catch::Contains("never writes"));
        REQUIRE(fs::is_symlink(at));
        REQUIRE(read_file(f.dir / "target.file") == "precious\n");
        REQUIRE(snapshot(target) == targets);
        fs::remove(at);
        if (fs::exists(saved)) fs::rename(saved, at);
    }
    REQUIRE(cli(f.build_args(out)).code == 0);

    // --out itself a link: refused, naming where it points.
    fs::create_symlink(out, f.dir / "link-to-ds");
    const auto r = cli(f.build_args(f.dir / "link-to-ds"));
    REQUIRE(r.code == 2);
    REQUIRE_THAT(r.err, Catch::Contains("is a symbolic link"));
}

TEST_CASE("links planted while a build runs are never followed: lock, .partial, temporaries, replaced files", "[ownership][symlink]") {
    temp_dir dir("plant");
    write_file(dir / "target.file", "precious\n");
    fs::create_directories(dir / "target");
    write_file(dir / "target/keep.txt", "precious\n");
    const std::string out = dir / "out";
    const auto folder = output_folder::open(out, true);

    fs::create_symlink(dir / "target.file", out + "/.shardpack.lock");
    REQUIRE_THROWS_WITH(output_lock(*folder), Catch::Contains("symbolic link"));
    fs::remove(out + "/.shardpack.lock");

    fs::create_symlink(dir / "target.file", out + "/new.tmp");
    REQUIRE_THROWS_WITH(output_file(*folder, "new.tmp"), Catch::Contains("symbolic link"));
    REQUIRE_THROWS(folder->open_append("new.tmp"));
    // A file to be replaced that is a link: refused (issue #18: only a regular file of ours is
    // replaced); the link and its target stay.
    REQUIRE_THROWS_WITH(folder->write_atomically("new.tmp", "mine\n"), Catch::Contains("new.tmp") && Catch::Contains("symbolic link"));
    REQUIRE(fs::is_symlink(out + "/new.tmp"));
    fs::remove(out + "/new.tmp");
    // The temporary name of a replaced file, planted (the pid is predictable).
    fs::create_symlink(dir / "target.file", out + "/report.json.tmp-" + std::to_string(::getpid()));
    folder->write_atomically("report.json", "{}\n");
    REQUIRE(read_file(out + "/report.json") == "{}\n");
    // The same for files outside a dataset folder (--report, export's PREFIX.*.png).
    fs::create_symlink(dir / "target.file", dir / "exported.png.tmp-" + std::to_string(::getpid()));
    write_file_atomically(dir / "exported.png", "png\n");
    REQUIRE_FALSE(fs::is_symlink(dir / "exported.png"));
    REQUIRE(read_file(dir / "exported.png") == "png\n");
    fs::remove(dir / "exported.png");
    fs::create_symlink(dir / "target.file", dir / "exported.png");
    REQUIRE_THROWS_WITH(write_file_atomically(dir / "exported.png", "png\n"), Catch::Contains("symbolic link"));
    REQUIRE(fs::is_symlink(dir / "exported.png"));

    // .partial planted as a link before the writer opens it.
    fs::create_symlink(dir / "target", out + "/.partial");
    synthetic_options o;
    o.records = 3;
    REQUIRE_THROWS_WITH(write_synthetic(out, o), Catch::Contains(".partial") && Catch::Contains("symbolic link"));
    REQUIRE(snapshot(dir / "target") == std::map<std::string, std::string>{{"keep.txt", "precious\n"}});
    REQUIRE(read_file(dir / "target.file") == "precious\n");
}

TEST_CASE("a dataset written by a newer format version is not replaced without --force", "[ownership][version]") {
    fixture f;
    for (const char* version : {"2.0", "1.9"}) {
        INFO(version);
        const std::string out = f.dir / (std::string("v") + version);
        REQUIRE(cli(f.build_args(out)).code == 0);
        auto m = detail::json::parse(read_file(out + "/manifest.json"));
        m.set("format_version", version);
        write_file(out + "/manifest.json", m.dump());
        const auto before = snapshot(out);
        const auto r = cli(f.build_args(out, {"--full"}));
        REQUIRE(r.code == 2);
        REQUIRE_THAT(r.err, Catch::Contains(std::string("format version \"") + version + "\"") && Catch::Contains("without --force"));
        REQUIRE(snapshot(out) == before);
        REQUIRE(cli(f.build_args(out, {"--full", "--force"})).code == 0);
        // Replaced by what this shardpack writes (segmentation band frames by default: 1.3).
        REQUIRE(dataset::open(out).manifest().at("format_version").as_string() ==
                std::to_string(detail::version_major) + "." + std::to_string(detail::version_minor_region_bands));
        REQUIRE(verify_dataset(out).ok());
    }
}

TEST_CASE("the replaced manifest's shards stay until the next build, and verify warns about them without failing", "[ownership][grace]") {
    fixture f(12);
    const std::string out = f.dir / "ds";
    REQUIRE(cli(f.build_args(out, {"--shuffle", "--seed", "1"})).code == 0);
    const auto first = manifest_shards(out);
    REQUIRE(first.size() >= 3);
    REQUIRE(shards_in(out) == first);
    const std::string first_manifest = read_file(out + "/manifest.json");

    REQUIRE(cli(f.build_args(out, {"--shuffle", "--seed", "2"})).code == 0);
    const auto second = manifest_shards(out);
    REQUIRE(second != first);
    // The first build's shards are all still there: a reader holding its manifest opens them.
    std::vector<std::string> both = first;
    both.insert(both.end(), second.begin(), second.end());
    std::sort(both.begin(), both.end());
    both.erase(std::unique(both.begin(), both.end()), both.end());
    REQUIRE(shards_in(out) == both);
    {
        temp_dir old_view("oldview");
        write_file(old_view / "manifest.json", first_manifest);
        for (const auto& s : first) fs::create_symlink(out + "/" + s, old_view / s);
        REQUIRE(dataset::open(old_view.str()).size() == 12);
    }
    auto v = verify_dataset(out);
    REQUIRE(v.ok());
    std::size_t kept = 0;
    for (const auto& w : v.warnings) kept += w.find("is kept from the previous build") != std::string::npos;
    REQUIRE(kept == both.size() - second.size());

    REQUIRE(cli(f.build_args(out, {"--shuffle", "--seed", "3"})).code == 0);
    const auto third = manifest_shards(out);
    std::vector<std::string> expected = second;
    expected.insert(expected.end(), third.begin(), third.end());
    std::sort(expected.begin(), expected.end());
    expected.erase(std::unique(expected.begin(), expected.end()), expected.end());
    REQUIRE(shards_in(out) == expected);  // the first build's are gone now

    // An unchanged rebuild: nothing is retained any more once two builds name the same shards.
    REQUIRE(cli(f.build_args(out, {"--shuffle", "--seed", "3"})).code == 0);
    REQUIRE(cli(f.build_args(out, {"--shuffle", "--seed", "3"})).code == 0);
    REQUIRE(shards_in(out) == third);
    v = verify_dataset(out);
    REQUIRE(v.ok());
    REQUIRE(v.warnings.empty());
}
