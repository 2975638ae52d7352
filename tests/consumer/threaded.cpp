// Runs the threaded read_batch example of include/shardpack/README.md (extracted by
// run_consumer_test.sh into threaded_example.hpp) and checks it against one read_batch call on
// the calling thread, for 1, 2 and 3 threads. Prints "ok threaded N" and exits 0 when they agree.
#include "threaded_example.hpp"

#include <cstdio>

int main(int argc, char** argv) {
    if (argc != 2) {
        std::fprintf(stderr, "usage: threaded DATASET\n");
        return 2;
    }
    try {
        const auto ds = shardpack::dataset::open(argv[1]);
        std::vector<std::size_t> indices;
        for (std::size_t i = ds.size(); i-- > 0;) indices.push_back(i);
        std::vector<float> want_images;
        std::vector<std::int64_t> want_labels;
        read_batch_threaded(ds, indices, 1, want_images, want_labels);
        // One read_batch call, without the example's code, for the same outputs.
        shardpack::read_context ctx;
        const auto size = ds.record_size(indices[0], ctx);
        const std::size_t n = indices.size(), c = ds.schema().channels;
        std::vector<float> images(n * c * size.first * size.second);
        std::vector<std::int64_t> labels(ds.schema().task == shardpack::task::segmentation ? n * size.first * size.second : n);
        shardpack::sample_buffers out;
        out.image_f32 = images.data();
        out.image_capacity = images.size();
        out.norm = shardpack::normalization::imagenet();
        out.channels_first = true;
        if (labels.size() > n) {
            out.label_index_i64 = labels.data();
            out.label_index_capacity = labels.size();
        } else {
            out.class_id_i64 = labels.data();
        }
        ds.read_batch(indices.data(), n, out, ctx);
        if (images != want_images || labels != want_labels) return 1;
        for (std::size_t threads : {2, 3}) {
            std::vector<float> got_images;
            std::vector<std::int64_t> got_labels;
            read_batch_threaded(ds, indices, threads, got_images, got_labels);
            if (got_images != images || got_labels != labels) return 1;
        }
        std::printf("ok threaded %zu records of %zux%zu\n", n, size.second, size.first);
        return 0;
    } catch (const shardpack::error& e) {
        std::fprintf(stderr, "threaded: %s\n", e.what());
        return 1;
    }
}
