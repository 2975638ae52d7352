#include "input/folder_input.hpp"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <filesystem>
#include <map>
#include <vector>

#include "errors.hpp"
#include "input/csv_reader.hpp"
#include "input/text_util.hpp"

namespace shardpack {

namespace {
namespace fs = std::filesystem;

// The files a folder's listing takes: what the build decodes (PNG, JPEG, and TIFF through libtiff).
constexpr const char* image_extensions_text = ".png, .jpg, .jpeg, .tif or .tiff";

bool is_image_file(const fs::path& p) {
    const std::string ext = input_detail::lower_ascii(p.extension().string());
    return ext == ".png" || ext == ".jpg" || ext == ".jpeg" || ext == ".tif" || ext == ".tiff";
}

std::string joined(const std::string& dir, const std::string& rel) {
    return dir + (!dir.empty() && dir.back() == '/' ? "" : "/") + rel;
}

// Why an entry that is not a regular file is left out (`st` as followed through a link).
std::string not_regular_reason(const fs::file_status& st) {
    switch (st.type()) {
        case fs::file_type::fifo: return "a FIFO, not a regular file";
        case fs::file_type::socket: return "a socket, not a regular file";
        case fs::file_type::block:
        case fs::file_type::character: return "a device, not a regular file";
        default: return "not a regular file";
    }
}

// The image files under dir (sorted paths relative to it, generic form), and what else is there
// (into left_out, named DIR/rel). Folders are walked, except `skip` (the other folder, when one
// lies inside the other); links to files are followed, links to folders are not.
std::vector<std::string> image_files(const std::string& dir, const char* option, const fs::path& skip,
                                     std::vector<left_out_file>& left_out) {
    std::error_code ec;
    if (!fs::is_directory(dir, ec)) throw usage_error(std::string(option) + " " + dir + ": not a folder");
    std::vector<std::string> out;
    for (auto it = fs::recursive_directory_iterator(dir, fs::directory_options::none, ec);
         !ec && it != fs::recursive_directory_iterator(); it.increment(ec)) {
        std::error_code e;
        const fs::file_status own = it->symlink_status(e);
        const std::string rel = fs::relative(it->path(), dir, e).generic_string();
        if (fs::is_directory(own)) {
            if (!skip.empty() && fs::equivalent(it->path(), skip, e)) it.disable_recursion_pending();
            continue;
        }
        const fs::file_status st = fs::is_symlink(own) ? it->status(e) : own;
        std::string reason;
        if (fs::is_symlink(own) && !fs::exists(st)) reason = "a symbolic link to nothing";
        else if (fs::is_directory(st)) reason = "a symbolic link to a folder (not followed)";
        else if (!fs::is_regular_file(st)) reason = not_regular_reason(st);
        else if (!is_image_file(it->path())) reason = std::string("not a ") + image_extensions_text + " file";
        if (reason.empty()) out.push_back(rel);
        else left_out.push_back({joined(dir, rel), reason});
    }
    if (ec) throw usage_error(std::string(option) + " " + dir + ": " + ec.message());
    std::sort(out.begin(), out.end());
    return out;
}

// "a/b" for "a/b.png": the path without its extension.
std::string without_extension(const std::string& rel) {
    const fs::path p(rel);
    return (p.parent_path() / p.stem()).generic_string();
}

bool ends_with(const std::string& s, const std::string& suffix) {
    return s.size() >= suffix.size() && s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}

// The pairing key of an image or mask: its path without extension and without `suffix` at the
// end of its stem; false when the stem does not end with the suffix.
bool pairing_key(const std::string& rel, const std::string& suffix, std::string& key) {
    key = without_extension(rel);
    if (!ends_with(fs::path(key).filename().string(), suffix)) return false;
    key.resize(key.size() - suffix.size());
    return true;
}

bool same_folder(const std::string& a, const std::string& b) {
    std::error_code ec;
    return fs::equivalent(a, b, ec);
}

// `inner` when it is a folder below `outer` (then outer's walk skips it), else "".
fs::path nested_folder(const std::string& inner, const std::string& outer) {
    std::error_code ec;
    const fs::path in = fs::weakly_canonical(inner, ec), out = fs::weakly_canonical(outer, ec);
    if (ec) return {};
    const fs::path rel = in.lexically_relative(out);
    if (rel.empty() || rel == "." || *rel.begin() == "..") return {};
    return in;
}

// What an error about the listing adds about the files it left out: a FIFO, socket or device
// named like an image may be the very image or mask the error says is missing. Names with an
// image extension first, at most 5.
std::string left_out_note(std::vector<left_out_file> left_out) {
    if (left_out.empty()) return "";
    std::stable_sort(left_out.begin(), left_out.end(), [](const left_out_file& a, const left_out_file& b) {
        return is_image_file(a.path) && !is_image_file(b.path);
    });
    std::string note = "; " + std::to_string(left_out.size()) + " file(s) of the folders were left out, e.g. ";
    for (std::size_t i = 0; i < left_out.size() && i < 5; ++i)
        note += (i ? ", " : "") + left_out[i].path + " (" + left_out[i].reason + ")";
    return note;
}

// list_image_folders, filling `listing` as it goes (its errors then name what was left out).
void list_into(const image_folder_options& f, input_options& o, folder_listing& listing);

}  // namespace

folder_listing list_image_folders(const image_folder_options& f, input_options& o) {
    folder_listing listing;
    try {
        list_into(f, o, listing);
    } catch (const usage_error& e) {
        throw usage_error(e.what() + left_out_note(listing.left_out));
    }
    return listing;
}

std::string folder_listing::left_out_summary() const {
    if (left_out.empty()) return "";
    std::map<std::string, std::size_t> counts;
    for (const auto& f : left_out) ++counts[f.reason];
    std::vector<std::pair<std::string, std::size_t>> by_count(counts.begin(), counts.end());
    std::stable_sort(by_count.begin(), by_count.end(), [](const auto& a, const auto& b) { return a.second > b.second; });
    std::string text = std::to_string(left_out.size()) + (left_out.size() == 1 ? " file" : " files") + " left out:";
    for (std::size_t i = 0; i < by_count.size(); ++i)
        text += (i ? ", " : " ") + std::to_string(by_count[i].second) + " x " + by_count[i].first;
    return text;
}

namespace {

// The listing's source ("--images A --masks B ...") and the options refused before any listing.
void start_listing(const image_folder_options& f, folder_listing& listing) {
    const std::string& images = f.images;
    const std::string& masks = f.masks;
    listing.source = "--images " + images;
    if (!masks.empty()) listing.source += " --masks " + masks;
    if (!f.mask_suffix.empty()) listing.source += " --mask-suffix " + f.mask_suffix;
    if (!f.image_suffix.empty()) listing.source += " --image-suffix " + f.image_suffix;
    if (masks.empty() && (!f.mask_suffix.empty() || !f.image_suffix.empty()))
        throw usage_error("--mask-suffix and --image-suffix pair images with masks: they need --masks DIR");
    for (const std::string* s : {&f.mask_suffix, &f.image_suffix})
        if (s->find('/') != std::string::npos) throw usage_error("--mask-suffix/--image-suffix '" + *s + "': a suffix of file names holds no '/'");
}

// Masks by pairing key (key -> relative path); two masks whose keys differ only in case (or
// not at all: a.png and a.jpg) are refused, since which one is meant depends on the file system.
std::map<std::string, std::string> masks_by_key(const image_folder_options& f, const std::vector<std::string>& mask_files,
                                                std::vector<left_out_file>& left_out) {
    const std::string& masks = f.masks;
    std::map<std::string, std::string> mask_of;                      // key -> relative path
    std::map<std::string, std::pair<std::string, std::string>> folded;  // lower-case key -> (key, relative path)
    std::string key;
    for (const auto& m : mask_files) {
        if (!pairing_key(m, f.mask_suffix, key)) {
            left_out.push_back({joined(masks, m), "a mask whose name does not end with the --mask-suffix " + f.mask_suffix});
            continue;
        }
        const auto [it, fresh] = folded.emplace(input_detail::lower_ascii(key), std::make_pair(key, m));
        if (!fresh) {
            const auto& [other_key, other] = it->second;
            throw usage_error("--masks " + masks + ": two masks for one image: " + joined(masks, other) + " and " +
                              joined(masks, m) +
                              (other_key == key ? " (the same name, another extension)" : " (names that differ only in case)") +
                              "; remove or rename one of them");
        }
        mask_of.emplace(key, m);
    }
    return mask_of;
}

// Refuses the images without a mask, naming up to 5 and the --mask-suffix the masks' names
// suggest.
[[noreturn]] void refuse_unpaired(const image_folder_options& f, const std::vector<std::string>& unpaired, std::size_t images,
                                  const std::map<std::string, std::string>& mask_of) {
    std::string names;
    for (std::size_t i = 0; i < unpaired.size() && i < 5; ++i) names += (i ? ", " : "") + unpaired[i];
    std::string hint, key;
    pairing_key(unpaired.front(), f.image_suffix, key);
    const auto next = mask_of.lower_bound(key);
    if (next != mask_of.end() && next->first.size() > key.size() && next->first.compare(0, key.size(), key) == 0 &&
        next->first.find('/', key.size()) == std::string::npos)
        hint = "; the masks' names suggest --mask-suffix " + f.mask_suffix + next->first.substr(key.size()) + " (" +
               unpaired.front() + " and " + next->second + ")";
    throw usage_error(std::to_string(unpaired.size()) + " of " + std::to_string(images) + " images in " + f.images +
                      " have no mask of the same name in " + f.masks + " (e.g. " + names +
                      "); masks pair with images by path and file name, any extension" +
                      (f.mask_suffix.empty() ? std::string() : ", the mask's name ending with " + f.mask_suffix) +
                      hint);
}

// The list's rows for images paired with masks: "image,mask" (the mask's path absolute).
void pair_with_masks(const image_folder_options& f, const std::vector<std::string>& files,
                     const std::vector<std::string>& mask_files, folder_listing& listing, std::string& text) {
    std::vector<left_out_file>& left_out = listing.left_out;
    const std::map<std::string, std::string> mask_of = masks_by_key(f, mask_files, left_out);
    const std::string masks_abs = fs::absolute(f.masks).lexically_normal().generic_string();
    std::vector<std::string> unpaired;
    std::map<std::string, bool> paired_masks;
    std::string key;
    for (const auto& img : files) {
        if (!pairing_key(img, f.image_suffix, key)) {
            left_out.push_back({joined(f.images, img), "an image whose name does not end with the --image-suffix " + f.image_suffix});
            continue;
        }
        const auto it = mask_of.find(key);
        if (it == mask_of.end()) {
            unpaired.push_back(img);
            continue;
        }
        paired_masks[it->first] = true;
        ++listing.images;
        text += csv_quoted(img) + "," + csv_quoted(joined(masks_abs, it->second)) + "\n";
    }
    if (!unpaired.empty()) refuse_unpaired(f, unpaired, files.size(), mask_of);
    for (const auto& [k, m] : mask_of)
        if (!paired_masks.count(k)) left_out.push_back({joined(f.masks, m), "a mask without an image"});
    if (listing.images == 0) throw usage_error(listing.source + ": no image pairs with a mask");
}

// The list's rows for class folders: "cat/1.jpg,cat".
void rows_by_class_folder(const image_folder_options& f, const std::vector<std::string>& files, folder_listing& listing,
                          std::string& text) {
    std::vector<std::string> loose;
    for (const auto& img : files) {
        const auto slash = img.find('/');
        if (slash == std::string::npos) {
            loose.push_back(img);
            continue;
        }
        ++listing.images;
        text += csv_quoted(img) + "," + csv_quoted(img.substr(0, slash)) + "\n";
    }
    if (!loose.empty())
        throw usage_error("--images " + f.images + ": " + std::to_string(loose.size()) + " image(s) directly in the folder (e.g. " +
                          loose.front() + "); for classification each class is a subfolder (DIR/cat/1.jpg), or "
                          "give --masks DIR for segmentation");
}

void list_into(const image_folder_options& f, input_options& o, folder_listing& listing) {
    const std::string& images = f.images;
    const std::string& masks = f.masks;
    start_listing(f, listing);
    const bool one_folder = !masks.empty() && same_folder(images, masks);
    if (one_folder && f.mask_suffix.empty())
        throw usage_error("--masks " + masks + " is the --images folder: give --mask-suffix (e.g. _L for img_0_L.png) "
                          "to tell the masks from the images");
    std::vector<left_out_file>& left_out = listing.left_out;
    std::vector<std::string> files =
        image_files(images, "--images", masks.empty() || one_folder ? fs::path() : nested_folder(masks, images), left_out);
    std::vector<std::string> mask_files;
    if (one_folder) {  // the masks are the files whose stem ends with the suffix
        std::vector<std::string> rest;
        std::string key;
        for (auto& rel : files) (pairing_key(rel, f.mask_suffix, key) ? mask_files : rest).push_back(std::move(rel));
        files = std::move(rest);
    } else if (!masks.empty()) {
        mask_files = image_files(masks, "--masks", nested_folder(images, masks), left_out);
    }
    if (files.empty())
        throw usage_error("--images " + images + ": no " + image_extensions_text + " files in it or below it");

    std::string text = "image,label\n";
    if (!masks.empty()) {
        pair_with_masks(f, files, mask_files, listing, text);
        o.task = task_kind::segmentation;
    } else {
        rows_by_class_folder(f, files, listing, text);
        if (o.task == task_kind::automatic) o.task = task_kind::classification;
    }
    std::sort(left_out.begin(), left_out.end(), [](const auto& a, const auto& b) { return a.path < b.path; });
    o.list_text = std::move(text);
    o.list_source = listing.source;
    o.root = images;
    o.csv_path = images;
    o.header = header_mode::present;
}
}  // namespace

void log_folder_listing(const folder_listing& listing) {
    const std::string left = listing.left_out_summary();
    spdlog::info("{}: {} image{}{}; {}", listing.source, listing.images, listing.images == 1 ? "" : "s",
                 listing.source.find("--masks") != std::string::npos ? " paired with masks" : " in class folders",
                 left.empty() ? std::string("no file left out")
                              : left + (spdlog::should_log(spdlog::level::debug) ? " (each below)" : " (-v lists each)"));
    for (const auto& f : listing.left_out) spdlog::debug("left out {}: {}", f.path, f.reason);
}

}  // namespace shardpack
