// dump_dataset DIR: one JSON line per record (index, key, size, class id, CRC-32s of the image
// and label bytes) through the C++ reader, in the same form as tests/spec/read_shardpack.py
// prints through its own reading of the spec, so the two can be compared byte for byte.
#include <zlib.h>

#include <cstdio>
#include <string>

#include "shardpack/reader.hpp"

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
            std::printf("{\"class_id\": %d, \"height\": %zu, \"image_crc\": %lu, \"index\": %zu, \"key\": %s, "
                        "\"label_crc\": %lu, \"width\": %zu}\n",
                        s.class_id(), s.height(), crc(img_data, img_bytes), i,
                        shardpack::detail::json(std::string(s.key())).dump(-1).c_str(), crc(label, label_bytes), s.width());
        }
        return 0;
    } catch (const std::exception& e) {
        std::fprintf(stderr, "dump_dataset: %s\n", e.what());
        return 1;
    }
}
