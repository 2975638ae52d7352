// Reads a dataset through the installed header: every record by at(), a float batch through
// read_batch, a rank share, an epoch in the blocks order (shardpack/order.hpp), and a weighted
// mix of the dataset with itself (shardpack/mix.hpp), read in a batch (shardpack/mix_reader.hpp).
// Prints "ok N" and exits 0 when everything agrees.
#include <shardpack/mix.hpp>
#include <shardpack/mix_reader.hpp>
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
        // The global shuffle with the default options (no order_options{} to spell out).
        if (shardpack::epoch_order(ds.size(), 1, 0, 0, 1, false).size() != ds.size()) return 1;
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
        // The dataset mixed with itself 3:1, an epoch of 8 samples: 6 of the first, 2 of the second.
        std::vector<shardpack::mix_source> parts(2);
        for (auto& p : parts) p.records = ds.size();
        parts[0].weight = 3;
        shardpack::mix_options mo;
        mo.epoch_size = 8;
        const auto offsets = shardpack::mix_offsets(parts);
        std::size_t from_first = 0;
        for (const auto g : shardpack::mix_epoch_order(parts, 1, 0, 0, 1, false, mo)) {
            const auto where = shardpack::mix_locate(offsets, g);
            if (where.first == 0) ++from_first;
            if (ds.at(static_cast<std::size_t>(where.second)).key().empty()) return 1;
        }
        if (from_first != 6) return 1;
        // The same mix read in a batch (shardpack/mix_reader.hpp): uint8 images as stored.
        if (schema.fixed_height) {
            const shardpack::mixed_dataset mixed({ds, ds}, {3, 1}, mo);
            const std::size_t per_image = schema.fixed_height * schema.fixed_width * schema.channels;
            std::vector<std::uint8_t> images(2 * per_image), alone(per_image);
            shardpack::mix_read_context mctx;
            shardpack::sample_buffers out;
            out.image_u8 = images.data();
            out.image_capacity = images.size();
            const std::size_t batch[2] = {0, ds.size()};  // record 0 of each
            mixed.read_batch(batch, 2, out, mctx);
            shardpack::read_context ctx;
            out.image_u8 = alone.data();
            out.image_capacity = alone.size();
            ds.read_into(0, out, ctx);
            for (std::size_t j = 0; j < 2; ++j)
                for (std::size_t v = 0; v < per_image; ++v)
                    if (images[j * per_image + v] != alone[v]) return 1;
        }
        std::printf("ok %zu records, %zu pixels, %zu classes\n", ds.size(), pixels, ds.classes().size());
        return 0;
    } catch (const shardpack::error& e) {
        std::fprintf(stderr, "consumer: %s\n", e.what());
        return 1;
    }
}
