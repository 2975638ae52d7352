#include "remote/part_fetch.hpp"

#include <algorithm>
#include <set>

#include "errors.hpp"
#include "io/output_file.hpp"
#include "remote/s3_client.hpp"

namespace shardpack::remote {

namespace {

constexpr std::uint64_t fetch_chunk = std::uint64_t(64) << 20;  // bytes per ranged GET

std::string last_component(const s3_location& where) {
    const auto slash = where.prefix.rfind('/');
    return where.prefix.empty() ? where.bucket : where.prefix.substr(slash == std::string::npos ? 0 : slash + 1);
}

}  // namespace

std::vector<std::string> fetch_parts(const std::vector<std::string>& urls, const output_folder& staging) {
    const auto client = shared_client();
    std::vector<s3_location> parts;
    for (const std::string& url : urls) {
        const s3_location where = parse_s3_url(url);
        bool found = false;
        client->head_object(where.bucket, where.key("manifest.json"), &found);
        if (found) {
            parts.push_back(where);
            continue;
        }
        const std::string prefix = where.prefix.empty() ? "" : where.prefix + "/";
        std::vector<std::string> names;
        for (const s3_object_info& o : client->list_objects(where.bucket, prefix)) {
            const std::string rest = o.key.substr(prefix.size());
            const auto slash = rest.find('/');
            if (slash != std::string::npos && slash > 0 && rest.substr(slash + 1) == "manifest.json")
                names.push_back(rest.substr(0, slash));
        }
        if (names.empty())
            throw input_error(url + ": no manifest.json there, nor in any folder directly under it: not a part of a "
                                    "build --partition, nor a folder of parts");
        std::sort(names.begin(), names.end());
        for (const std::string& name : names) parts.push_back(s3_location{where.bucket, where.key(name)});
    }
    std::vector<std::string> folders;
    std::set<std::string> taken;
    for (const s3_location& part : parts) {
        const std::string name = last_component(part);
        if (name == "." || name == ".." || !taken.insert(name).second)
            throw input_error(part.url() + ": another part given is also named \"" + name +
                              "\": give each part once (parts are told apart by their last path component)");
        const auto folder = staging.subfolder(name, true);
        const std::string prefix = part.prefix.empty() ? "" : part.prefix + "/";
        const std::vector<s3_object_info> objects = client->list_objects(part.bucket, prefix);
        if (std::none_of(objects.begin(), objects.end(),
                         [&](const s3_object_info& o) { return o.key == prefix + "fingerprints.tsv"; }))
            throw input_error(part.url() + ": no fingerprints.tsv (the part's record keys, which the merge needs): copy "
                                           "the whole part folder there (aws s3 cp --recursive, rclone copy); "
                                           "`shardpack push` sends a dataset's shards and manifest only");
        for (const s3_object_info& o : objects) {
            const std::string file = o.key.substr(prefix.size());
            if (file.empty() || file.find('/') != std::string::npos || file == "." || file == "..") continue;
            output_file out(*folder, file);
            for (std::uint64_t offset = 0; offset < o.size; offset += fetch_chunk) {
                const std::uint64_t length = std::min(fetch_chunk, o.size - offset);
                const std::vector<unsigned char> bytes = client->get_range(part.bucket, o.key, offset, length, o.size);
                out.write(bytes.data(), bytes.size());
            }
            out.sync();
            out.close();
        }
        folders.push_back(folder->path());
    }
    return folders;
}

void remove_fetched(const output_folder& staging) {
    for (const std::string& name : staging.names()) {
        if (staging.kind_of(name) != output_folder::kind::folder) continue;
        const auto folder = staging.subfolder(name, false);
        for (const std::string& file : folder->names()) folder->remove(file);
        staging.remove_empty_folder(name);
    }
}

}  // namespace shardpack::remote
