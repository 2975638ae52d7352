#include "remote/dataset_push.hpp"

#include <chrono>
#include <map>
#include <set>

#include "dataset/dataset_names.hpp"
#include "dataset/folder_ledger.hpp"
#include "dataset/manifest_file.hpp"
#include "inspect/dataset_verifier.hpp"
#include "io/output_folder.hpp"
#include "shardpack/detail/error.hpp"
#include "shardpack/detail/shard_table.hpp"
#include "shardpack/reader.hpp"

namespace shardpack::remote {

namespace {

constexpr std::uint64_t ledger_max_bytes = std::uint64_t(64) << 20;

std::vector<unsigned char> bytes_of(const std::string& s) { return {s.begin(), s.end()}; }

// The shards a binary shard table (format 1.2) lists: name and size, in order.
std::vector<std::pair<std::string, std::uint64_t>> table_files(const std::string& bytes, const std::string& where) {
    std::vector<std::pair<std::string, std::uint64_t>> out;
    try {
        const auto entries = detail::decode_shard_table(reinterpret_cast<const unsigned char*>(bytes.data()), bytes.size());
        for (std::size_t k = 0; k < entries.size(); ++k) out.emplace_back(detail::shard_file_name(k, entries[k].hash), entries[k].bytes);
    } catch (const error& e) {
        throw error(where + ": " + e.what());
    }
    return out;
}

// The local dataset as it was verified: its manifest's text and the files a push sends.
struct local_dataset {
    std::shared_ptr<output_folder> folder;  // the folder as named, held while the push runs
    std::string manifest_text;
    detail::json manifest;
    std::map<std::string, std::uint64_t> local;     // name -> bytes
    std::map<std::string, std::uint64_t> verified;  // name -> the XXH3-64 verify found for its bytes
    std::vector<std::string> order;
};

// A shard's name holds its whole-file hash, which verify checked against its bytes.
std::uint64_t hash_in_name(const std::string& name) {
    std::uint64_t h = 0;
    detail::parse_hex16(name.substr(name.size() - 4 - 16, 16), h);
    return h;
}

// The files the manifest names, in push order; the number of shards goes to r.shards.
void list_local_files(const std::string& dir, output_folder& folder, local_dataset& d, push_result& r) {
    const std::string manifest_path = dir + "/" + manifest_file_name;
    if (const detail::json* table = d.manifest.find("shard_table")) {
        // Format 1.2: the shards listed in the binary shard table, which is pushed like a shard
        // (before the manifest that names it).
        const std::string& name = table->at("file").as_string();
        if (!is_shard_table_name(name)) throw error(manifest_path + ": \"" + name + "\" is not a shard table name");
        const std::string bytes = folder.read_own(name, detail::shard_table_max_bytes);
        for (const auto& [shard, size] : table_files(bytes, dir + "/" + name)) {
            d.local[shard] = size;
            d.verified[shard] = hash_in_name(shard);
            d.order.push_back(shard);
        }
        r.shards = d.order.size();
        d.local[name] = bytes.size();
        if (!detail::parse_hex16(table->at("xxh3").as_string(), d.verified[name]))  // the reader checked the table against it
            throw error(manifest_path + ": shard_table: \"xxh3\" is not 16 lowercase hex digits");
        d.order.push_back(name);
    } else {
        for (const auto& s : d.manifest.at("shards").as_array()) {
            const std::string& name = s.at("file").as_string();
            if (!is_shard_name(name)) throw error(manifest_path + ": \"" + name + "\" is not a shard name");
            d.local[name] = s.at("bytes").as_u64();
            d.verified[name] = hash_in_name(name);
            d.order.push_back(name);
        }
        r.shards = d.order.size();
    }
}

// 1. The local dataset, verified in full, and its manifest as it was verified: read, as
// every command reads a dataset's own files, through the folder (never through a link).
local_dataset read_local(const std::string& dir, push_result& r) {
    local_dataset d;
    d.folder = output_folder::open(dir, false, true);  // the folder as named
    output_folder& folder = *d.folder;
    d.manifest_text = read_manifest_text(folder);
    const verify_result v = verify_dataset(dir);
    if (!v.ok()) {
        std::string first = v.problems.front();
        throw error(dir + ": not pushed: verification found " + std::to_string(v.problems.size()) + " problem(s); the first: " +
                    first);
    }
    if (read_manifest_text(folder) != d.manifest_text)
        throw error(dir + ": not pushed: manifest.json was replaced while it was verified (a rebuild?); push again");
    d.manifest = parse_manifest(d.manifest_text);
    r.content_hash = d.manifest.at("content_hash").as_string();
    r.records = d.manifest.at("records").as_u64();
    list_local_files(dir, folder, d, r);
    return d;
}

// What the prefix holds before the push.
struct remote_prefix {
    std::string old_text;  // its manifest.json, empty where it has none
    std::set<std::string> old_names;  // the files that manifest names
    folder_ledger ledger;
    std::string list_prefix;
    std::map<std::string, std::uint64_t> remote;  // plain names directly under the prefix
};

// The files the prefix's manifest (old_text) names.
std::set<std::string> old_manifest_names(s3_client& client, const s3_location& where, const std::string& old_text) {
    std::set<std::string> old_names;
    try {
        const detail::json old = detail::json::parse(old_text, detail::manifest_max_values);
        if (const detail::json* table = old.find("shard_table")) {
            const std::string& name = table->at("file").as_string();
            if (!is_shard_table_name(name)) throw error("\"" + name + "\" is not a shard table name");
            bool table_found = false;
            const auto bytes = client.get_object(where.bucket, where.key(name), detail::shard_table_max_bytes, &table_found);
            if (!table_found) throw error(where.url(name) + ": no such object");
            old_names.insert(name);
            for (const auto& entry : table_files(std::string(bytes.begin(), bytes.end()), where.url(name)))
                old_names.insert(entry.first);
        } else {
            for (const auto& s : old.at("shards").as_array()) {
                const std::string& name = s.at("file").as_string();
                if (is_shard_name(name)) old_names.insert(name);
            }
        }
    } catch (const error& e) {
        throw error(where.url(manifest_file_name) + ": not a shardpack manifest (" + e.what() +
                    "); not pushing over it (remove it, or push to another prefix)");
    }
    return old_names;
}

// 2. What the prefix holds.
remote_prefix read_remote(s3_client& client, const s3_location& where) {
    remote_prefix p;
    bool found = false;
    const auto old_bytes = client.get_object(where.bucket, where.key(manifest_file_name), detail::manifest_max_bytes, &found);
    p.old_text.assign(old_bytes.begin(), old_bytes.end());
    if (found) p.old_names = old_manifest_names(client, where, p.old_text);
    const auto ledger_bytes = client.get_object(where.bucket, where.key(folder_ledger::file_name), ledger_max_bytes, &found);
    if (found) {
        const auto parsed = folder_ledger::parse(std::string(ledger_bytes.begin(), ledger_bytes.end()));
        if (!parsed) throw error(where.url(folder_ledger::file_name) + ": not a shardpack ledger; not pushing over it");
        p.ledger = *parsed;
    }
    p.list_prefix = where.prefix.empty() ? "" : where.prefix + "/";
    for (const auto& o : client.list_objects(where.bucket, p.list_prefix)) {
        const std::string name = o.key.substr(p.list_prefix.size());
        if (name.find('/') == std::string::npos) p.remote[name] = o.size;
    }
    return p;
}

// What was sent must be what was verified: a file changed in place since (same size) is
// an upload of other bytes under the verified file's name. Such objects are removed, so
// that no later push takes them for the verified file (it goes by name and size).
void check_sent_bytes(const std::string& dir, s3_client& client, const s3_location& where, const std::vector<std::string>& send,
                      std::vector<s3_pending>& puts, local_dataset& d) {
    std::vector<std::string> changed;
    for (std::size_t i = 0; i < send.size(); ++i) {
        std::uint64_t sent = 0;
        const bool known = puts[i].sent_xxh3(sent);
        if (known && sent == d.verified[send[i]]) continue;
        changed.push_back(dir + "/" + send[i] + (known ? ": the bytes uploaded hash to " + detail::hex16(sent) + ", the verified file's to " +
                                                                detail::hex16(d.verified[send[i]])
                                                          : ": its upload was not read in one pass, so its bytes could not be checked"));
        client.delete_object(where.bucket, where.key(send[i]));
    }
    if (!changed.empty())
        throw error(changed.front() + (changed.size() > 1 ? " (and " + std::to_string(changed.size() - 1) + " more)" : "") +
                    ": it changed after it was verified (rewritten in place?); not published (the remote manifest is "
                    "unchanged, the uploaded object removed); push again");
}

// 3. The shards the prefix lacks, announced in the ledger first.
void upload_missing(const std::string& dir, s3_client& client, const s3_location& where, local_dataset& d, remote_prefix& p,
                    const std::function<void(const std::string&)>& log, push_result& r) {
    std::vector<std::string> send;
    for (const auto& name : d.order) {
        const auto it = p.remote.find(name);
        if (it != p.remote.end() && it->second == d.local[name]) ++r.shards_present;
        else send.push_back(name);
    }
    if (send.empty()) return;
    folder_ledger announce = p.ledger;
    for (const auto& n : send) announce.pending.insert(n);
    client.put_object(where.bucket, where.key(folder_ledger::file_name), bytes_of(announce.text()));
    log("uploading " + std::to_string(send.size()) + " shard(s) to " + where.url());
    std::vector<s3_pending> puts;
    for (const auto& n : send) puts.push_back(client.put_file_async(where.bucket, where.key(n), dir + "/" + n));
    std::string failure;
    for (auto& put : puts) {
        try {
            put.wait();
        } catch (const error& e) {
            if (failure.empty()) failure = e.what();
        }
    }
    if (!failure.empty()) throw error("not published (the remote manifest is unchanged): " + failure);
    check_sent_bytes(dir, client, where, send, puts, d);
    std::map<std::string, std::uint64_t> after;
    for (const auto& o : client.list_objects(where.bucket, p.list_prefix)) after[o.key.substr(p.list_prefix.size())] = o.size;
    for (const auto& n : send) {
        const auto it = after.find(n);
        if (it == after.end() || it->second != d.local[n])
            throw error(where.url(n) + ": after the upload the server lists " +
                        (it == after.end() ? std::string("no such object") : std::to_string(it->second) + " bytes") +
                        ", " + std::to_string(d.local[n]) + " were sent; not published (the remote manifest is unchanged)");
        r.bytes_uploaded += d.local[n];
    }
    r.shards_uploaded = send.size();
    p.ledger = announce;
}

// 4. The manifest, last.
void put_manifest(s3_client& client, const s3_location& where, const local_dataset& d, const remote_prefix& p, push_result& r) {
    if (p.old_text == d.manifest_text) {
        r.manifest_unchanged = true;
        return;
    }
    client.put_object(where.bucket, where.key(manifest_file_name), bytes_of(d.manifest_text));
    bool found = false;
    const auto back = client.get_object(where.bucket, where.key(manifest_file_name), detail::manifest_max_bytes, &found);
    if (!found || std::string(back.begin(), back.end()) != d.manifest_text)
        throw error(where.url(manifest_file_name) + ": reads back different from what was written (another push at the same time?)");
}

// 5. The grace rule: keep the replaced manifest's shards until the next push.
void apply_grace(s3_client& client, const s3_location& where, const local_dataset& d, const remote_prefix& p, push_result& r) {
    std::set<std::string> keep(d.order.begin(), d.order.end());
    if (!r.manifest_unchanged) keep.insert(p.old_names.begin(), p.old_names.end());
    std::set<std::string> candidates = p.ledger.retained;
    candidates.insert(p.ledger.pending.begin(), p.ledger.pending.end());
    folder_ledger next;
    for (const auto& n : keep)
        if (!d.local.count(n)) next.retained.insert(n);
    // A manifest left unchanged keeps its ledger's retained shards: they are still the grace
    // of the push before.
    if (r.manifest_unchanged)
        for (const auto& n : p.ledger.retained)
            if (!d.local.count(n)) next.retained.insert(n);
    for (const auto& n : candidates) {
        if (keep.count(n) || next.retained.count(n)) continue;
        client.delete_object(where.bucket, where.key(n));
        ++r.shards_removed;
    }
    client.put_object(where.bucket, where.key(folder_ledger::file_name), bytes_of(next.text()));
    r.shards_retained = next.retained.size();
    for (const auto& [name, size] : p.remote) {
        (void)size;
        if (!keep.count(name) && !candidates.count(name) && name != manifest_file_name && name != folder_ledger::file_name)
            ++r.unknown_objects;
    }
}

}  // namespace

detail::json push_result::report() const {
    detail::json j = detail::json::object();
    j.set("url", url);
    j.set("content_hash", content_hash);
    j.set("records", records);
    j.set("shards", shards);
    j.set("shards_uploaded", shards_uploaded);
    j.set("bytes_uploaded", bytes_uploaded);
    j.set("shards_present", shards_present);
    j.set("shards_removed", shards_removed);
    j.set("shards_retained", shards_retained);
    j.set("unknown_objects", unknown_objects);
    j.set("manifest_unchanged", manifest_unchanged);
    j.set("seconds", seconds);
    return j;
}

push_result push_dataset(const std::string& dir, const std::string& url, s3_client& client,
                         const std::function<void(const std::string&)>& log) {
    const auto t0 = std::chrono::steady_clock::now();
    const s3_location where = parse_s3_url(url);
    push_result r;
    r.url = where.url();
    local_dataset d = read_local(dir, r);
    remote_prefix p = read_remote(client, where);
    upload_missing(dir, client, where, d, p, log, r);
    put_manifest(client, where, d, p, r);
    apply_grace(client, where, d, p, r);
    r.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    return r;
}

}  // namespace shardpack::remote
