// The words of the build's enumerated options, one table per enum: the command line parses with
// them (cli/build_command.cpp: the accepted words and their values) and the manifest, report and
// record-options digest print with them (pipeline/build_pipeline.cpp). A new value is one row.
#pragma once
#include <cstddef>
#include <string>
#include <vector>

#include "errors.hpp"
#include "format/record_compressor.hpp"
#include "image.hpp"
#include "input/input_list.hpp"
#include "pipeline/build_options.hpp"
#include "transform/geometry.hpp"
#include "transform/label_map.hpp"

namespace shardpack {

template <class E>
struct option_word {
    const char* word;
    E value;
};

inline constexpr option_word<task_kind> task_words[] = {
    {"auto", task_kind::automatic}, {"seg", task_kind::segmentation}, {"cls", task_kind::classification}};
inline constexpr option_word<pixel_layout> color_words[] = {
    {"rgb", pixel_layout::rgb}, {"gray", pixel_layout::gray}, {"rgba", pixel_layout::rgba}, {"bands", pixel_layout::bands}};
inline constexpr option_word<resize_mode> resize_words[] = {
    {"none", resize_mode::none}, {"stretch", resize_mode::stretch}, {"shorter", resize_mode::shorter}, {"fit", resize_mode::fit}};
inline constexpr option_word<crop_mode> crop_words[] = {
    {"center", crop_mode::center}, {"topleft", crop_mode::topleft}, {"none", crop_mode::none}};
inline constexpr option_word<resample_filter> filter_words[] = {
    {"area", resample_filter::area}, {"bilinear", resample_filter::bilinear}, {"lanczos", resample_filter::lanczos}};
inline constexpr option_word<label_layout_option> label_layout_words[] = {
    {"onehot", label_layout_option::one_hot}, {"index", label_layout_option::index}};
inline constexpr option_word<unknown_color_policy> unknown_label_words[] = {
    {"error", unknown_color_policy::error}, {"ignore", unknown_color_policy::ignore}};
inline constexpr option_word<mask_value_kind> mask_values_words[] = {
    {"auto", mask_value_kind::automatic}, {"color", mask_value_kind::color}, {"index", mask_value_kind::index}};
inline constexpr option_word<record_codec> compression_words[] = {
    {"zstd", record_codec::zstd}, {"auto", record_codec::automatic}, {"zstd-record", record_codec::zstd_record},
    {"none", record_codec::none}};
inline constexpr option_word<error_policy> on_error_words[] = {{"fail", error_policy::fail}, {"skip", error_policy::skip}};

// The word of a value; every value of an enum has its row.
template <class E, std::size_t N>
const char* word_of(const option_word<E> (&table)[N], E value) {
    for (const auto& row : table)
        if (row.value == value) return row.word;
    return "?";
}

// Every word, in the table's order (CLI11's IsMember, --help).
template <class E, std::size_t N>
std::vector<std::string> words_of(const option_word<E> (&table)[N]) {
    std::vector<std::string> out;
    for (const auto& row : table) out.emplace_back(row.word);
    return out;
}

// The value of a word; `option` (e.g. "--crop") names it in the usage error.
template <class E, std::size_t N>
E value_of(const option_word<E> (&table)[N], const std::string& word, const std::string& option) {
    for (const auto& row : table)
        if (word == row.word) return row.value;
    std::string all;
    for (const auto& row : table) all += std::string(all.empty() ? "" : ", ") + row.word;
    throw usage_error(option + " '" + word + "': choose one of " + all);
}

}  // namespace shardpack
