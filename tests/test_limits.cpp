// Hostile inputs for unattended runs (issue 10, points 2, 3 and 5): no hangs on FIFOs and
// devices in any input role, bounded memory on pixel bombs, huge files and huge --threads,
// bounded decode work (JPEG scans, PNG zlib data past the rows) and signals acting inside long
// decodes, exact JSON for any bytes, log lines that cannot be forged, numeric option ranges.
// Every command runs in a child with a wall-clock limit: a hang fails the test, it does not
// stall the suite.
#include <catch2/catch.hpp>

#include <fcntl.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>
#include <zlib.h>

#include <cstdio>
#include <jpeglib.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <thread>

#include "cli/log_sanitizer.hpp"
#include "decode/image_decoder.hpp"
#include "decode/jpeg_encoder.hpp"
#include "decode/png_encoder.hpp"
#include "pipeline/memory_budget.hpp"
#include "shardpack/reader.hpp"
#include "test_support.hpp"

using namespace shardpack;
using namespace shardpack::test;
namespace fs = std::filesystem;
using Catch::Matchers::Contains;

namespace {

// The CLI bounded in time (a hang fails the test) and memory (peak RSS measured).
bounded_result bounded_cli(const std::vector<std::string>& args, double limit_s = 20, double signal_after_s = -1) {
    bounded_options o;
    o.limit_s = limit_s;
    o.signal_after_s = signal_after_s;
    return run_bounded(SHARDPACK_CLI, args, o);
}

void put_be32(std::string& s, std::uint32_t v) {
    for (int i = 3; i >= 0; --i) s += char((v >> (8 * i)) & 0xFF);
}

void png_chunk(std::string& file, const char* type, const std::string& body) {
    put_be32(file, std::uint32_t(body.size()));
    const std::size_t start = file.size();
    file += std::string(type, 4);
    file += body;
    put_be32(file, std::uint32_t(crc32(0, reinterpret_cast<const Bytef*>(file.data() + start), uInt(file.size() - start))));
}

// An 8-bit RGB PNG of width x height whose rows are all zero (filter 0), followed inside the
// zlib stream by `extra` more zero bytes. Made fast whatever its size: one deflated MiB of
// zeros, ended by a full flush (independent of what came before), is repeated.
std::string zero_png(std::uint32_t width, std::uint32_t height, std::uint64_t extra = 0) {
    const std::uint64_t total = std::uint64_t(height) * (std::uint64_t(width) * 3 + 1) + extra;
    const std::size_t piece = std::size_t(1) << 20;
    auto deflate_zeros = [](std::size_t n, int flush, bool header) {
        z_stream z{};
        deflateInit2(&z, 9, Z_DEFLATED, header ? 15 : -15, 9, Z_DEFAULT_STRATEGY);
        std::string zeros(n, '\0'), out(deflateBound(&z, uLong(n)) + 64, '\0');
        z.next_in = reinterpret_cast<Bytef*>(zeros.data());
        z.avail_in = uInt(n);
        z.next_out = reinterpret_cast<Bytef*>(out.data());
        z.avail_out = uInt(out.size());
        deflate(&z, flush);
        out.resize(out.size() - z.avail_out);
        deflateEnd(&z);
        return out;
    };
    const std::string repeated = deflate_zeros(piece, Z_FULL_FLUSH, false);
    std::string stream = "\x78\xDA";  // zlib header
    std::uint64_t left = total;
    uLong adler = adler32(0, nullptr, 0);
    const std::string zeros(piece, '\0');
    const uLong piece_adler = adler32(adler32(0, nullptr, 0), reinterpret_cast<const Bytef*>(zeros.data()), uInt(piece));
    while (left >= piece) {
        stream += repeated;
        adler = adler32_combine(adler, piece_adler, z_off_t(piece));
        left -= piece;
    }
    stream += deflate_zeros(std::size_t(left), Z_FINISH, false);  // the rest, final block
    adler = adler32(adler, reinterpret_cast<const Bytef*>(zeros.data()), uInt(left));
    put_be32(stream, std::uint32_t(adler));

    std::string file = "\x89PNG\r\n\x1A\n";
    std::string ihdr;
    put_be32(ihdr, width);
    put_be32(ihdr, height);
    ihdr += std::string("\x08\x02\x00\x00\x00", 5);
    png_chunk(file, "IHDR", ihdr);
    for (std::size_t at = 0; at < stream.size(); at += piece) png_chunk(file, "IDAT", stream.substr(at, piece));
    png_chunk(file, "IEND", "");
    return file;
}

// A progressive JPEG of width x height noise with 1 + 3 x bands x (refinements + 1) scans:
// per component, each band of AC coefficients sent with `refinements` successive-approximation
// refinement scans.
std::string many_scan_jpeg(int width, int height, int bands, int refinements) {
    jpeg_compress_struct c{};
    jpeg_error_mgr e{};
    c.err = jpeg_std_error(&e);
    jpeg_create_compress(&c);
    unsigned char* buf = nullptr;
    unsigned long size = 0;
    jpeg_mem_dest(&c, &buf, &size);
    c.image_width = JDIMENSION(width);
    c.image_height = JDIMENSION(height);
    c.input_components = 3;
    c.in_color_space = JCS_RGB;
    jpeg_set_defaults(&c);
    jpeg_set_quality(&c, 95, TRUE);
    std::vector<jpeg_scan_info> scans;
    jpeg_scan_info dc{};
    dc.comps_in_scan = 3;
    dc.component_index[0] = 0;
    dc.component_index[1] = 1;
    dc.component_index[2] = 2;
    scans.push_back(dc);
    const int step = 63 / bands;
    for (int comp = 0; comp < 3; ++comp)
        for (int b = 0; b < bands; ++b) {
            jpeg_scan_info a{};
            a.comps_in_scan = 1;
            a.component_index[0] = comp;
            a.Ss = 1 + b * step;
            a.Se = b == bands - 1 ? 63 : a.Ss + step - 1;
            a.Al = refinements;
            scans.push_back(a);
            for (int r = refinements; r > 0; --r) {
                a.Ah = r;
                a.Al = r - 1;
                scans.push_back(a);
            }
        }
    c.scan_info = scans.data();
    c.num_scans = int(scans.size());
    jpeg_start_compress(&c, TRUE);
    std::vector<unsigned char> row(std::size_t(width) * 3);
    std::uint32_t x = 12345;
    while (c.next_scanline < c.image_height) {
        for (auto& v : row) {
            x = x * 1103515245u + 12345u;
            v = static_cast<unsigned char>(x >> 16);
        }
        JSAMPROW r = row.data();
        jpeg_write_scanlines(&c, &r, 1);
    }
    jpeg_finish_compress(&c);
    std::string out(reinterpret_cast<const char*>(buf), size);
    std::free(buf);
    jpeg_destroy_compress(&c);
    return out;
}

std::string small_png() {
    image_u8 img;
    img.width = 8;
    img.height = 6;
    img.channels = 3;
    img.pixels.assign(8 * 6 * 3, 77);
    const auto bytes = encode_png(img);
    return std::string(bytes.begin(), bytes.end());
}

bool is_valid_json_for_python(const std::string& path) {
    const std::string cmd = "python3 -c 'import json,sys; json.load(open(sys.argv[1], encoding=\"utf-8\"))' '" + path + "' 2>/dev/null";
    return std::system(cmd.c_str()) == 0;
}

}  // namespace

TEST_CASE("a FIFO in every input role is an error naming it, within a time limit", "[limits][fifo]") {
    temp_dir dir("fifo");
    const std::string fifo = dir / "fifo";
    REQUIRE(::mkfifo(fifo.c_str(), 0644) == 0);
    write_file(dir / "img.png", small_png());
    write_file(dir / "mask.png", small_png());
    write_file(dir / "classes.csv", "name,r,g,b\nthing,77,77,77\n");
    write_file(dir / "fifo_image.csv", "image,label\n" + fifo + ",0\n");
    write_file(dir / "fifo_mask.csv", "image,mask\n" + (dir / "img.png") + "," + fifo + "\n");
    write_file(dir / "good.csv", "image,label\n" + (dir / "img.png") + ",0\n");

    const std::vector<std::pair<std::string, std::vector<std::string>>> cases = {
        {"image", {"build", "--csv", dir / "fifo_image.csv", "--out", dir / "o1", "--task", "cls"}},
        {"mask", {"build", "--csv", dir / "fifo_mask.csv", "--out", dir / "o2", "--task", "seg", "--classes", dir / "classes.csv"}},
        {"csv", {"build", "--csv", fifo, "--out", dir / "o3"}},
        {"classes", {"build", "--csv", dir / "good.csv", "--out", dir / "o4", "--task", "cls", "--classes", fifo}},
        {"config", {"build", "--csv", dir / "good.csv", "--out", dir / "o5", "--config", fifo}},
    };
    for (const auto& [role, args] : cases) {
        INFO("a FIFO as the " << role);
        const auto r = bounded_cli(args, 10);
        CHECK_FALSE(r.timed_out);
        CHECK((r.code == 1 || r.code == 2));
        CHECK_THAT(r.err, Contains(fifo) && Contains("not a regular file (a FIFO)"));
    }
    // The image and mask errors also name the CSV line.
    CHECK_THAT(bounded_cli(cases[0].second, 10).err, Contains("fifo_image.csv:2:"));

    // A dataset whose manifest.json, or one of whose shards, is a FIFO.
    REQUIRE(bounded_cli({"build", "--csv", dir / "good.csv", "--out", dir / "ds", "--task", "cls"}).code == 0);
    fs::copy(dir / "ds", dir / "fifo_manifest", fs::copy_options::recursive);
    fs::remove(dir / "fifo_manifest/manifest.json");
    REQUIRE(::mkfifo((dir / "fifo_manifest/manifest.json").c_str(), 0644) == 0);
    fs::copy(dir / "ds", dir / "fifo_shard", fs::copy_options::recursive);
    const std::string shard = only_shard(dir / "fifo_shard");
    fs::remove(shard);
    REQUIRE(::mkfifo(shard.c_str(), 0644) == 0);
    for (const std::string ds : {dir / "fifo_manifest", dir / "fifo_shard"})
        for (const std::string command : {"inspect", "verify"}) {
            INFO(command << " " << ds);
            const auto r = bounded_cli({command, ds}, 10);
            CHECK_FALSE(r.timed_out);
            CHECK(r.code == 1);
            CHECK_THAT(r.err, Contains("not a regular file (a FIFO)"));
        }
    // The reader itself, in a child so that a hang cannot stall the suite.
    const pid_t pid = ::fork();
    REQUIRE(pid >= 0);
    if (pid == 0) {
        ::alarm(10);
        try {
            dataset::open(dir / "fifo_manifest");
        } catch (const shardpack::error&) {
            ::_exit(0);
        }
        ::_exit(1);
    }
    int status = 0;
    ::waitpid(pid, &status, 0);
    CHECK((WIFEXITED(status) && WEXITSTATUS(status) == 0));
}

TEST_CASE("devices as class table or config are refused at once", "[limits][fifo]") {
    temp_dir dir("dev");
    write_file(dir / "img.png", small_png());
    write_file(dir / "good.csv", "image,label\n" + (dir / "img.png") + ",0\n");
    auto r = bounded_cli({"build", "--csv", dir / "good.csv", "--out", dir / "o", "--task", "cls", "--classes", "/dev/zero"}, 10);
    CHECK_FALSE(r.timed_out);
    CHECK(r.code == 1);
    CHECK_THAT(r.err, Contains("/dev/zero: not a regular file (a character device)"));
    r = bounded_cli({"build", "--csv", dir / "good.csv", "--out", dir / "o", "--config", "/dev/zero"}, 10);
    CHECK_FALSE(r.timed_out);
    CHECK(r.code == 2);
    CHECK_THAT(r.err, Contains("--config /dev/zero") && Contains("character device"));
    // A regular but oversized class table: refused by size, not read.
    {
        std::ofstream big(dir / "big_classes.txt");
    }
    REQUIRE(::truncate((dir / "big_classes.txt").c_str(), off_t(1) << 30) == 0);
    r = bounded_cli({"build", "--csv", dir / "good.csv", "--out", dir / "o", "--task", "cls", "--classes", dir / "big_classes.txt"}, 10);
    CHECK(r.code == 1);
    CHECK_THAT(r.err, Contains("1073741824 bytes, more than the"));
    CHECK(r.max_rss_kib < sanitizer_factor * 64 * 1024);
}

TEST_CASE("a pixel bomb is refused by name with the limit, within the memory budget", "[limits][memory]") {
    temp_dir dir("bomb");
    // 26000 x 26000 RGB: 2 GB of pixels, from a ~2 MB file whose zlib stream really holds them.
    write_file(dir / "bomb.png", zero_png(26000, 26000));
    CHECK(fs::file_size(dir / "bomb.png") < 4u << 20);
    write_file(dir / "list.csv", "image,label\n" + (dir / "bomb.png") + ",0\n");
    const auto r = bounded_cli({"build", "--csv", dir / "list.csv", "--out", dir / "o", "--task", "cls", "--size", "224x224",
                        "--memory-limit", "256MiB"},
                       60);
    CHECK_FALSE(r.timed_out);
    CHECK(r.code == 1);
    CHECK_THAT(r.err, Contains("list.csv:2:") && Contains("bomb.png: a 26000x26000 image needs about") &&
                          Contains("more than a row may take") && Contains("--memory-limit"));
    CHECK(r.max_rss_kib < sanitizer_factor * 256 * 1024);
}

TEST_CASE("huge files are refused per row before being read, skippable, within the budget", "[limits][memory]") {
    temp_dir dir("huge");
    write_file(dir / "good.png", small_png());
    // 100 GiB, sparse: a PNG signature, then a hole. The test's own disk use is one block.
    {
        std::ofstream f(dir / "sparse.png", std::ios::binary);
        f << "\x89PNG\r\n\x1A\n";
    }
    REQUIRE(::truncate((dir / "sparse.png").c_str(), off_t(100) << 30) == 0);
    // 4 GiB of zeros: no image at all.
    {
        std::ofstream f(dir / "zeros.bin");
    }
    REQUIRE(::truncate((dir / "zeros.bin").c_str(), off_t(4) << 30) == 0);
    write_file(dir / "list.csv", "image,label\n" + (dir / "sparse.png") + ",0\n" + (dir / "zeros.bin") + ",0\n" +
                                     (dir / "good.png") + ",0\n");
    const auto r = bounded_cli({"build", "--csv", dir / "list.csv", "--out", dir / "o", "--task", "cls", "--on-error", "skip",
                        "--memory-limit", "256MiB", "--json"},
                       30);
    CHECK_FALSE(r.timed_out);
    CHECK(r.code == 0);
    CHECK_THAT(r.err, Contains("skipped line 2") && Contains("107374182400 bytes") && Contains("more than a row may take"));
    CHECK_THAT(r.err, Contains("skipped line 3") && Contains("unrecognised image data"));
    CHECK(r.max_rss_kib < sanitizer_factor * 128 * 1024);
    const auto report = detail::json::parse(r.out);
    CHECK(report.at("records").as_u64() == 1);
    CHECK(report.at("skipped").as_u64() == 2);
}

TEST_CASE("a huge thread count (--threads 10000) is capped with a message and stays within the budget", "[limits][memory]") {
    temp_dir dir("threads");
    write_file(dir / "img.png", small_png());
    std::string list = "image,label\n";
    for (int i = 0; i < 200; ++i) list += dir / "img.png" + ",0\n";
    write_file(dir / "list.csv", list);
    const auto r = bounded_cli({"build", "--csv", dir / "list.csv", "--out", dir / "o", "--task", "cls", "--threads", "10000",
                        "--memory-limit", "256MiB"},
                       60);
    CHECK_FALSE(r.timed_out);
    CHECK(r.code == 0);
    CHECK_THAT(r.err, Contains("--threads 10000: using") && Contains("cores this process may use"));
    CHECK(r.max_rss_kib < sanitizer_factor * 256 * 1024);
}

TEST_CASE("bounded decode work: JPEG scans, PNG zlib data past the rows, the interrupt flag", "[limits][decode]") {
    // 1 + 3 x 63 x 2 = 379 scans, over the limit of 256.
    const std::string many = many_scan_jpeg(64, 64, 63, 1);
    decode_request req;
    REQUIRE_THROWS_WITH(decode_image(reinterpret_cast<const std::uint8_t*>(many.data()), many.size(), req),
                        Contains("more than 256 scans"));
    // 1 + 3 x 21 x 3 = 190 scans: decoded.
    const std::string fine = many_scan_jpeg(64, 64, 21, 2);
    CHECK(decode_image(reinterpret_cast<const std::uint8_t*>(fine.data()), fine.size(), req).width == 64);

    // A 64x64 PNG whose zlib stream runs on for 1 GiB after its rows: refused quickly (it was
    // inflated to the end, tens of seconds for gigabytes).
    const std::string runs_on = zero_png(64, 64, std::uint64_t(1) << 30);
    const auto start = std::chrono::steady_clock::now();
    REQUIRE_THROWS_WITH(decode_image(reinterpret_cast<const std::uint8_t*>(runs_on.data()), runs_on.size(), req),
                        Contains("goes on past the last row"));
    CHECK(std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count() < 5.0 * double(sanitizer_factor));
    // The same image without the extra data decodes.
    const std::string exact = zero_png(64, 64);
    CHECK(decode_image(reinterpret_cast<const std::uint8_t*>(exact.data()), exact.size(), req).height == 64);

    // With the interrupt flag raised, every decoder stops with "interrupted".
    std::atomic<int> flag{15};
    decode_request stop;
    stop.interrupt = &flag;
    CHECK_THROWS_WITH(decode_image(reinterpret_cast<const std::uint8_t*>(exact.data()), exact.size(), stop), Contains("interrupted"));
    CHECK_THROWS_WITH(decode_image(reinterpret_cast<const std::uint8_t*>(fine.data()), fine.size(), stop), Contains("interrupted"));
    image_u8 img;
    img.width = 32;
    img.height = 32;
    img.channels = 3;
    img.pixels.assign(32 * 32 * 3, 9);
    const auto baseline = encode_jpeg(img);
    CHECK_THROWS_WITH(decode_image(baseline.data(), baseline.size(), stop), Contains("interrupted"));
}

TEST_CASE("SIGTERM during slow decodes ends the build within a second", "[limits][signal]") {
    temp_dir dir("sigterm");
    // 199 scans of 1024x1024 noise: under the scan limit, a few hundred ms each to decode.
    write_file(dir / "slow.jpg", many_scan_jpeg(1024, 1024, 22, 2));
    std::string list = "image,label\n";
    for (int i = 0; i < 100; ++i) list += dir / "slow.jpg" + ",0\n";
    write_file(dir / "list.csv", list);
    const auto r = bounded_cli({"build", "--csv", dir / "list.csv", "--out", dir / "o", "--task", "cls", "--threads", "1"}, 60, 1.0);
    CHECK_FALSE(r.timed_out);
    CHECK(r.code == 143);
    CHECK(r.after_signal_s < 1.0 * double(sanitizer_factor));
    CHECK_THAT(r.err, Contains("interrupted by signal 15"));
    CHECK_FALSE(fs::exists(dir / "o/manifest.json"));
}

TEST_CASE("manifests, reports and --json are valid JSON for any bytes, and give the bytes back", "[limits][json]") {
    // Every byte value, invalid UTF-8, encoded surrogates, overlongs, and valid multi-byte text.
    std::string nasty;
    for (int c = 0; c < 256; ++c) nasty += char(c);
    nasty += "\xED\xA0\x80|\xC0\xAF|\xF4\x90\x80\x80|\xE2\x82\xAC|\xF0\x9F\x98\x80|\xE2\x82";
    detail::json o = detail::json::object();
    o.set(nasty, nasty);
    const std::string text = o.dump();
    CHECK(text.find('\x7F') != std::string::npos);  // DEL is printable JSON, kept
    const auto back = detail::json::parse(text);
    CHECK(back.at(nasty).as_string() == nasty);
    CHECK(back.as_object().front().first == nasty);
    temp_dir dir("json");
    write_file(dir / "t.json", text);
    CHECK(is_valid_json_for_python(dir / "t.json"));
    // Python gets the bytes back with surrogateescape.
    write_file(dir / "raw.bin", nasty);
    const std::string py = "python3 -c 'import json,sys; m=json.load(open(sys.argv[1], encoding=\"utf-8\")); "
                           "k=list(m)[0]; sys.exit(0 if k.encode(\"utf-8\",\"surrogateescape\")==open(sys.argv[2],\"rb\").read() else 1)' '" +
                           (dir / "t.json") + "' '" + (dir / "raw.bin") + "'";
    CHECK(std::system(py.c_str()) == 0);
    // Lone surrogates that no byte maps to are refused.
    CHECK_THROWS(detail::json::parse("\"\\udc10\""));

    // End to end: a class name and a path holding invalid UTF-8 and a control character.
    const std::string bad_name = std::string("cl\xE9ss\x01");
    const std::string bad_file = dir / std::string("img_\xFF\xFE_\x1B[31m.png");
    write_file(bad_file, small_png());
    const std::string missing = dir / std::string("missing_\xC3\x28.png");
    write_file(dir / "list.csv", "image,label\n\"" + bad_file + "\",\"" + bad_name + "\"\n\"" + missing + "\",other\n");
    const auto r = bounded_cli({"build", "--csv", dir / "list.csv", "--out", dir / "o", "--task", "cls", "--on-error", "skip",
                        "--json", "--report", dir / "extra_report.json"});
    REQUIRE(r.code == 0);
    write_file(dir / "stdout.json", r.out);
    for (const std::string f : {dir / "o/manifest.json", dir / "o/report.json", dir / "extra_report.json", dir / "stdout.json"}) {
        INFO(f);
        CHECK(is_valid_json_for_python(f));
    }
    const auto manifest = dataset::open(dir / "o").manifest();
    bool found = false;
    for (const auto& c : manifest.at("classes").as_array()) found = found || c.at("name").as_string() == bad_name;
    CHECK(found);
    const auto report = detail::json::parse(read_file(dir / "o/report.json"));
    CHECK(report.at("rejected").as_array().at(0).at("image").as_string() == missing);
    // inspect --json too.
    const auto ins = bounded_cli({"inspect", dir / "o", "--json"});
    write_file(dir / "inspect.json", ins.out);
    CHECK(is_valid_json_for_python(dir / "inspect.json"));
    // Log lines: the escape character and the invalid bytes are escaped, nothing raw reaches stderr.
    CHECK(r.err.find('\x1B') == std::string::npos);
    CHECK_THAT(r.err, Contains("missing_\\xC3("));
}

TEST_CASE("log lines escape control characters and cut very long paths", "[limits][log]") {
    CHECK(sanitize_log_text("a\nb\tc\x1B[2J\x7F") == "a\\nb\\tc\\x1B[2J\\x7F");
    CHECK(sanitize_log_text("caf\xC3\xA9 \xFF") == "caf\xC3\xA9 \\xFF");
    const std::string long_path = "/data/" + std::string(4000, 'x') + "/img.png";
    const std::string cut = sanitize_log_text("error: list.csv:3: " + long_path + ": cannot open");
    CHECK(cut.size() < 400);
    CHECK_THAT(cut, Contains("error: list.csv:3: /data/xxx") && Contains("bytes...]") && Contains("xxx/img.png: cannot open"));
    // End to end: a newline in a file name cannot forge a second log line.
    temp_dir dir("log");
    write_file(dir / "list.csv", "image,label\n\"" + dir.str() + "/a\nerror: forged.png\",0\n");
    const auto r = bounded_cli({"build", "--csv", dir / "list.csv", "--out", dir / "o", "--task", "cls"});
    CHECK(r.code == 1);
    CHECK_THAT(r.err, Contains("/a\\nerror: forged.png"));
    CHECK(r.err.find("\nerror: forged") == std::string::npos);
}

TEST_CASE("numeric options are range-checked and name the option (exit 2)", "[limits][options]") {
    temp_dir dir("opts");
    write_file(dir / "img.png", small_png());
    write_file(dir / "list.csv", "image,label\n" + (dir / "img.png") + ",0\n");
    const std::vector<std::string> base = {"build", "--csv", dir / "list.csv", "--out", dir / "o", "--task", "cls"};
    const std::vector<std::pair<std::vector<std::string>, std::string>> cases = {
        {{"--shard-size", "17179869185GiB"}, "--shard-size"},
        {{"--shard-size", "-1"}, "--shard-size"},
        {{"--shard-size", " 4096"}, "--shard-size"},
        {{"--shuffle", "--seed", "-1"}, "--seed"},
        {{"--shuffle", "--seed", "18446744073709551616"}, "--seed"},
        {{"--on-error", "skip", "--max-errors", "-1"}, "--max-errors"},
        {{"--threads", "-1"}, "--threads"},
        {{"--threads", "4294967297"}, "--threads"},
        {{"--level", "99"}, "--level"},
        {{"--memory-limit", "1MiB"}, "--memory-limit"},
        {{"--memory-limit", "99999999999999999999"}, "--memory-limit"},
        {{"--size", "65536x65536"}, "--size"},
        {{"--size", "-5x10"}, "--size"},
        {{"--report", dir / "no/such/folder/r.json"}, "--report"},
        {{"--report", dir.str() + "/"}, "--report"},
    };
    for (const auto& [extra, option] : cases) {
        std::vector<std::string> args = base;
        args.insert(args.end(), extra.begin(), extra.end());
        INFO(extra.front() << " " << extra.back());
        const auto r = bounded_cli(args, 10);
        CHECK(r.code == 2);
        CHECK_THAT(r.err, Contains(option));
        CHECK_FALSE(fs::exists(dir / "o"));  // refused before the build started
    }
    CHECK(bounded_cli({"export", dir / "o", "--index", "-1", "--out", dir / "x"}, 10).code == 2);
    // A report inside the dataset folder the build creates is fine.
    std::vector<std::string> in_out = base;
    in_out.insert(in_out.end(), {"--report", dir / "o/extra.json"});
    CHECK(bounded_cli(in_out, 20).code == 0);
    CHECK(fs::exists(dir / "o/extra.json"));
    fs::remove_all(dir / "o");
    // Segmentation records whose labels take them past 4 GiB: refused once the classes are known.
    std::string classes = "name,r,g,b\n";
    for (int c = 0; c < 200; ++c) classes += "c" + std::to_string(c) + "," + std::to_string(c) + ",0,0\n";
    write_file(dir / "classes.csv", classes);
    write_file(dir / "seg.csv", "image,mask\n" + (dir / "img.png") + "," + (dir / "img.png") + "\n");
    const auto r = bounded_cli({"build", "--csv", dir / "seg.csv", "--out", dir / "o", "--task", "seg", "--classes", dir / "classes.csv",
                        "--size", "8000x8000"},
                       10);
    CHECK(r.code == 2);
    CHECK_THAT(r.err, Contains("--size 8000x8000: each record would be") && Contains("4 GiB record limit"));
}

TEST_CASE("the reader bounds the manifest it parses", "[limits][reader]") {
    temp_dir dir("manifest");
    write_file(dir / "img.png", small_png());
    write_file(dir / "list.csv", "image,label\n" + (dir / "img.png") + ",0\n");
    REQUIRE(bounded_cli({"build", "--csv", dir / "list.csv", "--out", dir / "ds", "--task", "cls"}).code == 0);
    std::string text = read_file(dir / "ds/manifest.json");
    REQUIRE(dataset::open(dir / "ds").size() == 1);
    // Three million tiny values in 6 MB: refused as too many values, not parsed into ~120 MB.
    const std::size_t brace = text.rfind('}');
    std::string padded = text.substr(0, brace) + ",\"padding\":[0";
    for (int i = 1; i < 3000000; ++i) padded += ",0";
    padded += "]}";
    write_file(dir / "ds/manifest.json", padded);
    CHECK_THROWS_WITH(dataset::open(dir / "ds"), Contains("too many values"));
    // Over 64 MiB: refused by size, before reading.
    write_file(dir / "ds/manifest.json", text);
    REQUIRE(::truncate((dir / "ds/manifest.json").c_str(), off_t(65) << 20) == 0);
    CHECK_THROWS_WITH(dataset::open(dir / "ds"), Contains("more than the 67108864 bytes accepted"));
}

TEST_CASE("the list read from standard input with --csv - from standard input (a pipe is allowed there)", "[limits][fifo]") {
    temp_dir dir("stdin");
    write_file(dir / "img.png", small_png());
    write_file(dir / "list.csv", "image,label\n" + (dir / "img.png") + ",0\n" + (dir / "img.png") + ",1\n");
    const std::string cmd = "cat '" + (dir / "list.csv") + "' | timeout 20 '" + SHARDPACK_CLI + "' -q build --csv - --out '" +
                            (dir / "o") + "' --task cls";
    REQUIRE(std::system(cmd.c_str()) == 0);
    CHECK(dataset::open(dir / "o").size() == 2);
}

TEST_CASE("the memory plan: threads capped, rows in flight and the per-row share from the limit", "[limits][memory]") {
    const std::uint64_t gib = std::uint64_t(1) << 30, mib = std::uint64_t(1) << 20;
    auto p = plan_memory(6 * gib, 0, 2);
    CHECK(p.threads == 2);
    CHECK(p.rows_in_flight == 8);
    CHECK(p.per_row == 6 * gib / 10);
    CHECK(p.notes.empty());
    p = plan_memory(6 * gib, 10000, 2);
    CHECK(p.threads == 8);
    REQUIRE(p.notes.size() == 1);
    CHECK_THAT(p.notes[0], Contains("--threads 10000: using 8"));
    // Many cores: rows in flight go down to one per thread so that a row keeps 512 MiB.
    p = plan_memory(64 * gib, 0, 64);
    CHECK(p.threads == 64);
    CHECK(p.rows_in_flight == 64);
    CHECK(p.per_row == 512 * mib);
    // A small limit lowers the threads too; the parts never add up to more than the limit.
    p = plan_memory(64 * mib, 16, 16);
    CHECK(p.threads == 1);
    CHECK(p.per_row * (p.threads + p.rows_in_flight) <= 64 * mib);
    for (unsigned cores : {1u, 2u, 7u, 64u})
        for (std::uint64_t limit : {64 * mib, 300 * mib, 6 * gib, 100 * gib}) {
            const auto q = plan_memory(limit, 0, cores);
            CHECK(q.rows_in_flight >= q.threads);
            CHECK(q.per_row * (q.threads + q.rows_in_flight) <= limit);
        }
}
