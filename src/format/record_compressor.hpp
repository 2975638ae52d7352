// Turns a record's decoded bytes into what is stored: one zstd frame, or the raw bytes when
// compression is off or does not make the record smaller. One compressor per thread.
#pragma once
#include <memory>
#include <vector>

#include "format/stored_record.hpp"

struct ZSTD_CCtx_s;

namespace shardpack {

enum class record_codec { zstd, none };

class record_compressor {
public:
    record_compressor(record_codec codec, int level);
    ~record_compressor();
    record_compressor(const record_compressor&) = delete;
    record_compressor& operator=(const record_compressor&) = delete;

    // Fills `out` (its capacity is reused) from `decoded`.
    void compress(const std::vector<unsigned char>& decoded, stored_record& out);

private:
    record_codec codec_;
    int level_;
    ZSTD_CCtx_s* cctx_ = nullptr;
};

}  // namespace shardpack
