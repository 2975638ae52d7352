// Reads a dataset through the installed header: every record by at(), a float batch through
// read_batch, a rank share, and an epoch in the blocks order (shardpack/order.hpp). Prints "ok N"
// and exits 0 when everything agrees.
#include <shardpack/order.hpp>
#include <shardpack/reader.hpp>

#include <cstdio>
#include <vector>

int main(int argc, char** argv) {
    if (argc != 2) {
        std::fprintf(stderr, "usage: consumer DATASET\n");
        return 2;
    }
    try {
        const auto ds = shardpack::dataset::open(argv[1]);
        const auto& schema = ds.schema();
        std::size_t pixels = 0;
        for (std::size_t i = 0; i < ds.size(); ++i) {
            const shardpack::sample s = ds.at(i);
            if (s.key().empty() || s.image().shape()[2] != schema.channels) return 1;
            pixels += s.image().shape()[0] * s.image().shape()[1];
        }
        if (schema.fixed_height) {
            const std::size_t per_image = schema.fixed_height * schema.fixed_width * schema.channels;
            const std::size_t per_label = schema.fixed_height * schema.fixed_width * schema.class_count;
            std::vector<float> images(2 * per_image), labels(2 * per_label);
            shardpack::read_context ctx;
            shardpack::sample_buffers out;
            out.image_f32 = images.data();
            out.image_capacity = images.size();
            out.label_f32 = labels.data();
            out.label_capacity = labels.size();
            const std::size_t batch[2] = {0, ds.size() - 1};
            ds.read_batch(batch, 2, out, ctx);
            for (float v : images)
                if (v < 0.0f || v > 1.0f) return 1;
        }
        const auto share = ds.rank_share(0, 2);
        if (share.size() != (ds.size() + 1) / 2) return 1;
        shardpack::order_options o;
        o.kind = shardpack::order_kind::blocks;
        o.shard_starts = shardpack::shard_starts_of(ds);
        const auto epoch = shardpack::epoch_order(ds.size(), 1, 0, 0, 1, false, o);
        std::vector<char> seen(ds.size(), 0);
        for (const auto i : epoch) seen.at(i) = 1;
        for (const char s : seen)
            if (!s) return 1;
        std::printf("ok %zu records, %zu pixels, %zu classes\n", ds.size(), pixels, ds.classes().size());
        return 0;
    } catch (const shardpack::error& e) {
        std::fprintf(stderr, "consumer: %s\n", e.what());
        return 1;
    }
}
