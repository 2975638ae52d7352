#include "transform/field_geometry.hpp"

#include <algorithm>
#include <cmath>

namespace shardpack {

namespace {
// One axis: [lo, hi) of the source to the record's content window; false when nothing is left.
bool axis_through(double lo, double hi, const axis_plan& a, float& out_lo, float& out_hi, bool& clipped) {
    const double src = a.src_len;
    if (lo < 0 || hi > src) clipped = true;
    lo = std::max(lo, 0.0);
    hi = std::min(hi, src);
    if (!(hi > lo)) return false;
    const double scale = double(a.scaled_len) / src, shift = double(a.pad_before) - double(a.crop_offset);
    double l = lo * scale + shift, h = hi * scale + shift;
    const double first = a.pad_before, last = double(a.pad_before) + a.content_len;
    if (l < first || h > last) clipped = true;
    l = std::max(l, first);
    h = std::min(h, last);
    out_lo = static_cast<float>(l);
    out_hi = static_cast<float>(h);
    return out_hi > out_lo;
}
}  // namespace

bool box_through_geometry(const source_box& in, const geometry_plan& plan, box& out, box_counts& counts) {
    bool clipped = false;
    if (!(in.x1 > in.x0 && in.y1 > in.y0) || !axis_through(in.x0, in.x1, plan.x, out.x0, out.x1, clipped) ||
        !axis_through(in.y0, in.y1, plan.y, out.y0, out.y1, clipped)) {
        ++counts.dropped;
        return false;
    }
    out.label = in.label;
    counts.clipped += clipped;
    return true;
}

void record_field_bytes(const std::vector<field_info>& decls, std::string_view source_row, const geometry_plan& plan,
                        std::vector<unsigned char>& out, box_counts& counts, std::vector<field_value>& values,
                        std::vector<std::vector<source_box>>& boxes) {
    decode_source_row(decls, source_row, values, boxes);
    std::size_t box_field = 0;
    for (std::size_t i = 0; i < decls.size(); ++i) {
        if (decls[i].kind != field_kind::boxes) continue;
        auto& kept = values[i].boxes;
        kept.clear();
        for (const source_box& b : boxes[box_field]) {
            box r;
            if (box_through_geometry(b, plan, r, counts)) kept.push_back(r);
        }
        ++box_field;
    }
    out.clear();
    detail::encode_field_values(decls, values, out);
}

}  // namespace shardpack
