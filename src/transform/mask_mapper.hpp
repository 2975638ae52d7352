// How a build turns a mask file into class ids: color masks through the dictionary (exactly,
// or within --color-tolerance), or index masks whose values are class ids (remapped through a
// name,id table, with --ignore-values). Also writes the messages that help with a value the
// table lacks. Immutable after construction; shared by the transformer's threads.
#pragma once
#include <atomic>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "decode/image_decoder.hpp"
#include "decode/png_value_decoder.hpp"
#include "image.hpp"
#include "input/class_table.hpp"
#include "transform/geometry.hpp"
#include "transform/index_mask.hpp"
#include "transform/label_map.hpp"
#include "transform/mask_options.hpp"

namespace shardpack {

// `automatic` resolved against the class table (index when it gives ids); throws usage_error
// for a kind the table cannot serve (color masks with a name,id table) and for options that
// do not apply to the kind (--ignore-values with colors, --color-tolerance with index masks).
mask_value_kind resolve_mask_values(const mask_options& options, const std::vector<class_entry>& classes,
                                    const std::string& classes_path);

struct mask_scratch {
    image_u8 colors;
    value_plane values;
    probe_session session;  // the mask's libpng/libjpeg session, opened by its probe (probe_image), taken up by map()
};

// Decodes a mask file as a build does for masks of this kind (color or index): a color mask to
// RGB in scratch.colors, an index mask to its values in scratch.values; rows [0, max_rows)
// (0: all). `format`: the file's, sniffed when it was read. Takes up scratch.session where a
// probe left one open over these bytes. Throws decode_error.
// interrupt: the build's signal flag, polled inside the decode (may be null).
void decode_mask(const std::uint8_t* data, std::size_t size, file_format format, mask_value_kind kind, std::uint32_t max_rows,
                 mask_scratch& scratch, const std::atomic<int>* interrupt = nullptr);

class mask_mapper {
public:
    // kind: resolved (color or index). `hint`: how to list every color of the input, for messages
    // (e.g. "shardpack colors --csv list.csv --classes dict.csv").
    mask_mapper(const std::vector<class_entry>& classes, mask_value_kind kind, const mask_options& options, std::string hint);
    bool index_masks() const { return kind_ == mask_value_kind::index; }

    // Decodes the mask's rows that `plan` needs and maps them (see map_mask, map_index_mask).
    // `format`: the mask file's, sniffed when it was read.
    // Throws input_error: decode errors, and unknown colors or values with what would fix them.
    // interrupt: the build's signal flag, polled inside the color mask's decode (may be null).
    void map(const std::uint8_t* data, std::size_t size, file_format format, const geometry_plan& plan, std::uint16_t ignore_value,
             label_plane& out, std::uint64_t& unknown, mask_mapping_stats& stats, mask_scratch& scratch,
             const std::atomic<int>* interrupt = nullptr) const;

    // map() of a mask already decoded into scratch (colors or values, as decode_mask leaves them).
    void map_decoded(const geometry_plan& plan, std::uint16_t ignore_value, label_plane& out, std::uint64_t& unknown,
                     mask_mapping_stats& stats, const mask_scratch& scratch) const;

    // How mask values are matched to classes: a color mask's colors (exactly or within the
    // tolerance), or an index mask's values (through the table's ids, --ignore-values). Null
    // for the other kind.
    const color_lookup* color_table() const { return colors_ ? &*colors_ : nullptr; }
    const value_lookup* value_table() const { return values_ ? &*values_ : nullptr; }

    // "nearest class 'road' (128,64,128) at distance 2: --color-tolerance 2 would map it" and so on.
    std::string explain_color(std::uint32_t rgb) const;
    std::string explain_value(std::uint16_t value) const;

private:
    const std::vector<class_entry>& classes_;
    mask_value_kind kind_;
    unknown_color_policy policy_;
    std::string hint_;
    std::optional<color_lookup> colors_;
    std::optional<value_lookup> values_;
};

std::string color_text(std::uint32_t rgb);  // "(r,g,b)"

}  // namespace shardpack
