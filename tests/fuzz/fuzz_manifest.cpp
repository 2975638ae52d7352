// libFuzzer target: bytes -> manifest.json.
//
//   1. detail::json::parse; a value that parses must print (dump) to text that parses back to
//      a value printing the same (both the pretty and the one-line form);
//   2. the bytes become the manifest.json of a folder holding the shards of the fixture
//      datasets (fuzz_common.hpp: written by the real writer at start-up, deterministic names),
//      and dataset::open validates it against them; what opens is read record by record, and
//      handed to inspect_dataset + format_inspection (`shardpack inspect`) and verify_dataset.
// Only shardpack::error may come out of the reader and of inspect (verify reports problems,
// it does not throw); anything else, a sanitizer report or a broken invariant is a finding.
#include <cstdint>
#include <string>
#include <string_view>
#include <typeinfo>

#include "fuzz_common.hpp"
#include "inspect/dataset_inspector.hpp"
#include "inspect/dataset_verifier.hpp"
#include "shardpack/reader.hpp"

using namespace shardpack;
using shardpack::fuzz::finding;

namespace {

volatile std::uint64_t sink;

const std::string& dataset_dir() {
    static const std::string dir = [] {
        const std::string root = fuzz::scratch_dir("manifest");
        const std::string ds = root + "/ds";
        fuzz::fs::create_directories(ds);
        for (const auto& d : fuzz::write_fixture_datasets(root + "/fixtures"))
            for (const auto& e : fuzz::fs::directory_iterator(d))
                if (e.path().extension() == ".spk") fuzz::fs::copy_file(e.path(), ds + "/" + e.path().filename().string());
        const auto golden = fuzz::golden_shard(std::string(SHARDPACK_TEST_FILES) + "/golden/tiny_shard.hex");
        fuzz::put_file(ds + "/shard-00000-d908886912887cfc.spk", golden.data(), golden.size());
        return ds;
    }();
    return dir;
}

void check_round_trip(const detail::json& v) {
    for (int indent : {2, -1}) {
        const std::string text = v.dump(indent);
        detail::json again;
        try {
            again = detail::json::parse(text);
        } catch (const shardpack::error& e) {
            finding(std::string("dump() printed text that parse() refuses: ") + e.what() + "\n" + text);
        }
        if (again.dump(indent) != text) finding("dump(parse(dump(v))) != dump(v):\n" + text + "\n" + again.dump(indent));
    }
}

void read_all(const dataset& ds) {
    read_context ctx;
    std::uint64_t acc = ds.size() + ds.classes().size() + ds.schema().class_count;
    for (std::size_t i = 0; i < ds.size(); ++i) {
        const sample s = ds.read(i, ctx);  // the fixture shards are undamaged: every read succeeds
        acc += s.height() * s.width() + s.key().size();
    }
    sink = sink + acc;
}

}  // namespace

extern "C" int LLVMFuzzerInitialize(int*, char***) {
    (void)dataset_dir();  // write the fixtures before the first input, not during it
    return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
    const std::string_view text(reinterpret_cast<const char*>(data), size);
    try {
        check_round_trip(detail::json::parse(text));
    } catch (const shardpack::error&) {
        return 0;  // not JSON: dataset::open would refuse it at the same place
    } catch (const std::exception& e) {
        finding(std::string("json::parse threw ") + typeid(e).name() + ": " + e.what());
    }

    const std::string& dir = dataset_dir();
    fuzz::put_file(dir + "/manifest.json", data, size);
    try {
        const dataset ds = dataset::open(dir);
        read_all(ds);
    } catch (const shardpack::error&) {
        return 0;
    } catch (const std::exception& e) {
        finding(std::string("the reader threw ") + typeid(e).name() + ": " + e.what());
    }
    try {
        const detail::json info = inspect_dataset(dir);
        sink = sink + format_inspection(info).size() + info.dump().size();
    } catch (const shardpack::error&) {
    } catch (const std::exception& e) {
        finding(std::string("inspect threw ") + typeid(e).name() + ": " + e.what());
    }
    try {
        const verify_result v = verify_dataset(dir);
        sink = sink + v.problems.size() + v.records_checked;
    } catch (const std::exception& e) {
        finding(std::string("verify_dataset threw ") + typeid(e).name() + ": " + e.what());
    }
    return 0;
}
