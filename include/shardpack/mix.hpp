// shardpack/mix.hpp: weighted mixing of several datasets, and resuming an epoch on a different
// number of ranks (header-only, C++17, the standard library and order.hpp only). The Python
// package calls these same functions (shardpack.mix, the torch Sampler), so C++ and Python
// readers see the same indices for the same (seed, epoch, rank, world).
//
//   std::vector<shardpack::mix_source> parts(3);                 // one per dataset
//   parts[0].records = a.size(); parts[0].weight = 0.6;          // and b 0.3, c 0.1
//   shardpack::mix_options o;                                    // epoch_size 0: the sum of the sizes
//   auto mine = shardpack::mix_epoch_order(parts, seed, epoch, rank, world, /*drop_last=*/false, o);
//   auto offsets = shardpack::mix_offsets(parts);
//   for (std::uint64_t g : mine) {
//       const auto [part, record] = shardpack::mix_locate(offsets, g);   // read `record` of dataset `part`
//   }
//   // Labels: match_classes({class names of a, of b, of c}).ids[part][id] is the mix's class id.
//   // Batches of a mix, labels renumbered, crops to one size: mix_reader.hpp (mixed_dataset).
//
// A mixed index g is a position in the concatenation of the datasets: dataset k holds
// [offsets[k], offsets[k + 1]).
//
// The epoch (formats/orders.md): epoch_size L samples (default: the sum of the
// datasets' sizes), of which dataset k gives c_k, the largest-remainder apportionment of L in
// proportion to the weights: sum c_k = L and |c_k - L w_k / sum w| < 1.
// - Without replacement, dataset k's samples are a stream of passes, each pass a permutation of
//   its records (its own order: global or blocks, shuffled or not); epoch e takes the stream's
//   positions [e c_k, (e + 1) c_k). A record is drawn again only after every record of its
//   dataset was drawn (a dataset whose c_k exceeds its size is read more than once an epoch).
// - With replacement, each of the c_k samples is a record drawn uniformly (global order only).
// - The datasets' streams are merged: shuffled, in a uniformly random interleaving (each
//   dataset's samples keep their stream order, so the blocks order keeps its locality); not
//   shuffled, smoothly (the j-th sample of dataset k at (j + 1/2) / c_k of the epoch).
// Ranks split the merged order as epoch_order splits a dataset's (equal shares, padded or
// dropped; contiguous shares for the blocks order, else strided).
//
// Resuming on a different world (resumed_order): the rest of an epoch is what no rank has read
// of it yet, in the order's own order; it is split between the new ranks as an epoch is. A
// chain of such changes (4 ranks, then 2, then 3) is a list of resume_stage.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include "order.hpp"

namespace shardpack {

struct mix_source {
    std::uint64_t records = 0;                // the dataset's size
    double weight = 1.0;                      // finite, 0 or more (at least one above 0)
    std::size_t block = 64;                   // blocks order: records per block (at most)
    std::vector<std::uint64_t> shard_starts;  // blocks order: first record of each shard (empty: one shard)
};

struct mix_options {
    std::uint64_t epoch_size = 0;  // samples per epoch, all ranks together; 0: the sum of the sizes
    bool replacement = false;
    bool shuffle = true;
    order_kind kind = order_kind::global;
    std::size_t window = 16;  // blocks order: blocks per window
};

namespace detail {
__extension__ typedef unsigned __int128 mix_u128;  // exact products of 64-bit values (GCC, Clang)

// The weights as integers in exact proportion: each scaled by the one power of two that puts the
// largest in [2^51, 2^52) (exact in binary floating point), rounded (only weights below 2^-52
// of the largest lose anything).
inline std::vector<std::uint64_t> mix_weight_units(const std::vector<double>& weights) {
    if (weights.empty()) throw std::invalid_argument("shardpack mix: no datasets");
    double largest = 0;
    for (std::size_t k = 0; k < weights.size(); ++k) {
        const double w = weights[k];
        if (!std::isfinite(w) || w < 0)
            throw std::invalid_argument("shardpack mix: weight " + std::to_string(k) + " (" + std::to_string(w) +
                                        ") must be a finite number, 0 or more");
        if (w > largest) largest = w;
    }
    if (largest == 0) throw std::invalid_argument("shardpack mix: every weight is 0");
    int exponent = 0;
    std::frexp(largest, &exponent);  // largest = f 2^exponent, f in [0.5, 1)
    std::vector<std::uint64_t> units(weights.size());
    for (std::size_t k = 0; k < weights.size(); ++k)
        units[k] = static_cast<std::uint64_t>(std::llround(std::ldexp(weights[k], 52 - exponent)));
    return units;
}
}  // namespace detail

// Samples per epoch from each dataset: the largest-remainder apportionment of epoch_size in
// proportion to the weights (ties to the earlier dataset).
inline std::vector<std::uint64_t> mix_counts(const std::vector<double>& weights, std::uint64_t epoch_size) {
    const std::vector<std::uint64_t> units = detail::mix_weight_units(weights);
    detail::mix_u128 total = 0;
    for (const std::uint64_t u : units) total += u;
    std::vector<std::uint64_t> counts(units.size());
    std::vector<detail::mix_u128> remainders(units.size());
    std::uint64_t given = 0;
    for (std::size_t k = 0; k < units.size(); ++k) {
        const detail::mix_u128 product = static_cast<detail::mix_u128>(units[k]) * epoch_size;
        counts[k] = static_cast<std::uint64_t>(product / total);
        remainders[k] = product % total;
        given += counts[k];
    }
    for (std::uint64_t left = epoch_size - given; left > 0; --left) {  // fewer than the datasets
        std::size_t best = 0;
        for (std::size_t k = 1; k < units.size(); ++k)
            if (remainders[k] > remainders[best]) best = k;
        ++counts[best];
        remainders[best] = 0;
    }
    return counts;
}

// offsets[k]: the mixed index of dataset k's record 0; offsets[size]: the sum of the sizes.
inline std::vector<std::uint64_t> mix_offsets(const std::vector<mix_source>& sources) {
    std::vector<std::uint64_t> offsets(1, 0);
    for (const mix_source& s : sources) offsets.push_back(offsets.back() + s.records);
    return offsets;
}

// (dataset, record) of mixed index g.
inline std::pair<std::size_t, std::uint64_t> mix_locate(const std::vector<std::uint64_t>& offsets, std::uint64_t g) {
    if (offsets.empty() || g >= offsets.back())
        throw std::out_of_range("shardpack mix: index " + std::to_string(g) + " is out of range");
    const auto it = std::upper_bound(offsets.begin(), offsets.end(), g);
    const std::size_t k = static_cast<std::size_t>(it - offsets.begin() - 1);
    return {k, g - offsets[k]};
}

inline std::uint64_t mix_epoch_size(const std::vector<mix_source>& sources, const mix_options& options) {
    return options.epoch_size ? options.epoch_size : mix_offsets(sources).back();
}

// The whole mixed order of an epoch (mixed indices, epoch_size of them) before it is split.
inline std::vector<std::uint64_t> mix_full_order(const std::vector<mix_source>& sources, std::uint64_t seed,
                                                 std::uint64_t epoch, const mix_options& options) {
    std::vector<double> weights;
    for (const mix_source& s : sources) weights.push_back(s.weight);
    const std::uint64_t size = mix_epoch_size(sources, options);
    const std::vector<std::uint64_t> counts = mix_counts(weights, size);
    const std::vector<std::uint64_t> offsets = mix_offsets(sources);
    if (options.replacement && options.shuffle && options.kind == order_kind::blocks)
        throw std::invalid_argument("shardpack mix: replacement draws single records: it takes the global order");

    // Each dataset's samples of this epoch, in stream order.
    std::vector<std::vector<std::uint64_t>> streams(sources.size());
    for (std::size_t k = 0; k < sources.size(); ++k) {
        const std::uint64_t n = sources[k].records, c = counts[k];
        if (c == 0) continue;
        if (n == 0)
            throw std::invalid_argument("shardpack mix: dataset " + std::to_string(k) +
                                        " has no records but a weight above 0");
        const std::uint64_t dataset_seed = order_random(seed, k, 3).next();
        std::vector<std::uint64_t>& out = streams[k];
        out.reserve(static_cast<std::size_t>(c));
        if (options.replacement) {
            if (!options.shuffle) throw std::invalid_argument("shardpack mix: replacement needs shuffle");
            order_random random(dataset_seed, epoch, 5);
            for (std::uint64_t j = 0; j < c; ++j) out.push_back(offsets[k] + random.below(n));
            continue;
        }
        if (epoch > (~std::uint64_t(0) - c) / c)
            throw std::invalid_argument("shardpack mix: epoch " + std::to_string(epoch) + " is too large");
        order_options o;
        o.shuffle = options.shuffle;
        o.kind = options.kind;
        o.block = sources[k].block;
        o.window = options.window;
        o.shard_starts = sources[k].shard_starts;
        std::uint64_t position = epoch * c;  // in the stream of passes
        const std::uint64_t end = position + c;
        while (position < end) {
            const std::uint64_t pass = position / n, first = position % n;
            const std::vector<std::uint64_t> order = full_order(n, dataset_seed, pass, o);
            const std::uint64_t last = std::min<std::uint64_t>(n, first + (end - position));
            for (std::uint64_t i = first; i < last; ++i) out.push_back(offsets[k] + order[i]);
            position += last - first;
        }
    }

    // The merge: which dataset each position of the epoch takes its next sample from.
    std::vector<std::uint32_t> from;
    from.reserve(static_cast<std::size_t>(size));
    if (options.shuffle) {
        for (std::size_t k = 0; k < sources.size(); ++k) from.insert(from.end(), counts[k], static_cast<std::uint32_t>(k));
        order_random random(seed, epoch, 4);
        detail::shuffle_range(from.begin(), from.end(), random);
    } else {
        // Smooth: the j-th sample of dataset k goes at (2j + 1) / (2 c_k), earlier dataset first on ties.
        std::vector<std::uint64_t> next(sources.size(), 0);
        for (std::uint64_t p = 0; p < size; ++p) {
            std::size_t best = sources.size();
            for (std::size_t k = 0; k < sources.size(); ++k) {
                if (next[k] >= counts[k]) continue;
                if (best == sources.size() ||
                    static_cast<detail::mix_u128>(2 * next[k] + 1) * counts[best] <
                        static_cast<detail::mix_u128>(2 * next[best] + 1) * counts[k])
                    best = k;
            }
            from.push_back(static_cast<std::uint32_t>(best));
            ++next[best];
        }
    }
    std::vector<std::uint64_t> order;
    order.reserve(static_cast<std::size_t>(size));
    std::vector<std::size_t> taken(sources.size(), 0);
    for (const std::uint32_t k : from) order.push_back(streams[k][taken[k]++]);
    return order;
}

// Positions of an order of m that rank `rank` of `world` reads, in its reading order: equal
// shares, padded by wrapping to the start (drop_last false) or leaving out the tail; contiguous
// shares or strided ones (rank r: r, r + world, ...), as epoch_order splits an epoch.
inline std::vector<std::uint64_t> rank_positions(std::uint64_t m, std::size_t rank, std::size_t world, bool drop_last,
                                                 bool contiguous) {
    const std::uint64_t per_rank = rank_count(m, world, drop_last);
    if (rank >= world)
        throw std::invalid_argument("shardpack order: rank " + std::to_string(rank) + " is not in [0, world) for world " +
                                    std::to_string(world));
    std::vector<std::uint64_t> positions(static_cast<std::size_t>(per_rank));
    for (std::uint64_t k = 0; k < per_rank; ++k) {
        const std::uint64_t p = contiguous ? rank * per_rank + k : k * world + rank;
        positions[k] = p % m;
    }
    return positions;
}

// The indices rank `rank` of `world` reads in a mixed epoch (see the top of this file).
inline std::vector<std::uint64_t> mix_epoch_order(const std::vector<mix_source>& sources, std::uint64_t seed,
                                                  std::uint64_t epoch, std::size_t rank, std::size_t world,
                                                  bool drop_last, const mix_options& options) {
    rank_count(0, world, drop_last);  // checks world before the order is computed
    const std::vector<std::uint64_t> order = mix_full_order(sources, seed, epoch, options);
    const bool contiguous = options.shuffle && options.kind == order_kind::blocks;
    std::vector<std::uint64_t> mine;
    for (const std::uint64_t p : rank_positions(order.size(), rank, world, drop_last, contiguous))
        mine.push_back(order[p]);
    return mine;
}

// One world an epoch was read on before it was resumed: consumed[r] is how many of its share
// rank r read there (world = consumed.size()).
struct resume_stage {
    std::vector<std::uint64_t> consumed;
};

// What remains of an epoch's `order` (its whole order: full_order or mix_full_order) after the
// stages, in order: at each stage the remainder so far was split between that stage's ranks
// (as rank_positions splits, with drop_last and contiguous) and each read the first consumed[r]
// of its share. A position read by any rank, pads included, is gone; with drop_last the tail that
// no rank of that stage would read is gone too (it was left out of the epoch).
inline std::vector<std::uint64_t> remaining_order(std::vector<std::uint64_t> order,
                                                  const std::vector<resume_stage>& stages, bool drop_last,
                                                  bool contiguous) {
    for (std::size_t s = 0; s < stages.size(); ++s) {
        const std::size_t world = stages[s].consumed.size();
        const std::uint64_t m = order.size(), per_rank = rank_count(m, world, drop_last);
        std::vector<bool> gone(static_cast<std::size_t>(m), false);
        if (drop_last)
            for (std::uint64_t p = per_rank * world; p < m; ++p) gone[p] = true;
        for (std::size_t r = 0; r < world; ++r) {
            const std::uint64_t read = stages[s].consumed[r];
            if (read > per_rank)
                throw std::invalid_argument("shardpack order: resume stage " + std::to_string(s) + ": rank " +
                                            std::to_string(r) + " read " + std::to_string(read) + " of a share of " +
                                            std::to_string(per_rank));
            const std::vector<std::uint64_t> positions = rank_positions(m, r, world, drop_last, contiguous);
            for (std::uint64_t k = 0; k < read; ++k) gone[positions[k]] = true;
        }
        std::vector<std::uint64_t> rest;
        for (std::uint64_t p = 0; p < m; ++p)
            if (!gone[p]) rest.push_back(order[p]);
        order = std::move(rest);
    }
    return order;
}

// The indices rank `rank` of `world` reads of the rest of an epoch (remaining_order), split as
// an epoch is. With no stages: the rank's share of the whole epoch (epoch_order's).
inline std::vector<std::uint64_t> resumed_order(std::vector<std::uint64_t> order,
                                                const std::vector<resume_stage>& stages, std::size_t rank,
                                                std::size_t world, bool drop_last, bool contiguous) {
    const std::vector<std::uint64_t> rest = remaining_order(std::move(order), stages, drop_last, contiguous);
    std::vector<std::uint64_t> mine;
    for (const std::uint64_t p : rank_positions(rest.size(), rank, world, drop_last, contiguous)) mine.push_back(rest[p]);
    return mine;
}

// Classes matched by name (what shardpack.mix does in Python): the mix's class names (the first
// dataset's, then every new name of the others, in order) and, for each dataset, the mix's id
// of each of its class ids: a reader renumbers class ids and index maps through it (and the
// dataset's ignore_value to the mix's: 255 up to 255 classes, else 65535). A dataset that names
// a class twice is refused (which id would its records mean?).
struct mix_classes {
    std::vector<std::string> names;
    std::vector<std::vector<std::uint32_t>> ids;  // ids[dataset][its class id]: the mix's class id
};

inline mix_classes match_classes(const std::vector<std::vector<std::string>>& per_dataset) {
    mix_classes m;
    for (std::size_t k = 0; k < per_dataset.size(); ++k) {
        std::vector<std::uint32_t> ids;
        const std::vector<std::string>& names = per_dataset[k];
        for (std::size_t j = 0; j < names.size(); ++j) {
            for (std::size_t i = 0; i < j; ++i)
                if (names[i] == names[j])
                    throw std::invalid_argument("shardpack mix: dataset " + std::to_string(k) + " names class \"" +
                                                names[j] + "\" twice (ids " + std::to_string(i) + " and " +
                                                std::to_string(j) + "): classes are matched by name");
            const auto it = std::find(m.names.begin(), m.names.end(), names[j]);
            ids.push_back(static_cast<std::uint32_t>(it - m.names.begin()));
            if (it == m.names.end()) m.names.push_back(names[j]);
        }
        m.ids.push_back(std::move(ids));
    }
    return m;
}

}  // namespace shardpack
