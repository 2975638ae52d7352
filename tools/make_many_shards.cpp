// make_many_shards: a valid dataset of very many tiny shards, fast, for the tests and
// measurements of datasets with hundreds of thousands of shards (lazy shard opening, open time
// and memory).
//
//   make_many_shards OUT_DIR --shards N [--records R] [--shard-table auto|always|never]
//
// The shardpack writer writes one shard of R records (4x4 RGB, 2 classes, one-hot, raw), then
// this tool copies it N times with each copy's shard number and first record set in its header,
// the header/index checksum recomputed, and the file named by its whole-file XXH3-64, as the
// writer names shards (spec 13.1); then writes manifest.json the way the writer does (the
// writer's manifest with records, content_hash and shards replaced), and the shard list where
// the writer puts it: --shard-table auto (the default) as the writer does (a binary shard table,
// format 1.2, above 4096 shards), always, or never (a JSON list: how 1.1 wrote any dataset).
// Files are written without fsync (test data). OUT_DIR must not exist. Exit 0; 1 on an I/O
// error; 2 on bad usage.
#include <fcntl.h>
#include <unistd.h>

#include <cstdio>
#include <cstring>
#include <filesystem>
#include <string>
#include <vector>

#include "dataset/dataset_writer.hpp"
#include "format/record_compressor.hpp"
#include "format/record_encoder.hpp"
#include "image.hpp"
#include "shardpack/detail/json.hpp"
#include "shardpack/reader.hpp"

using namespace shardpack;

namespace {

[[noreturn]] void usage(const std::string& why) {
    std::fprintf(stderr, "make_many_shards: %s\nusage: make_many_shards OUT_DIR --shards N [--records R] "
                         "[--shard-table auto|always|never]\n", why.c_str());
    std::exit(2);
}

std::string hex16(std::uint64_t v) {
    char buf[17];
    std::snprintf(buf, sizeof buf, "%016llx", static_cast<unsigned long long>(v));
    return buf;
}

void write_all(const std::string& path, const std::string& bytes) {
    const int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
    if (fd < 0) throw error(path + ": cannot create: " + std::strerror(errno));
    std::size_t done = 0;
    while (done < bytes.size()) {
        const ssize_t n = ::write(fd, bytes.data() + done, bytes.size() - done);
        if (n < 0 && errno == EINTR) continue;
        if (n < 0) {
            const int e = errno;
            ::close(fd);
            throw error(path + ": write error: " + std::strerror(e));
        }
        done += std::size_t(n);
    }
    if (::close(fd) != 0) throw error(path + ": close error: " + std::strerror(errno));
}

}  // namespace

int main(int argc, char** argv) {
    std::string out;
    std::size_t shards = 0, records = 1;
    std::string table_mode = "auto";
    for (int i = 1; i < argc; ++i) {
        const std::string a = argv[i];
        auto number = [&]() -> std::size_t {
            if (i + 1 >= argc) usage(a + " needs a value");
            const std::string v = argv[++i];
            char* end = nullptr;
            const unsigned long long n = std::strtoull(v.c_str(), &end, 10);
            if (v.empty() || *end || n == 0 || n > 10000000) usage(a + " needs an integer in [1, 10000000], not \"" + v + "\"");
            return std::size_t(n);
        };
        if (a == "--shards") shards = number();
        else if (a == "--records") records = number();
        else if (a == "--shard-table") {
            if (i + 1 >= argc) usage(a + " needs a value");
            table_mode = argv[++i];
            if (table_mode != "auto" && table_mode != "always" && table_mode != "never")
                usage("--shard-table is auto, always or never, not \"" + table_mode + "\"");
        }
        else if (!a.empty() && a[0] == '-') usage("unknown option \"" + a + "\"");
        else if (out.empty()) out = a;
        else usage("more than one OUT_DIR");
    }
    if (out.empty() || shards == 0) usage("OUT_DIR and --shards are required");
    if (std::filesystem::exists(out)) usage(out + " exists");
    try {
        // One shard through the real writer, in a folder of its own.
        const std::string model_dir = out + ".model";
        std::filesystem::remove_all(model_dir);
        dataset_writer_options wo;
        wo.out_dir = model_dir;
        wo.schema.task = detail::task_code::segmentation;
        wo.schema.channels = 3;
        wo.schema.channel_order = detail::order_code::rgb;
        wo.schema.label_layout = detail::layout_code::one_hot;
        wo.schema.label_dtype_bytes = 1;
        wo.schema.fixed_height = wo.schema.fixed_width = 4;
        wo.schema.class_count = 2;
        wo.schema.ignore_value = 255;
        wo.classes = {{"background", true, 0, 0, 0}, {"thing", true, 255, 0, 0}};
        wo.input_digest = "0000000000000000";
        {
            dataset_writer writer(wo);
            record_compressor compressor(record_codec::none, 1, wo.schema, 0);
            std::vector<unsigned char> decoded;
            stored_record stored;
            for (std::size_t r = 0; r < records; ++r) {
                image_u8 img;
                img.width = img.height = 4;
                img.channels = 3;
                img.pixels.assign(48, std::uint8_t(r));
                std::vector<std::uint16_t> ids(16, std::uint16_t(r % 2));
                const auto layout = encode_record(wo.schema, "r" + std::to_string(r), img, ids.data(), -1, decoded);
                compressor.compress(decoded, layout, stored);
                writer.add(stored);
            }
            writer.publish();
        }
        const auto model = dataset::open(model_dir);
        const std::string model_bytes = detail::read_regular_file(model_dir + "/" + model.shard_name(0), 1 << 20);
        detail::json manifest = detail::json::parse(detail::read_regular_file(model_dir + "/manifest.json", 1 << 20));

        std::filesystem::create_directories(out);
        std::string bytes = model_bytes;
        auto* p = reinterpret_cast<unsigned char*>(&bytes[0]);
        const std::size_t size = bytes.size();
        const std::uint64_t index_offset = detail::load_u64(p + size - 40);
        const std::uint32_t header_length = detail::load_u32(p + 12);
        const bool with_table = table_mode == "always" || (table_mode == "auto" && shards > dataset_writer_options{}.shard_table_above);
        detail::json list = detail::json::array();
        std::vector<detail::shard_table_entry> table;
        std::vector<unsigned char> hashes(shards * 8);
        for (std::size_t k = 0; k < shards; ++k) {
            const std::uint64_t first = std::uint64_t(k) * records;
            detail::store_u64(p + 40, k);
            detail::store_u64(p + 48, first);
            XXH3_state_t st;
            XXH3_64bits_reset(&st);
            XXH3_64bits_update(&st, p, header_length);
            XXH3_64bits_update(&st, p + index_offset, records * detail::index_entry_size);
            const std::uint64_t index_hash = XXH3_64bits_digest(&st);
            detail::store_u64(p + size - 24, index_hash);
            const std::uint64_t hash = XXH3_64bits(p, size);
            detail::store_u64(hashes.data() + 8 * k, hash);
            char name[64];
            std::snprintf(name, sizeof name, "shard-%05zu-%s.spk", k, hex16(hash).c_str());
            write_all(out + "/" + name, bytes);
            if (with_table) {
                table.push_back({std::uint64_t(records), std::uint64_t(size), hash, true, index_hash});
                continue;
            }
            detail::json e = detail::json::object();
            e.set("file", std::string(name));
            e.set("records", std::uint64_t(records));
            e.set("first_record", first);
            e.set("bytes", std::uint64_t(size));
            e.set("xxh3", hex16(hash));
            e.set("index_xxh3", hex16(index_hash));
            list.push(e);
        }
        detail::json m = detail::json::object();
        for (const auto& [key, value] : manifest.as_object()) {
            if (key == "records") m.set(key, std::uint64_t(shards * records));
            else if (key == "format_version" && with_table) m.set(key, "1.2");
            else if (key == "content_hash") m.set(key, hex16(XXH3_64bits(hashes.data(), hashes.size())));
            else if (key == "shards" && !with_table) m.set(key, list);
            else if (key == "shards") {
                const std::string table_bytes = detail::encode_shard_table(table);
                const std::uint64_t table_hash = XXH3_64bits(table_bytes.data(), table_bytes.size());
                write_all(out + "/" + detail::shard_table_file_name(table_hash), table_bytes);
                detail::json t = detail::json::object();
                t.set("file", detail::shard_table_file_name(table_hash));
                t.set("bytes", std::uint64_t(table_bytes.size()));
                t.set("xxh3", hex16(table_hash));
                m.set("shard_table", t);
            } else m.set(key, value);
        }
        write_all(out + "/manifest.json", m.dump());
        std::filesystem::remove_all(model_dir);
        std::fprintf(stderr, "make_many_shards: %s: %zu shards of %zu records\n", out.c_str(), shards, records);
    } catch (const std::exception& e) {
        std::fprintf(stderr, "make_many_shards: %s\n", e.what());
        return 1;
    }
    return 0;
}
