// shardpack/order.hpp: the orders in which an epoch reads a dataset (header-only, C++17, the
// standard library only). The Python package calls these same functions (shardpack.permutation,
// shardpack.epoch_order), so C++ and Python readers see the same indices for the same
// (seed, epoch).
//
//   #include <shardpack/order.hpp>
//   // The global shuffle (the default options):
//   std::vector<std::uint64_t> mine = shardpack::epoch_order(ds.size(), seed, epoch, rank, world,
//                                                            /*drop_last=*/false);
//   // The locality-aware shuffle:
//   shardpack::order_options o;                        // shuffle=true, kind=global
//   o.kind = shardpack::order_kind::blocks;
//   o.shard_starts = shardpack::shard_starts_of(ds);   // blocks never span two shards
//   mine = shardpack::epoch_order(ds.size(), seed, epoch, rank, world, /*drop_last=*/false, o);
//
// Two shuffles:
// - global: a uniformly random permutation of 0..n-1 (Fisher-Yates). The best statistics; cold,
//   every record is a random seek.
// - blocks: the dataset is cut into blocks of about `block` consecutive records (never across
//   a shard boundary); the blocks are permuted; consecutive groups of `window` blocks in that
//   permuted order form windows, and the records of each window are permuted among themselves.
//   A reader that reads a window's blocks ahead as whole byte ranges (dataset::prefetch, the
//   torch Loader does it) reads the disk in runs of a block instead of one record per seek. The
//   price: records of one batch come from at most `window` blocks, so neighbours in the dataset
//   stay near each other in the epoch (scripts/bench/README.md, "Cold storage": how far
//   records move and how much a class-sorted dataset's batches are correlated, measured).
//
// Both depend on (n, seed, epoch) and, for blocks, (block, window, shard_starts) only: the same
// for any number of threads or DataLoader workers and on every platform (a splitmix64 stream
// and rejection sampling, no std:: distribution, whose results vary between libraries).
//
// Ranks: every rank of `world` gets the same number of indices. drop_last=false pads the order
// by wrapping around to its start (ceil(n / world) each); drop_last=true leaves out the tail
// (n / world each). The global shuffle gives rank r positions r, r + world, ...; the block
// shuffle gives rank r the r-th contiguous share, so that each rank reads whole blocks.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

namespace shardpack {

enum class order_kind { global, blocks };

struct order_options {
    bool shuffle = true;                     // false: 0..n-1 in order (then kind does not matter)
    order_kind kind = order_kind::global;
    std::size_t block = 64;                  // blocks: records per block (at most)
    std::size_t window = 16;                 // blocks: blocks per window
    std::vector<std::uint64_t> shard_starts; // blocks: first record of each shard (empty: one shard)
};

// A stream of 64-bit random numbers for (seed, epoch, stream): splitmix64 (Steele, Lea, Flood
// 2014) started from a mix of the three, so that nearby seeds and epochs give unrelated streams.
class order_random {
public:
    order_random(std::uint64_t seed, std::uint64_t epoch, std::uint64_t stream) {
        state_ = mix(mix(mix(seed ^ 0x5348415244504143ull) ^ epoch) ^ stream);  // "SHARDPAC"
    }
    std::uint64_t next() {
        state_ += 0x9e3779b97f4a7c15ull;
        return mix(state_);
    }
    // Uniform in [0, bound), bound >= 1, without modulo bias: values below 2^64 mod bound are
    // drawn again.
    std::uint64_t below(std::uint64_t bound) {
        const std::uint64_t threshold = (0 - bound) % bound;
        for (;;) {
            const std::uint64_t r = next();
            if (r >= threshold) return r % bound;
        }
    }

private:
    static std::uint64_t mix(std::uint64_t z) {
        z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
        z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
        return z ^ (z >> 31);
    }
    std::uint64_t state_;
};

namespace detail {
// Fisher-Yates over [first, last).
template <class It>
void shuffle_range(It first, It last, order_random& random) {
    const auto count = static_cast<std::uint64_t>(last - first);
    for (std::uint64_t i = count; i > 1; --i) std::swap(first[i - 1], first[random.below(i)]);
}
}  // namespace detail

// The global shuffle: a uniformly random permutation of 0..n-1 for (seed, epoch).
inline std::vector<std::uint64_t> permutation(std::uint64_t n, std::uint64_t seed, std::uint64_t epoch) {
    std::vector<std::uint64_t> order(static_cast<std::size_t>(n));
    for (std::uint64_t i = 0; i < n; ++i) order[i] = i;
    order_random random(seed, epoch, 0);
    detail::shuffle_range(order.begin(), order.end(), random);
    return order;
}

// The blocks: their first records, ascending, then n. Each shard [s_k, s_k+1) is cut into
// ceil(size / block) blocks of equal size (differing by at most one record), so no block spans
// two shards and none is much smaller than the others. shard_starts: ascending, starting at 0,
// each below n (empty: the whole dataset is one shard).
inline std::vector<std::uint64_t> order_blocks(std::uint64_t n, std::size_t block,
                                               const std::vector<std::uint64_t>& shard_starts) {
    if (block == 0) throw std::invalid_argument("shardpack order: block must be at least 1 record");
    std::vector<std::uint64_t> shards = shard_starts;
    if (shards.empty()) shards.push_back(0);
    if (shards[0] != 0) throw std::invalid_argument("shardpack order: shard_starts must start at record 0");
    for (std::size_t k = 1; k < shards.size(); ++k)
        if (shards[k] <= shards[k - 1] || shards[k] >= n)
            throw std::invalid_argument("shardpack order: shard_starts must ascend strictly and stay below n (" +
                                        std::to_string(n) + ")");
    std::vector<std::uint64_t> starts;
    if (n == 0) {
        starts.push_back(0);
        return starts;
    }
    shards.push_back(n);
    for (std::size_t k = 0; k + 1 < shards.size(); ++k) {
        const std::uint64_t first = shards[k], size = shards[k + 1] - first;
        const std::uint64_t count = (size + block - 1) / block;
        for (std::uint64_t b = 0; b < count; ++b) starts.push_back(first + size * b / count);
    }
    starts.push_back(n);
    return starts;
}

// The locality-aware shuffle (see the top of this file): a permutation of 0..n-1.
inline std::vector<std::uint64_t> block_permutation(std::uint64_t n, std::uint64_t seed, std::uint64_t epoch,
                                                    std::size_t block, std::size_t window,
                                                    const std::vector<std::uint64_t>& shard_starts) {
    if (window == 0) throw std::invalid_argument("shardpack order: window must be at least 1 block");
    const std::vector<std::uint64_t> starts = order_blocks(n, block, shard_starts);
    const std::size_t blocks = starts.size() - 1;
    std::vector<std::uint64_t> block_order(blocks);
    for (std::size_t b = 0; b < blocks; ++b) block_order[b] = b;
    order_random block_random(seed, epoch, 1);
    detail::shuffle_range(block_order.begin(), block_order.end(), block_random);

    std::vector<std::uint64_t> order;
    order.reserve(static_cast<std::size_t>(n));
    order_random record_random(seed, epoch, 2);
    for (std::size_t w = 0; w < blocks; w += window) {
        const std::size_t window_start = order.size();
        for (std::size_t b = w; b < std::min(blocks, w + window); ++b)
            for (std::uint64_t i = starts[block_order[b]]; i < starts[block_order[b] + 1]; ++i) order.push_back(i);
        detail::shuffle_range(order.begin() + static_cast<std::ptrdiff_t>(window_start), order.end(), record_random);
    }
    return order;
}

// The whole order of an epoch before it is split between ranks.
inline std::vector<std::uint64_t> full_order(std::uint64_t n, std::uint64_t seed, std::uint64_t epoch,
                                             const order_options& options = order_options{}) {
    if (!options.shuffle) {
        std::vector<std::uint64_t> order(static_cast<std::size_t>(n));
        for (std::uint64_t i = 0; i < n; ++i) order[i] = i;
        return order;
    }
    if (options.kind == order_kind::blocks)
        return block_permutation(n, seed, epoch, options.block, options.window, options.shard_starts);
    return permutation(n, seed, epoch);
}

// How many indices each rank reads.
inline std::uint64_t rank_count(std::uint64_t n, std::size_t world, bool drop_last) {
    if (world == 0) throw std::invalid_argument("shardpack order: world must be at least 1");
    return drop_last ? n / world : (n + world - 1) / world;
}

// The indices rank `rank` of `world` reads in epoch `epoch` (see the top of this file); without
// options, the global shuffle.
inline std::vector<std::uint64_t> epoch_order(std::uint64_t n, std::uint64_t seed, std::uint64_t epoch,
                                              std::size_t rank, std::size_t world, bool drop_last,
                                              const order_options& options = order_options{}) {
    const std::uint64_t per_rank = rank_count(n, world, drop_last);
    if (rank >= world)
        throw std::invalid_argument("shardpack order: rank " + std::to_string(rank) + " is not in [0, world) for world " +
                                    std::to_string(world));
    const std::vector<std::uint64_t> order = full_order(n, seed, epoch, options);
    std::vector<std::uint64_t> mine(static_cast<std::size_t>(per_rank));
    // Position p of the padded order is order[p mod n] (padding wraps around to the start).
    const bool contiguous = options.shuffle && options.kind == order_kind::blocks;
    for (std::uint64_t k = 0; k < per_rank; ++k) {
        const std::uint64_t p = contiguous ? rank * per_rank + k : k * world + rank;
        mine[k] = order[p % n];
    }
    return mine;
}

// Read-ahead of whole blocks for the blocks order (what the torch Loader does in Python, see
// shardpack/_readahead.py): before position p of an epoch's order is read, every block that
// positions [p, p + ahead) touch and that was not announced yet is announced whole, so that a
// cold disk reads a block per seek and object storage fetches a block per GET, rather than the
// records each batch drew (a batch takes a few records from each block of its window).
//
//   const auto blocks = shardpack::order_blocks(ds.size(), o.block, o.shard_starts);
//   shardpack::block_read_ahead ahead(order, blocks, shardpack::records_per_window(blocks, o.window));
//   for (std::size_t p = 0; p < order.size(); p += batch) {
//       const auto& records = ahead.before(p);          // the records to announce now, maybe none
//       if (!records.empty()) ds.prefetch(records.data(), records.size());
//       ds.read_batch(order.data() + p, std::min(batch, order.size() - p), out, ctx);
//   }
//
// Each block is announced once per read-ahead (make one per epoch); positions may jump forward
// (a resumed epoch): blocks of the positions skipped are not announced.
class block_read_ahead {
public:
    // order: the indices in the order they are read; block_starts: order_blocks(...) of the
    // same dataset and options; ahead: how many positions ahead to look (at least 1).
    block_read_ahead(std::vector<std::uint64_t> order, std::vector<std::uint64_t> block_starts, std::size_t ahead)
        : order_(std::move(order)), starts_(std::move(block_starts)), ahead_(std::max<std::size_t>(1, ahead)),
          announced_(starts_.size() > 1 ? starts_.size() - 1 : 0, false) {
        if (starts_.empty()) throw std::invalid_argument("shardpack block_read_ahead: no block starts");
    }

    // The records of the blocks to announce before reading position `position`, ascending.
    const std::vector<std::size_t>& before(std::size_t position) {
        records_.clear();
        blocks_.clear();
        scanned_ = std::max(scanned_, position);
        const std::size_t end = std::min(order_.size(), position + ahead_);
        for (; scanned_ < end; ++scanned_) {
            const std::uint64_t i = order_[scanned_];
            const auto it = std::upper_bound(starts_.begin(), starts_.end(), i);
            if (it == starts_.begin() || it == starts_.end()) continue;  // outside the blocks: not announced
            const std::size_t b = static_cast<std::size_t>(it - starts_.begin() - 1);
            if (announced_[b]) continue;
            announced_[b] = true;
            blocks_.push_back(b);
        }
        std::sort(blocks_.begin(), blocks_.end());
        for (const std::size_t b : blocks_)
            for (std::uint64_t i = starts_[b]; i < starts_[b + 1]; ++i) records_.push_back(static_cast<std::size_t>(i));
        return records_;
    }

private:
    std::vector<std::uint64_t> order_, starts_;
    std::size_t ahead_;
    std::vector<bool> announced_;
    std::size_t scanned_ = 0;  // positions below this were looked at
    std::vector<std::size_t> blocks_, records_;
};

// The mean number of records in `window` blocks (block_starts: order_blocks(...)): a
// block_read_ahead distance of one window.
inline std::size_t records_per_window(const std::vector<std::uint64_t>& block_starts, std::size_t window) {
    if (block_starts.size() < 2) return 1;
    return static_cast<std::size_t>(block_starts.back() * window / (block_starts.size() - 1));
}

// The first record of every shard of a shardpack::dataset (or anything with shard_count() and
// shard_records(k)), for order_options::shard_starts; from the shard table, opening no shard.
template <class Dataset>
std::vector<std::uint64_t> shard_starts_of(const Dataset& ds) {
    std::vector<std::uint64_t> starts;
    std::uint64_t first = 0;
    for (std::size_t k = 0; k < ds.shard_count(); ++k) {
        if (ds.shard_records(k) == 0) continue;  // an empty shard starts no block
        starts.push_back(first);
        first += ds.shard_records(k);
    }
    return starts;
}

}  // namespace shardpack
