// The reader's storage layer (detail/storage.hpp): pread and mmap read the same bytes through
// every read path, damage is found through either, a storage of the caller's own is used for
// everything (manifest, shards, read-ahead), and pread shards stay readable after a rebuild
// removes their names. Runs in a few seconds.
#include <catch2/catch.hpp>

#include <chrono>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <mutex>
#include <numeric>
#include <thread>

#include <fcntl.h>
#include <sys/mman.h>
#include <unistd.h>

#include "shardpack/reader.hpp"
#include "test_support.hpp"
#include "test_skip.hpp"

using namespace shardpack;
using namespace shardpack::test;

namespace {

open_options with_io(io_mode mode) {
    open_options o;
    o.io = mode;
    return o;
}

// Everything a reader can deliver for record i, as bytes, to compare two readers.
std::string everything(const dataset& ds, std::size_t i, read_context& ctx) {
    std::string out;
    const sample a = ds.at(i);
    out += std::string(a.key());
    out.append(reinterpret_cast<const char*>(a.image().data()), a.image().bytes());
    if (ds.schema().task == task::segmentation) {
        const auto l = a.label();
        out.append(reinterpret_cast<const char*>(l.data()), l.bytes());
    }
    out += std::to_string(a.class_id());
    const sample r = ds.read(i, ctx);
    out.append(reinterpret_cast<const char*>(r.image().data()), r.image().bytes());
    return out;
}

// A storage of the test's own over a local folder: counts what the reader asks for.
class counting_storage final : public storage {
public:
    explicit counting_storage(std::string folder) : folder_(std::move(folder)) {}

    class source final : public byte_source {
    public:
        source(std::shared_ptr<byte_source> inner, const counting_storage* owner, std::string name)
            : inner_(std::move(inner)), owner_(owner), name_(std::move(name)) {}
        std::uint64_t size() const override { return inner_->size(); }
        void read_at(std::uint64_t offset, std::size_t length, void* dst) const override {
            {
                std::lock_guard<std::mutex> lock(owner_->mutex_);
                ++owner_->reads_;
            }
            inner_->read_at(offset, length, dst);
        }
        void prefetch(const byte_range* ranges, std::size_t count) const override {
            std::lock_guard<std::mutex> lock(owner_->mutex_);
            auto& got = owner_->prefetched_[name_];
            got.insert(got.end(), ranges, ranges + count);
            ++owner_->prefetch_calls_;
        }
        std::string describe() const override { return "counting:" + name_; }

    private:
        std::shared_ptr<byte_source> inner_;
        const counting_storage* owner_;
        std::string name_;
    };

    std::string read_small_file(const std::string& name, std::uint64_t max_bytes) const override {
        return detail::read_regular_file(folder_ + "/" + name, max_bytes);
    }
    std::shared_ptr<byte_source> open(const std::string& name) const override {
        {
            std::lock_guard<std::mutex> lock(mutex_);
            ++opens_;
        }
        return std::make_shared<source>(detail::open_local_source(folder_ + "/" + name, io_mode::pread), this, name);
    }
    std::string version_of(const std::string& name) const override { return detail::local_file_version(folder_ + "/" + name); }
    std::string describe() const override { return "counting:" + folder_; }

    mutable std::mutex mutex_;
    mutable std::size_t opens_ = 0, reads_ = 0, prefetch_calls_ = 0;
    mutable std::map<std::string, std::vector<byte_range>> prefetched_;

private:
    std::string folder_;
};

}  // namespace

TEST_CASE("pread and mmap deliver the same bytes through every read path and codec", "[storage]") {
    struct variant {
        bool seg;
        record_codec codec;
    };
    for (const variant v : {variant{true, record_codec::zstd}, variant{true, record_codec::zstd_record},
                            variant{true, record_codec::none}, variant{false, record_codec::none},
                            variant{false, record_codec::zstd_record}}) {
        temp_dir dir("io");
        synthetic_options o;
        o.records = 40;
        o.width = 24;
        o.height = 16;
        o.segmentation = v.seg;
        o.codec = v.codec;
        o.shard_size = 8 * 1024;  // several shards
        write_synthetic(dir.str(), o);
        const dataset mapped = dataset::open(dir.str(), with_io(io_mode::mmap));
        const dataset preads = dataset::open(dir.str(), with_io(io_mode::pread));
        REQUIRE(mapped.shard_count() > 2);
        REQUIRE(preads.shard(0).bytes() == nullptr);
        REQUIRE(mapped.shard(0).bytes() != nullptr);
        read_context c1, c2;
        for (std::size_t i = 0; i < mapped.size(); ++i) REQUIRE(everything(mapped, i, c1) == everything(preads, i, c2));

        // A batch in a shuffled order, with a crop and flips, into caller buffers.
        std::vector<std::size_t> order(mapped.size());
        std::iota(order.begin(), order.end(), std::size_t(0));
        std::reverse(order.begin(), order.end());
        std::swap(order[3], order[17]);
        augmentation aug;
        aug.height = 8;
        aug.width = 12;
        aug.position = crop_position::random;
        aug.hflip = flip_mode::random;
        aug.seed = 5;
        const std::size_t per = std::size_t(aug.height) * aug.width;
        std::vector<std::uint8_t> img1(order.size() * per * 3), img2(img1.size());
        std::vector<std::int32_t> cls1(order.size()), cls2(order.size());
        sample_buffers b1, b2;
        b1.image_u8 = img1.data();
        b2.image_u8 = img2.data();
        b1.image_capacity = b2.image_capacity = img1.size();
        b1.class_id = cls1.data();
        b2.class_id = cls2.data();
        b1.augment = b2.augment = &aug;
        mapped.read_batch(order.data(), order.size(), b1, c1);
        preads.read_batch(order.data(), order.size(), b2, c2);
        REQUIRE(img1 == img2);
        REQUIRE(cls1 == cls2);
    }
}

TEST_CASE("a raw record is a view into the mapping with mmap and a copy with pread", "[storage]") {
    temp_dir dir("zc");
    synthetic_options o;
    o.records = 3;
    o.codec = record_codec::none;
    write_synthetic(dir.str(), o);
    const dataset mapped = dataset::open(dir.str(), with_io(io_mode::mmap));
    const dataset preads = dataset::open(dir.str(), with_io(io_mode::pread));
    const sample a = mapped.at(1), b = preads.at(1);
    const unsigned char* map = mapped.shard(0).bytes();
    const auto* pa = reinterpret_cast<const unsigned char*>(a.image().data());
    const auto* pb = reinterpret_cast<const unsigned char*>(b.image().data());
    REQUIRE((pa >= map && pa < map + mapped.shard(0).size()));
    REQUIRE(std::memcmp(pa, pb, a.image().bytes()) == 0);
    REQUIRE(mapped.zero_copy(1));
    REQUIRE_FALSE(preads.zero_copy(1));
}

TEST_CASE("damage is found through a pread source as through a mapping", "[storage][damage]") {
    temp_dir dir("pdmg");
    synthetic_options o;
    o.records = 3;
    o.width = 5;
    o.height = 4;
    write_synthetic(dir.str(), o);
    const std::string shard = only_shard(dir.str());
    const std::string bytes = read_file(shard);
    const std::string cut = dir / "cut.spk";
    auto open_pread = [](const std::string& path) { return detail::shard_file(std::make_shared<detail::pread_source>(path), "s"); };
    REQUIRE_NOTHROW(open_pread(shard));
    for (std::size_t n = 0; n < bytes.size(); ++n) {
        write_file(cut, bytes.substr(0, n));
        INFO("truncated to " << n << " of " << bytes.size() << " bytes");
        REQUIRE_THROWS_AS(open_pread(cut), shardpack::error);
    }
    // Every flipped bit of the header, index and trailer is refused at open; one in a record
    // at its read, through the dataset.
    const std::string name = std::filesystem::path(shard).filename().string();
    // (Every byte of the fixed header and the trailer, every 5th elsewhere: about 2 s.)
    for (std::size_t at = 0; at < bytes.size(); at += (at < 64 || at + 48 >= bytes.size()) ? 1 : 5) {
        std::string bad = bytes;
        bad[at] = static_cast<char>(bad[at] ^ 0x10);
        write_file(shard, bad);
        bool refused = false;
        try {
            const dataset ds = dataset::open(dir.str(), with_io(io_mode::pread));
            read_context ctx;
            for (std::size_t i = 0; i < ds.size(); ++i) ds.read(i, ctx);
        } catch (const shardpack::error& e) {
            refused = true;
            REQUIRE_THAT(e.what(), Catch::Contains(name));
        }
        // A bit in the zero padding is covered only by the whole-file hash (verify).
        if (!refused) {
            const dataset ds = dataset::open(dir.str(), with_io(io_mode::mmap));
            bool in_record = false;
            for (std::size_t i = 0; i < ds.size(); ++i) {
                const auto e = ds.shard(0).entry(i);
                in_record = in_record || (at >= e.offset && at < e.offset + e.stored_size);
            }
            INFO("flipped byte " << at);
            REQUIRE_FALSE(in_record);
        }
    }
    write_file(shard, bytes);
    // A file truncated after open: a clear error at read, not a crash.
    const dataset ds = dataset::open(dir.str(), with_io(io_mode::pread));
    REQUIRE(::truncate(shard.c_str(), 100) == 0);
    read_context ctx;
    REQUIRE_THROWS_WITH(ds.read(2, ctx), Catch::Contains("truncated") && Catch::Contains(name));
}

TEST_CASE("a pread source reads a header and an index larger than its first reads", "[storage]") {
    temp_dir dir("big");
    synthetic_options o;
    o.records = 2500;  // an index of 100,000 bytes: more than the tail read
    o.width = 2;
    o.height = 2;
    extra_section big;
    big.type = 900;
    big.payload.assign(100000, 7);  // a header of more than the head read
    o.extra.push_back(big);
    write_synthetic(dir.str(), o);
    const dataset mapped = dataset::open(dir.str(), with_io(io_mode::mmap));
    const dataset preads = dataset::open(dir.str(), with_io(io_mode::pread));
    REQUIRE(preads.shard(0).index_offset() > 100000);
    read_context c1, c2;
    for (std::size_t i = 0; i < mapped.size(); i += 97) REQUIRE(everything(mapped, i, c1) == everything(preads, i, c2));
}

TEST_CASE("a storage of the caller's own serves the manifest, the shards and the read-ahead", "[storage]") {
    temp_dir dir("own");
    synthetic_options o;
    o.records = 200;
    o.width = 24;
    o.height = 16;
    o.shard_size = 64 * 1024;
    write_synthetic(dir.str(), o);
    auto store = std::make_shared<counting_storage>(dir.str());
    // io pread: what is counted here is the storage's own read and prefetch path; the reader's I/O
    // engine over a storage is test_io_engine's.
    open_options opts = with_io(io_mode::pread);
    opts.storage = store;
    const dataset ds = dataset::open("remote-name", opts);
    const dataset local = dataset::open(dir.str());
    REQUIRE(store->opens_ == ds.shard_count());
    REQUIRE(ds.shard(0).bytes() == nullptr);
    REQUIRE(ds.shard_count() > 1);
    REQUIRE(ds.shard(0).record_count() > 3);
    // A batch of records 0, 1, 2 (neighbours in shard 0) and the last one: one prefetch call per
    // shard, neighbours merged into one range.
    const std::size_t last = ds.size() - 1;
    std::vector<std::size_t> batch{2, last, 0, 1};
    const std::size_t pixels = 24 * 16;
    std::vector<std::uint8_t> images(batch.size() * pixels * 3), expect(images.size());
    sample_buffers out;
    out.image_u8 = images.data();
    out.image_capacity = images.size();
    read_context ctx;
    const std::size_t reads_before = store->reads_;
    store->prefetched_.clear();
    ds.read_batch(batch.data(), batch.size(), out, ctx);
    REQUIRE(store->reads_ - reads_before == batch.size());  // one read per record
    sample_buffers want = out;
    want.image_u8 = expect.data();
    local.read_batch(batch.data(), batch.size(), want, ctx);
    REQUIRE(images == expect);
    const std::string first = ds.shard(0).name(), final = ds.shard(ds.shard_count() - 1).name();
    REQUIRE(store->prefetched_.size() == 2);
    REQUIRE(store->prefetched_[first].size() == 1);
    const auto e0 = ds.shard(0).entry(0), e2 = ds.shard(0).entry(2);
    REQUIRE(store->prefetched_[first][0].offset == e0.offset);
    REQUIRE(store->prefetched_[first][0].length == e2.offset + e2.stored_size - e0.offset);
    REQUIRE(store->prefetched_[final].size() == 1);
    // Errors name the dataset as the caller named it.
    REQUIRE_THROWS_WITH(ds.at(ds.size()), Catch::Contains("remote-name"));
}

TEST_CASE("merge_ranges sorts, merges overlaps and small gaps, keeps far ranges apart", "[storage]") {
    std::vector<byte_range> r{{1000, 10}, {0, 100}, {50, 100}, {160, 40}, {5000, 1}};
    detail::merge_ranges(r, 10);
    REQUIRE(r.size() == 3);
    REQUIRE((r[0].offset == 0 && r[0].length == 200));
    REQUIRE((r[1].offset == 1000 && r[1].length == 10));
    REQUIRE((r[2].offset == 5000 && r[2].length == 1));
}

TEST_CASE("pread shards stay readable after a rebuild removes their names", "[storage][rebuild]") {
    temp_dir dir("grace");
    synthetic_options o;
    o.records = 20;
    o.shard_size = 4 * 1024;
    const auto samples = write_synthetic(dir.str(), o);
    const dataset ds = dataset::open(dir.str(), with_io(io_mode::pread));
    for (const auto& e : std::filesystem::directory_iterator(dir.str()))
        if (e.path().extension() == ".spk") std::filesystem::remove(e.path());
    read_context ctx;
    for (std::size_t i = 0; i < ds.size(); ++i) {
        const sample s = ds.read(i, ctx);
        REQUIRE(std::string(s.key()) == samples[i].key);
        REQUIRE(std::equal(s.image().begin(), s.image().end(), samples[i].image.pixels.begin()));
    }
}

TEST_CASE("reads from many threads at once through pread sources return the right records", "[storage][threads]") {
    temp_dir dir("thr");
    synthetic_options o;
    o.records = 64;
    o.shard_size = 4 * 1024;
    const auto samples = write_synthetic(dir.str(), o);
    const dataset ds = dataset::open(dir.str(), with_io(io_mode::pread));
    std::atomic<int> wrong{0};
    std::vector<std::thread> threads;
    for (int t = 0; t < 4; ++t)
        threads.emplace_back([&, t] {
            read_context ctx;
            for (int pass = 0; pass < 20; ++pass)
                for (std::size_t i = std::size_t(t); i < ds.size(); i += 3) {
                    const sample s = ds.read(i, ctx);
                    if (std::string(s.key()) != samples[i].key ||
                        !std::equal(s.image().begin(), s.image().end(), samples[i].image.pixels.begin()))
                        ++wrong;
                }
        });
    for (auto& t : threads) t.join();
    REQUIRE(wrong == 0);
}

TEST_CASE("a dataset of more shards than max_open_shards opens them lazily and keeps at most that many", "[storage][lazy]") {
    temp_dir dir("lazy");
    synthetic_options o;
    o.records = 60;
    o.shard_size = 4 * 1024;
    const auto samples = write_synthetic(dir.str(), o);
    for (io_mode mode : {io_mode::mmap, io_mode::pread}) {
        open_options opts = with_io(mode);
        opts.max_open_shards = 3;
        const dataset ds = dataset::open(dir.str(), opts);
        REQUIRE(ds.shard_count() > 10);
        REQUIRE(ds.max_open_shards() == 3);
        REQUIRE(ds.open_shard_count() == 1);  // shard 0, for the schema
        // The shard table answers without opening anything.
        std::uint64_t total = 0;
        for (std::size_t k = 0; k < ds.shard_count(); ++k) {
            REQUIRE(ds.shard_first_record(k) == total);
            total += ds.shard_records(k);
            REQUIRE(ds.shard_name(k).rfind("shard-", 0) == 0);
            REQUIRE(ds.shard_bytes(k) == std::filesystem::file_size(dir / ds.shard_name(k)));
        }
        REQUIRE(total == ds.size());
        REQUIRE(ds.open_shard_count() == 1);
        read_context ctx;
        for (std::size_t i = ds.size(); i-- > 0;) {
            const sample s = ds.read(i, ctx);
            REQUIRE(std::string(s.key()) == samples[i].key);
            REQUIRE(ds.open_shard_count() <= 3);
        }
        // A sample from at() keeps its bytes after its shard is closed.
        const sample kept = ds.at(0);
        for (std::size_t i = 10; i < ds.size(); ++i) ds.read(i, ctx);
        REQUIRE(std::equal(kept.image().begin(), kept.image().end(), samples[0].image.pixels.begin()));
        // Concurrent batches from several threads, with shards opened and closed under them.
        std::atomic<int> wrong{0};
        std::vector<std::thread> threads;
        for (int t = 0; t < 4; ++t)
            threads.emplace_back([&, t] {
                read_context c;
                const std::size_t pixels = std::size_t(o.width) * o.height;
                std::vector<std::size_t> batch(7);
                std::vector<std::uint8_t> images(batch.size() * pixels * 3);
                sample_buffers out;
                out.image_u8 = images.data();
                out.image_capacity = images.size();
                for (int round = 0; round < 30; ++round) {
                    for (std::size_t j = 0; j < batch.size(); ++j)
                        batch[j] = (std::size_t(round) * 13 + j * 17 + std::size_t(t) * 5) % ds.size();
                    ds.read_batch(batch.data(), batch.size(), out, c);
                    for (std::size_t j = 0; j < batch.size(); ++j)
                        if (!std::equal(images.begin() + std::ptrdiff_t(j * pixels * 3),
                                        images.begin() + std::ptrdiff_t((j + 1) * pixels * 3),
                                        samples[batch[j]].image.pixels.begin()))
                            ++wrong;
                }
            });
        for (auto& t : threads) t.join();
        REQUIRE(wrong == 0);
        REQUIRE(ds.open_shard_count() <= 3);
    }
}

TEST_CASE("a lazily opened shard is checked when first read, and a removed one is reported clearly", "[storage][lazy]") {
    temp_dir dir("lazydmg");
    synthetic_options o;
    o.records = 30;
    o.shard_size = 4 * 1024;
    write_synthetic(dir.str(), o);
    open_options opts;
    opts.max_open_shards = 2;
    const dataset probe = dataset::open(dir.str(), opts);
    const std::size_t last = probe.shard_count() - 1;
    const std::string victim = dir / probe.shard_name(last);
    const std::string bytes = read_file(victim);
    // Damaged: open() succeeds (the shard is not opened), its first read names it.
    std::string bad = bytes;
    bad[20] = static_cast<char>(bad[20] ^ 1);
    write_file(victim, bad);
    const dataset ds = dataset::open(dir.str(), opts);
    read_context ctx;
    REQUIRE_NOTHROW(ds.read(0, ctx));
    REQUIRE_THROWS_WITH(ds.read(ds.size() - 1, ctx), Catch::Contains(probe.shard_name(last)) && Catch::Contains("checksum"));
    // With every shard open at open() (the default for few shards), the damage is found there.
    REQUIRE_THROWS_WITH(dataset::open(dir.str()), Catch::Contains(probe.shard_name(last)));
    write_file(victim, bytes);
    // Removed after open while a rebuild replaced the manifest: the error says to reopen.
    const dataset later = dataset::open(dir.str(), opts);
    std::filesystem::remove(victim);
    const std::string manifest = read_file(dir / "manifest.json");
    std::filesystem::remove(dir / "manifest.json");
    write_file(dir / "manifest.json", manifest + " ");
    REQUIRE_THROWS_WITH(later.read(later.size() - 1, ctx), Catch::Contains("open the dataset again"));
}

TEST_CASE("20,000 shards open lazily under the automatic bound, with few mappings and bounded memory", "[storage][lazy][many]") {
    // About 5 s: most of it writing the 20,000 files.
    temp_dir dir("many");
    const std::string folder = dir / "ds";
    const cli_result made = run_command(SHARDPACK_MANY_SHARDS_TOOL, {folder, "--shards", "20000"});
    INFO(made.err);
    REQUIRE(made.code == 0);
    auto mappings = [] {
        std::ifstream in("/proc/self/maps");
        std::string line;
        std::size_t n = 0;
        while (std::getline(in, line)) ++n;
        return n;
    };
    const std::size_t maps_before = mappings();
    const auto t0 = std::chrono::steady_clock::now();
    const dataset ds = dataset::open(folder);
    const double open_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    REQUIRE(ds.shard_count() == 20000);
    REQUIRE(ds.max_open_shards() == 4096);
    REQUIRE(ds.open_shard_count() == 1);
    CHECK(open_s < 5.0);  // measured 0.15-0.2 s; generous for a loaded machine
    read_context ctx;
    for (std::size_t i = 0; i < ds.size(); i += 3) {
        const sample s = ds.read(i, ctx);
        REQUIRE(s.image()[0] == 0);
    }
    REQUIRE(ds.open_shard_count() == 4096);
    REQUIRE(mappings() < maps_before + 4096 + 64);
}

// The fraction of the pages of [offset, offset + length) of `path` in the page cache, looked at
// through a mapping of its own (mincore faults nothing in).
static double resident_fraction(const std::string& path, std::uint64_t offset, std::uint64_t length) {
    const int fd = ::open(path.c_str(), O_RDONLY);
    REQUIRE(fd >= 0);
    const std::uint64_t page = static_cast<std::uint64_t>(::sysconf(_SC_PAGESIZE));
    const std::uint64_t begin = offset / page * page, end = offset + length;
    void* p = ::mmap(nullptr, end - begin, PROT_READ, MAP_SHARED, fd, static_cast<off_t>(begin));
    ::close(fd);
    REQUIRE(p != MAP_FAILED);
    std::vector<unsigned char> pages((end - begin + page - 1) / page);
    REQUIRE(::mincore(p, end - begin, pages.data()) == 0);
    ::munmap(p, end - begin);
    std::size_t in = 0;
    for (unsigned char v : pages) in += v & 1;
    return double(in) / double(pages.size());
}

// Mapped shards skip the read-ahead hints while a batch's span is all in memory (a mincore look;
// detail/storage.hpp): a cold span must still get them, and reads are exact either way. Evicts
// a 16 MiB file of its own (posix_fadvise DONTNEED) and waits for the kernel's read-ahead of
// the hinted ranges: well under a second here, at most 10 s.
TEST_CASE("mapped shards: a cold span gets read-ahead hints, a resident one is read as it is", "[storage]") {
    temp_dir dir("hints");
    const std::string path = dir.str() + "/shard.bin";
    const std::size_t size = std::size_t(16) << 20;
    std::vector<unsigned char> bytes(size);
    for (std::size_t i = 0; i < size; ++i) bytes[i] = static_cast<unsigned char>(i * 2654435761u >> 13);
    {
        std::ofstream f(path, std::ios::binary);
        f.write(reinterpret_cast<const char*>(bytes.data()), std::streamsize(size));
    }
    const int fd = ::open(path.c_str(), O_RDONLY);
    REQUIRE(fd >= 0);
    ::fdatasync(fd);
    ::posix_fadvise(fd, 0, 0, POSIX_FADV_DONTNEED);
    ::close(fd);
    const double left = resident_fraction(path, 0, size);
    detail::mmap_source source(path);
    // Eight 256 KiB ranges spread over the file, past its end too (clamped, never read).
    std::vector<byte_range> ranges;
    for (std::uint64_t k = 0; k < 8; ++k) ranges.push_back({k * (size / 8) + 4096 * k, 256 * 1024});
    const byte_range past_end{size - 4096, 1 << 20};
    ranges.push_back(past_end);
    if (left < 0.05) {
        source.prefetch(ranges.data(), ranges.size() - 1);
        const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
        bool all_in = false;
        while (!all_in && std::chrono::steady_clock::now() < deadline) {
            all_in = true;
            for (std::size_t k = 0; k + 1 < ranges.size(); ++k)
                all_in = all_in && resident_fraction(path, ranges[k].offset, ranges[k].length) == 1.0;
            if (!all_in) std::this_thread::sleep_for(std::chrono::milliseconds(10));
        }
        CHECK(all_in);  // the hints were given: nothing else reads these pages in
    }
    // Resident now (hinted or read): the look finds it so and gives no hints; the bytes read are
    // the file's, before and after, with ranges running past the end in the list.
    for (int round = 0; round < 3; ++round) {
        source.prefetch(ranges.data(), ranges.size());
        for (std::size_t k = 0; k + 1 < ranges.size(); ++k) {
            std::vector<unsigned char> got(ranges[k].length);
            source.read_at(ranges[k].offset, got.size(), got.data());
            REQUIRE(std::memcmp(got.data(), bytes.data() + ranges[k].offset, got.size()) == 0);
        }
        REQUIRE(std::memcmp(source.data(), bytes.data(), size) == 0);
    }
    if (left >= 0.05)
        SHARDPACK_SKIP("posix_fadvise(DONTNEED) left " << int(left * 100)
                                                        << "% of a file in memory (tmpfs?): the cold-span hints were not tested");
}
