#include "format/record_compressor.hpp"

#include <zstd.h>

#include <cstring>
#include <stdexcept>
#include <string>

#include "shardpack/detail/format.hpp"
#include "shardpack/detail/xxhash.hpp"

namespace shardpack {

record_compressor::record_compressor(record_codec codec, int level) : codec_(codec), level_(level) {
    if (codec_ == record_codec::none) return;
    cctx_ = ZSTD_createCCtx();
    if (!cctx_) throw std::bad_alloc();
    // Single-threaded frames with the content size recorded: the bytes depend only on the input
    // and the level, never on the thread count.
    ZSTD_CCtx_setParameter(cctx_, ZSTD_c_compressionLevel, level_);
    ZSTD_CCtx_setParameter(cctx_, ZSTD_c_contentSizeFlag, 1);
    ZSTD_CCtx_setParameter(cctx_, ZSTD_c_checksumFlag, 0);  // the index holds an XXH3 of the frame
}

record_compressor::~record_compressor() { ZSTD_freeCCtx(cctx_); }

void record_compressor::compress(const std::vector<unsigned char>& decoded, stored_record& out) {
    out.decoded_size = decoded.size();
    bool stored_compressed = false;
    if (codec_ == record_codec::zstd) {
        out.bytes.resize(ZSTD_compressBound(decoded.size()));
        const std::size_t n = ZSTD_compress2(cctx_, out.bytes.data(), out.bytes.size(), decoded.data(), decoded.size());
        if (ZSTD_isError(n)) throw std::runtime_error(std::string("zstd: ") + ZSTD_getErrorName(n));
        if (n < decoded.size()) {
            out.bytes.resize(n);
            stored_compressed = true;
        }
    }
    if (!stored_compressed) out.bytes.assign(decoded.begin(), decoded.end());
    out.codec = stored_compressed ? detail::codec_zstd : detail::codec_raw;
    out.checksum = XXH3_64bits(out.bytes.data(), out.bytes.size());
}

}  // namespace shardpack
