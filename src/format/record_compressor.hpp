// Turns a record's decoded bytes into what is stored: zstd band frames (format 1.1, codec 2),
// one zstd frame for the whole record (format 1.0, codec 1), or the raw bytes when compression
// is off or does not pay. One compressor per thread.
#pragma once
#include <cstdint>
#include <memory>
#include <vector>

#include "format/stored_record.hpp"
#include "shardpack/detail/format.hpp"

struct ZSTD_CCtx_s;

namespace shardpack {

enum class record_codec {
    zstd,         // codec 2: one frame per band of rows of the image and of the label (a band zstd does not shrink stored raw)
    zstd_record,  // codec 1: one frame per record (readable by 1.0 readers); raw where it is not smaller
    none,         // raw records throughout
    automatic,    // codec 2, each band compressed only where zstd saves at least half of it, else stored raw
};

// --compression auto keeps a band compressed only when zstd saves at least this fraction of its
// bytes (frame <= (1 - saving) * band), else stores the band raw. Why 1/2: scripts/bench/README.md, "Choosing the codec".
inline constexpr std::uint64_t auto_min_saving_num = 1, auto_min_saving_den = 2;

// Band height for codec 2 when none is asked for: as many rows as make about this many image
// bytes (at least 1 row, at most the image). Measured in scripts/bench/README.md, "Format 1.1: band frames".
inline constexpr std::uint64_t default_band_bytes = 256 * 1024;

// Codec 3 (format 1.3) chooses the heights from the record's own label. The label plane is one
// frame when zstd shrinks the whole plane at least label_one_frame_min_ratio times (one-hot and
// index masks: several hundred times): a full read then does one label frame instead of one per
// band, and libzstd's per-frame work on such tiny frames is what made band frames slower to read
// than one frame per record. A crop then decompresses the whole label plane, so the image's
// bands are made half as tall (about region_image_band_bytes of image) to give those bytes back.
// A label that does not shrink that much is cut at the image's height of default_band_bytes, as
// in codec 2. Measured (512x512 one-hot and 1080p index records, full reads and crops, image
// bands of 32-256 KiB): scripts/bench/README.md, "Band heights from the data", and
// formats/shardpack-v1.md 10.3.1.
inline constexpr std::uint64_t label_one_frame_min_ratio = 32;
inline constexpr std::uint64_t region_image_band_bytes = 128 * 1024;

// True when a writer with this codec writes band frames (codec 2 or 3).
inline bool uses_band_frames(record_codec c) { return c == record_codec::zstd || c == record_codec::automatic; }
// What the shards of a writer with this codec declare: codec 3 (a band height per region, format
// 1.3) for band frames of records with a label, heights chosen from the data (no --band-rows,
// which sets one height for both regions); else codec 2, codec 1 or raw.
inline shard_codec shard_codec_for(record_codec c, const detail::schema_record& s, std::uint32_t band_rows) {
    if (c == record_codec::zstd_record) return shard_codec::zstd_record;
    if (!uses_band_frames(c)) return shard_codec::raw;
    return s.task == detail::task_code::segmentation && band_rows == 0 ? shard_codec::zstd_region_bands : shard_codec::zstd_bands;
}

class record_compressor {
public:
    // `band_rows`: rows per band of both regions (codec 2); 0 picks the image's from
    // default_band_bytes and, for records with a label, the label's from the data (codec 3).
    // `label_band_rows` (tests): codec 3 with this label height instead of the one from the data.
    record_compressor(record_codec codec, int level, const detail::schema_record& schema = {}, std::uint32_t band_rows = 0,
                      std::uint32_t label_band_rows = 0);
    ~record_compressor();
    record_compressor(const record_compressor&) = delete;
    record_compressor& operator=(const record_compressor&) = delete;

    // Fills `out` (its capacity is reused) from `decoded`, a record of this `layout` (what
    // encode_record returned for it). A record stored raw is not copied: `out.bytes` and
    // `decoded` swap buffers (both keep their capacity), and `decoded` is left holding bytes of
    // no meaning, for the next encode_record to overwrite.
    void compress(std::vector<unsigned char>& decoded, const detail::record_layout& layout, stored_record& out);
    // The same for a record held only as bytes (tests), which stay as they are (a raw record is
    // copied): where band frames need the layout, it is parsed from them (detail::parse_record,
    // which also checks them against the schema).
    void compress(const std::vector<unsigned char>& decoded, stored_record& out);

    // The image's band height for a record of this layout: --band-rows (at most the height), else
    // about `band_bytes` of image a band (codec 2: the label's too).
    std::uint32_t band_rows_for(const detail::record_layout& r, std::uint64_t band_bytes = default_band_bytes) const;
    // What compress() wrote for band-frame records: codec 3 (a height per region) or codec 2.
    bool per_region() const { return per_region_; }
    // What a shard of these records declares (a label_band_rows of its own makes codec 3).
    shard_codec stored_codec() const {
        return per_region_                          ? shard_codec::zstd_region_bands
               : uses_band_frames(codec_)             ? shard_codec::zstd_bands
               : codec_ == record_codec::zstd_record ? shard_codec::zstd_record
                                                      : shard_codec::raw;
    }

private:
    record_codec codec_;
    int level_;
    detail::schema_record schema_;
    std::uint32_t band_rows_, label_band_rows_;
    bool per_region_;
    ZSTD_CCtx_s* cctx_ = nullptr;
    std::vector<unsigned char> label_frame_;  // codec 3: the label plane as one frame, while it is judged

    // Compresses `decoded` into `out` and returns true, or returns false when the record is to
    // be stored raw (codec 0): the caller then puts its bytes into out.bytes. `layout`: null
    // parses it from the bytes where band frames need it.
    bool try_compress(const std::vector<unsigned char>& decoded, const detail::record_layout* layout, stored_record& out);
    std::size_t compress_frame(const unsigned char* src, std::size_t n, std::vector<unsigned char>& out, std::size_t at);
    // True: some band compressed.
    bool compress_bands(const std::vector<unsigned char>& decoded, const detail::record_layout& r, stored_record& out);
};

}  // namespace shardpack
