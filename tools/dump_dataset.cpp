// dump_dataset DIR: one JSON line per record (index, key, size, class id, CRC-32s of the image
// and label bytes) through the C++ reader, in the same form as tests/spec/read_shardpack.py
// prints through its own reading of the spec, so the two can be compared byte for byte. With
// per-sample fields (1.5), "fields": one value per field, floats as their IEEE bit patterns.
#include <zlib.h>

#include <cstdio>
#include <cstring>
#include <string>

#include "shardpack/reader.hpp"

namespace {
template <class T>
unsigned long long bits(T v) {
    unsigned long long b = 0;
    std::memcpy(&b, &v, sizeof v);
    return b;
}

// A list as Python's json.dumps writes it: "[a, b]".
template <class It, class F>
std::string list(It first, It last, F item) {
    std::string out = "[";
    for (It it = first; it != last; ++it) out += (it == first ? "" : ", ") + item(*it);
    return out + "]";
}

std::string fields_json(const std::vector<shardpack::field_value>& values) {
    using shardpack::field_kind;
    return list(values.begin(), values.end(), [](const shardpack::field_value& v) -> std::string {
        switch (v.kind) {
            case field_kind::int64: return std::to_string(v.ints.at(0));
            case field_kind::float64: return std::to_string(bits(v.floats.at(0)));
            case field_kind::string: return shardpack::detail::json(v.text).dump(-1);
            case field_kind::int64_list:
                return list(v.ints.begin(), v.ints.end(), [](std::int64_t x) { return std::to_string(x); });
            case field_kind::float64_list:
                return list(v.floats.begin(), v.floats.end(), [](double x) { return std::to_string(bits(x)); });
            case field_kind::tags:
                return list(v.ids.begin(), v.ids.end(), [](std::uint32_t x) { return std::to_string(x); });
            case field_kind::boxes:
                return list(v.boxes.begin(), v.boxes.end(), [](const shardpack::box& b) {
                    return "[" + std::to_string(bits(b.x0)) + ", " + std::to_string(bits(b.y0)) + ", " +
                           std::to_string(bits(b.x1)) + ", " + std::to_string(bits(b.y1)) + ", " + std::to_string(b.label) + "]";
                });
        }
        return "null";
    });
}
}  // namespace

int main(int argc, char** argv) {
    if (argc != 2) {
        std::fprintf(stderr, "usage: dump_dataset DIR\n");
        return 2;
    }
    try {
        const auto ds = shardpack::dataset::open(argv[1]);
        for (std::size_t i = 0; i < ds.size(); ++i) {
            const auto s = ds.at(i);
            // The stored image bytes (uint16 images: little-endian, as the spec reader sees them).
            const bool wide = ds.schema().image_value_bytes == 2;
            const auto* img_data = wide ? reinterpret_cast<const unsigned char*>(s.image16().data()) : s.image().data();
            const std::size_t img_bytes = wide ? s.image16().bytes() : s.image().bytes();
            const unsigned char* label = nullptr;
            std::size_t label_bytes = 0;
            if (ds.schema().task == shardpack::task::segmentation) {
                if (ds.schema().label_value_bytes == 2) {
                    label = reinterpret_cast<const unsigned char*>(s.label_index16().data());
                    label_bytes = s.label_index16().bytes();
                } else {
                    label = s.label().data();
                    label_bytes = s.label().bytes();
                }
            }
            const auto crc = [](const unsigned char* p, std::size_t n) {
                return crc32(crc32(0L, Z_NULL, 0), p ? p : reinterpret_cast<const Bytef*>(""), static_cast<uInt>(n));
            };
            const std::string fields = ds.fields().empty() ? "" : "\"fields\": " + fields_json(s.fields()) + ", ";
            std::printf("{\"class_id\": %d, %s\"height\": %zu, \"image_crc\": %lu, \"index\": %zu, \"key\": %s, "
                        "\"label_crc\": %lu, \"width\": %zu}\n",
                        s.class_id(), fields.c_str(), s.height(), crc(img_data, img_bytes), i,
                        shardpack::detail::json(std::string(s.key())).dump(-1).c_str(), crc(label, label_bytes), s.width());
        }
        return 0;
    } catch (const std::exception& e) {
        std::fprintf(stderr, "dump_dataset: %s\n", e.what());
        return 1;
    }
}
