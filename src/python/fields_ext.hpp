// Per-sample fields (format 1.5) for the extension: declarations, one record's values, and a
// batch's values with boxes following each sample's window. Included by shardpack_ext.cpp after
// its helpers (gil_released, thread_context, text); shardpack/__init__.py shapes the results.
#pragma once
#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

namespace fields_ext {

// A NumPy array that owns `v`'s elements, of the given shape.
template <class T>
nb::object owned_array(std::vector<T>&& v, std::vector<std::size_t> shape) {
    auto* heap = new std::vector<T>(std::move(v));
    nb::capsule owner(heap, [](void* p) noexcept { delete static_cast<std::vector<T>*>(p); });
    return nb::ndarray<nb::numpy, T>(heap->data(), shape.size(), shape.data(), owner).cast();
}

inline nb::list declarations(const shardpack::dataset& ds) {
    nb::list out;
    for (const auto& f : ds.fields()) {
        nb::list names;
        for (const auto& n : f.vocabulary) names.append(text(n));
        out.append(nb::make_tuple(text(f.name), shardpack::detail::field_kind_name(f.kind), names));
    }
    return out;
}

// One field's values over the rows: int and float (N,); str: a list; lists: (flat values,
// counts (N,) int64); tags: (N, T) uint8 multi-hot; boxes: (flat (M, 4) float32, labels (M,)
// int64, counts (N,) int64).
inline nb::object column(const shardpack::field_info& f, const std::vector<const shardpack::field_value*>& rows) {
    using shardpack::field_kind;
    const std::size_t n = rows.size();
    std::vector<std::int64_t> counts(n);
    switch (f.kind) {
        case field_kind::int64: {
            std::vector<std::int64_t> v(n);
            for (std::size_t j = 0; j < n; ++j) v[j] = rows[j]->ints.at(0);
            return owned_array(std::move(v), {n});
        }
        case field_kind::float64: {
            std::vector<double> v(n);
            for (std::size_t j = 0; j < n; ++j) v[j] = rows[j]->floats.at(0);
            return owned_array(std::move(v), {n});
        }
        case field_kind::string: {
            nb::list v;
            for (const auto* r : rows) v.append(text(r->text));
            return v;
        }
        case field_kind::int64_list: {
            std::vector<std::int64_t> v;
            for (std::size_t j = 0; j < n; ++j) {
                counts[j] = std::int64_t(rows[j]->ints.size());
                v.insert(v.end(), rows[j]->ints.begin(), rows[j]->ints.end());
            }
            const std::size_t m = v.size();
            return nb::make_tuple(owned_array(std::move(v), {m}), owned_array(std::move(counts), {n}));
        }
        case field_kind::float64_list: {
            std::vector<double> v;
            for (std::size_t j = 0; j < n; ++j) {
                counts[j] = std::int64_t(rows[j]->floats.size());
                v.insert(v.end(), rows[j]->floats.begin(), rows[j]->floats.end());
            }
            const std::size_t m = v.size();
            return nb::make_tuple(owned_array(std::move(v), {m}), owned_array(std::move(counts), {n}));
        }
        case field_kind::tags: {
            const std::size_t t = f.vocabulary.size();
            std::vector<std::uint8_t> v(n * t, 0);
            for (std::size_t j = 0; j < n; ++j)
                for (std::uint32_t id : rows[j]->ids) v[j * t + id] = 1;
            return owned_array(std::move(v), {n, t});
        }
        case field_kind::boxes: {
            std::vector<float> xy;
            std::vector<std::int64_t> labels;
            for (std::size_t j = 0; j < n; ++j) {
                counts[j] = std::int64_t(rows[j]->boxes.size());
                for (const auto& b : rows[j]->boxes) {
                    xy.insert(xy.end(), {b.x0, b.y0, b.x1, b.y1});
                    labels.push_back(b.label);
                }
            }
            const std::size_t m = labels.size();
            return nb::make_tuple(owned_array(std::move(xy), {m, 4}), owned_array(std::move(labels), {m}),
                                  owned_array(std::move(counts), {n}));
        }
    }
    return nb::none();
}

// The fields `names` of records `indices`, as columns (see column). `windows`: None, or int64
// (N, 4) of (y, x, hflip, vflip) per sample, the window being crop_height x crop_width (0 x 0:
// the whole record), as read_batch's return_boxes gives them: boxes then follow the windows.
inline nb::dict read(const shardpack::dataset& ds, nb::ndarray<const std::int64_t, nb::ndim<1>, nb::c_contig, nb::device::cpu> indices,
                     const std::vector<std::string>& names, nb::object windows, std::size_t crop_height,
                     std::size_t crop_width, double min_box_visibility) {
    const std::size_t n = indices.shape(0);
    std::vector<std::size_t> which(names.size());
    for (std::size_t k = 0; k < names.size(); ++k) which[k] = ds.field_index(names[k]);
    std::vector<bool> want(ds.fields().size(), false);
    for (std::size_t f : which) want[f] = true;
    const std::int64_t* box_rows = nullptr;
    if (!windows.is_none()) {
        const auto w = nb::cast<nb::ndarray<const std::int64_t, nb::ndim<2>, nb::c_contig, nb::device::cpu>>(windows);
        if (w.shape(0) != n || w.shape(1) != 4) throw shardpack::error("read_fields: windows must be (N, 4)");
        box_rows = w.data();
    }
    std::vector<std::vector<shardpack::field_value>> values(n);
    {
        gil_released unlocked;
        shardpack::read_context& ctx = thread_context();
        for (std::size_t j = 0; j < n; ++j) {
            const std::int64_t i = indices.data()[j];
            if (i < 0 || std::size_t(i) >= ds.size())
                throw shardpack::error("read_fields: index " + std::to_string(i) + " is out of range");
            const auto [h, w] = ds.read_fields(std::size_t(i), values[j], ctx, nullptr, min_box_visibility, &want);
            if (box_rows) {
                const std::int64_t* r = box_rows + 4 * j;
                const std::size_t ch = crop_height ? crop_height : h, cw = crop_width ? crop_width : w;
                for (auto& v : values[j])
                    if (v.kind == shardpack::field_kind::boxes)
                        shardpack::detail::window_boxes(v.boxes, std::uint32_t(r[1]), std::uint32_t(r[0]), std::uint32_t(cw),
                                                        std::uint32_t(ch), r[2] != 0, r[3] != 0, min_box_visibility);
            }
        }
    }
    nb::dict out;
    std::vector<const shardpack::field_value*> rows(n);
    for (std::size_t k = 0; k < names.size(); ++k) {
        for (std::size_t j = 0; j < n; ++j) rows[j] = &values[j][which[k]];
        out[text(names[k])] = column(ds.fields()[which[k]], rows);
    }
    return out;
}

}  // namespace fields_ext
