#include "input/folder_input.hpp"

#include <algorithm>
#include <filesystem>
#include <map>
#include <vector>

#include "errors.hpp"
#include "input/text_util.hpp"

namespace shardpack {

namespace {
namespace fs = std::filesystem;

bool is_image_file(const fs::path& p) {
    const std::string ext = input_detail::lower_ascii(p.extension().string());
    return ext == ".png" || ext == ".jpg" || ext == ".jpeg";
}

// Image files under dir, as sorted paths relative to it (generic form, '/').
std::vector<std::string> image_files(const std::string& dir, const char* option) {
    std::error_code ec;
    if (!fs::is_directory(dir, ec)) throw usage_error(std::string(option) + " " + dir + ": not a folder");
    std::vector<std::string> out;
    for (auto it = fs::recursive_directory_iterator(dir, fs::directory_options::none, ec);
         !ec && it != fs::recursive_directory_iterator(); it.increment(ec)) {
        if (it->is_regular_file(ec) && is_image_file(it->path()))
            out.push_back(fs::relative(it->path(), dir, ec).generic_string());
    }
    if (ec) throw usage_error(std::string(option) + " " + dir + ": " + ec.message());
    std::sort(out.begin(), out.end());
    return out;
}

std::string quoted(const std::string& s) {
    std::string q = "\"";
    for (char c : s) q += c == '"' ? std::string("\"\"") : std::string(1, c);
    return q + "\"";
}

std::string without_extension(const std::string& rel) {
    const fs::path p(rel);
    return (p.parent_path() / p.stem()).generic_string();
}

}  // namespace

void list_image_folders(const std::string& images, const std::string& masks, input_options& o) {
    const std::vector<std::string> files = image_files(images, "--images");
    if (files.empty()) throw usage_error("--images " + images + ": no .png, .jpg or .jpeg files in it or below it");
    std::string text = "image,label\n";
    if (!masks.empty()) {
        std::map<std::string, std::string> mask_of;  // stem path -> mask relative path
        for (const auto& m : image_files(masks, "--masks")) mask_of.emplace(without_extension(m), m);
        const std::string masks_abs = fs::absolute(masks).lexically_normal().generic_string();
        std::vector<std::string> unpaired;
        for (const auto& f : files) {
            const auto it = mask_of.find(without_extension(f));
            if (it == mask_of.end()) {
                unpaired.push_back(f);
                continue;
            }
            text += quoted(f) + "," + quoted(masks_abs + (masks_abs.back() == '/' ? "" : "/") + it->second) + "\n";
        }
        if (!unpaired.empty()) {
            std::string names;
            for (std::size_t i = 0; i < unpaired.size() && i < 5; ++i) names += (i ? ", " : "") + unpaired[i];
            throw usage_error(std::to_string(unpaired.size()) + " of " + std::to_string(files.size()) + " images in " + images +
                              " have no mask of the same name in " + masks + " (e.g. " + names +
                              "); masks pair with images by path and file name, any extension");
        }
        o.task = task_kind::segmentation;
    } else {
        std::vector<std::string> loose;
        for (const auto& f : files) {
            const auto slash = f.find('/');
            if (slash == std::string::npos) {
                loose.push_back(f);
                continue;
            }
            text += quoted(f) + "," + quoted(f.substr(0, slash)) + "\n";
        }
        if (!loose.empty())
            throw usage_error("--images " + images + ": " + std::to_string(loose.size()) + " image(s) directly in the folder (e.g. " +
                              loose.front() + "); for classification each class is a subfolder (DIR/cat/1.jpg), or "
                              "give --masks DIR for segmentation");
        if (o.task == task_kind::automatic) o.task = task_kind::classification;
    }
    o.list_text = std::move(text);
    o.list_source = "--images " + images + (masks.empty() ? std::string() : " --masks " + masks);
    o.root = images;
    o.csv_path = images;
    o.header = header_mode::present;
}

}  // namespace shardpack
