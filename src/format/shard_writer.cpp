#include "format/shard_writer.hpp"

#include <cstring>

#include "errors.hpp"
#include "shardpack/detail/endian.hpp"

namespace shardpack {
using namespace detail;

namespace {
void append_section(std::vector<unsigned char>& h, std::uint32_t type, std::uint32_t flags,
                    const unsigned char* payload, std::size_t size) {
    const std::size_t at = h.size();
    h.resize(at + section_header_size);
    store_u32(h.data() + at, type);
    store_u32(h.data() + at + 4, flags);
    store_u64(h.data() + at + 8, size);
    h.insert(h.end(), payload, payload + size);
    h.resize(align_up(h.size(), 8), 0);
}
}  // namespace

std::vector<unsigned char> build_shard_header(const schema_record& schema, const std::vector<class_record>& classes,
                                             const shard_identity& id, const std::vector<extra_section>& extra) {
    std::vector<unsigned char> header(fixed_header_size, 0);
    std::memcpy(header.data(), shard_magic, 8);
    store_u16(header.data() + 8, version_major);
    const bool fields = !schema.fields.empty();
    store_u16(header.data() + 10, shard_minor_version(id, fields, uses_wide_pixels(schema)));
    const std::uint64_t codec_features = id.codec == shard_codec::zstd_record ? feature_zstd_records
                                       : id.codec == shard_codec::zstd_bands ? feature_band_frames
                                       : id.codec == shard_codec::zstd_region_bands ? feature_band_frames | feature_region_bands
                                                                                    : 0;
    store_u64(header.data() + 16, codec_features | (fields ? feature_fields : 0) | (uses_wide_pixels(schema) ? feature_wide_pixels : 0));
    store_u64(header.data() + 24, 0);
    store_u32(header.data() + 32, static_cast<std::uint32_t>(2 + (fields ? 1 : 0) + extra.size()));
    store_u32(header.data() + 36, record_alignment);
    store_u64(header.data() + 40, id.shard_number);
    store_u64(header.data() + 48, id.first_record);
    unsigned char schema_bytes[schema_payload_size];
    encode_schema(schema, schema_bytes);
    append_section(header, section_schema, section_flag_required, schema_bytes, sizeof schema_bytes);
    const auto class_bytes = encode_classes(classes);
    append_section(header, section_classes, section_flag_required, class_bytes.data(), class_bytes.size());
    if (fields) {
        if (auto why = fields_problem(schema.fields); !why.empty()) throw std::invalid_argument(why);
        const auto field_bytes = encode_fields_section(schema.fields);
        append_section(header, section_fields, section_flag_required, field_bytes.data(), field_bytes.size());
    }
    for (const auto& e : extra) append_section(header, e.type, e.flags, e.payload.data(), e.payload.size());
    store_u32(header.data() + 12, static_cast<std::uint32_t>(header.size()));
    return header;
}

shard_writer::shard_writer(const output_folder& folder, const std::string& name, const schema_record& schema,
                           const std::vector<class_record>& classes, const shard_identity& id,
                           const std::vector<extra_section>& extra)
    : file_(folder, name), hash_(XXH3_createState()), header_(build_shard_header(schema, classes, id, extra)),
      codec_(id.codec),
      minor_(shard_minor_version(id, !schema.fields.empty(), uses_wide_pixels(schema))) {
    if (!hash_) throw std::bad_alloc();
    XXH3_64bits_reset(hash_);
    put(header_.data(), header_.size());
}

shard_writer::~shard_writer() { XXH3_freeState(hash_); }

void shard_writer::put(const void* data, std::size_t size) {
    file_.write(data, size);
    XXH3_64bits_update(hash_, data, size);
}

void shard_writer::put_zeros(std::size_t count) {
    static const unsigned char zeros[record_alignment] = {};
    while (count > 0) {
        const std::size_t n = std::min<std::size_t>(count, sizeof zeros);
        put(zeros, n);
        count -= n;
    }
}

void shard_writer::add(const record_view& r) {
    if (r.codec == codec_zstd && codec_ != shard_codec::zstd_record) throw std::logic_error("zstd record in a shard declared raw");
    if (r.codec == codec_zstd_bands && codec_ != shard_codec::zstd_bands && codec_ != shard_codec::zstd_region_bands)
        throw std::logic_error("band-frame record in a shard without the feature");
    if (r.codec == codec_zstd_region_bands && codec_ != shard_codec::zstd_region_bands)
        throw std::logic_error("record with per-region band heights in a shard without the feature");
    const std::uint64_t offset = align_up(file_.position(), record_alignment);
    put_zeros(static_cast<std::size_t>(offset - file_.position()));
    put(r.data, static_cast<std::size_t>(r.stored_size));
    index_.push_back({offset, r.stored_size, r.decoded_size, r.checksum, r.codec});
}

std::uint64_t shard_writer::finish() {
    const std::uint64_t index_offset = align_up(file_.position(), record_alignment);
    put_zeros(static_cast<std::size_t>(index_offset - file_.position()));
    std::vector<unsigned char> index(index_.size() * index_entry_size);
    for (std::size_t i = 0; i < index_.size(); ++i) encode_index_entry(index_[i], index.data() + i * index_entry_size);
    put(index.data(), index.size());

    XXH3_state_t* locate_hash = XXH3_createState();
    XXH3_64bits_reset(locate_hash);
    XXH3_64bits_update(locate_hash, header_.data(), header_.size());
    XXH3_64bits_update(locate_hash, index.data(), index.size());
    const std::uint64_t checksum = XXH3_64bits_digest(locate_hash);
    XXH3_freeState(locate_hash);
    index_checksum_ = checksum;

    unsigned char trailer[trailer_size];
    store_u64(trailer, index_offset);
    store_u64(trailer + 8, index_.size());
    store_u64(trailer + 16, checksum);
    store_u16(trailer + 24, version_major);
    store_u16(trailer + 26, minor_);
    store_u32(trailer + 28, trailer_size);
    std::memcpy(trailer + 32, trailer_magic, 8);
    put(trailer, sizeof trailer);
    file_.sync();
    file_.close();
    return XXH3_64bits_digest(hash_);
}

}  // namespace shardpack
