// A folder shardpack writes into or reads its own files back from, opened once (O_DIRECTORY | O_NOFOLLOW). Every operation on
// its files goes through that descriptor (openat, renameat, unlinkat, mkdirat) and never
// follows a symbolic link: a link planted at a name it creates, truncates, renames or removes
// makes the operation fail (or replaces the link itself), never reaching the link's target.
// Renaming the folder's path to somewhere else while a build runs does not redirect its
// writes either: they stay in the folder that was opened.
#pragma once
#include <cstddef>
#include <cstdint>
#include <initializer_list>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace shardpack {

class output_folder {
public:
    // Opens the folder at `path` without following a link there (the components before it are
    // resolved as usual; `follow_link` resolves the last one too, for folders the user named
    // only as the place of a file, such as --report's). `create`: makes it first, and its
    // missing parents. io_error on failure.
    static std::shared_ptr<output_folder> open(const std::string& path, bool create, bool follow_link = false);
    // Removes the folder at `path` if it is empty (one this process made and then refused);
    // false otherwise.
    static bool remove_if_empty(const std::string& path);
    ~output_folder();
    output_folder(const output_folder&) = delete;
    output_folder& operator=(const output_folder&) = delete;

    const std::string& path() const { return path_; }
    std::string path_of(const std::string& name) const { return path_ + "/" + name; }
    int fd() const { return fd_; }

    // A subfolder, made if `create` and missing; a link there is refused.
    std::shared_ptr<output_folder> subfolder(const std::string& name, bool create) const;

    // Opens a new file for writing: O_CREAT | O_EXCL | O_NOFOLLOW, so any existing name (a
    // link included) is an error. Returns the descriptor.
    int create_new(const std::string& name) const;
    // Opens for appending, creating it if missing; a link is refused.
    int open_append(const std::string& name) const;
    // Opens for reading and writing, creating it if missing, never truncating; a link is refused.
    int open_read_write(const std::string& name) const;
    // Reads a small regular file (not through a link), at most `max_bytes`; nullopt if it is
    // missing, not a regular file, or larger.
    std::optional<std::string> read_small(const std::string& name, std::size_t max_bytes) const;
    // Reads one of our own files back (a manifest, report, ledger, rejected list): a regular
    // file, not through a link, at most `max_bytes`. Throws input_error "cannot read PATH:
    // reason" for anything else, a missing file included.
    std::string read_own(const std::string& name, std::uint64_t max_bytes) const;
    // The same, but nullopt when nothing has that name.
    std::optional<std::string> read_own_if_present(const std::string& name, std::uint64_t max_bytes) const;

    enum class kind { missing, file, folder, link, other };
    kind kind_of(const std::string& name) const;  // of the name itself, not what a link points to
    // "a FIFO", "a folder", "a symbolic link", ... of the name itself, for messages.
    std::string kind_name(const std::string& name) const;
    // The user id owning the name itself; nullopt if missing.
    std::optional<unsigned> owner_of(const std::string& name) const;
    std::vector<std::string> names() const;       // every entry but . and .., sorted

    // Removes a file (a link is removed, not its target). False if it did not exist.
    bool remove(const std::string& name) const;
    // Removes an empty subfolder; false if it is missing or not empty.
    bool remove_empty_folder(const std::string& name) const;
    // Atomically replaces `to` in folder `dest` with `from` of this folder.
    void rename(const std::string& from, const output_folder& dest, const std::string& to) const;
    void sync() const;
    // Writes a small file durably under NAME.tmp-PID (created exclusively) and renames it to
    // NAME, replacing what is there (a link there is replaced, not followed).
    // Replaces only a regular file of this user that is no input of this process (input_file
    // remembers those); anything else at NAME (a link, FIFO, device, folder, another user's
    // file, the CSV list being read) is refused with io_error naming it.
    void write_atomically(const std::string& name, const std::string& contents) const;
    // Appends the pieces to NAME (created if missing, never through a link) and fsyncs it.
    void append_durably(const std::string& name, std::initializer_list<std::string_view> pieces) const;
    // Makes NAME here a hard link to the regular file at `source` when that gives what a copy
    // would: the source is not a link, is a regular file of `expected_size` bytes owned by this
    // user, with the permissions a new file gets (0644 less the umask). False, with `why_not`
    // set, when it does not (the caller copies instead); io_error when the link fails otherwise.
    bool link_like_copy(const std::string& source, std::uint64_t expected_size, const std::string& name,
                        std::string& why_not) const;

private:
    output_folder(std::string path, int fd) : path_(std::move(path)), fd_(fd) {}
    std::string path_;
    int fd_ = -1;
};

}  // namespace shardpack
