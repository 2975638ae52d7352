// An exclusive lock on a dataset folder for the length of a build, so that two builds into
// the same output never interleave. It is an flock(2) on DIR/.shardpack.lock: the kernel drops
// it when the holder exits, however it exits, so a lock left by a dead process never blocks.
// The lock file is opened relative to the folder's descriptor and never through a link.
#pragma once
#include <string>

namespace shardpack {

class output_folder;

class output_lock {
public:
    // Takes the lock, or throws io_error naming the holder (its pid, host and start time, as it
    // wrote them into the lock file).
    explicit output_lock(const output_folder& folder);
    // The same for the folder at `dir`, created if needed.
    explicit output_lock(const std::string& dir);
    ~output_lock();
    output_lock(const output_lock&) = delete;
    output_lock& operator=(const output_lock&) = delete;

    static constexpr const char* file_name = ".shardpack.lock";

private:
    int fd_ = -1;
};

}  // namespace shardpack
