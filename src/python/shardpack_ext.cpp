// shardpack._shardpack: the Python binding of include/shardpack/reader.hpp (nanobind).
//
// Everything the format needs comes from the C++ reader; this file only converts arguments,
// checks the caller's arrays and splits batches over a thread pool. The Python modules in
// shardpack/ add pickling, the argument conventions and the framework adapters.
//
// Memory: a Reader holds a shardpack::dataset (the index stays in C++). ds[i] returns arrays
// whose owner is a capsule holding the shardpack::sample: raw records are read-only views of the
// memory map, which the sample keeps alive; zstd records are the sample's own decoded buffer.
//
// Threads: read_batch releases the GIL and runs contiguous parts of the batch on one process-wide
// pool of threads (the calling thread takes a part too), each with its own read_context, reused
// from call to call. After fork() the child does not have the parent's threads: a
// pthread_atfork handler makes it start a fresh pool (the old one is left alone: its mutexes
// may have been held at the fork).
#include <nanobind/nanobind.h>
#include <nanobind/ndarray.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/tuple.h>
#include <nanobind/stl/vector.h>

#include <pthread.h>
#include <sys/mman.h>
#include <unistd.h>

#include <cstdlib>
#include <new>
#include <stdexcept>
#include <tuple>
#include <utility>

#include <atomic>
#include <condition_variable>
#include <cstring>
#include <deque>
#include <exception>
#include <functional>
#include <mutex>
#include <thread>

#include "inspect/contact_sheet.hpp"  // shardpack.contact_sheet: the CLI's drawing code (src/inspect/)
#include "shardpack/mix.hpp"
#include "shardpack/order.hpp"
#include "shardpack/reader.hpp"

#ifndef SHARDPACK_VERSION
#error "SHARDPACK_VERSION: src/python/CMakeLists.txt defines it from project(VERSION)"
#endif

namespace nb = nanobind;
using namespace nb::literals;

namespace {

// A pool of threads that run the parts of a job; several jobs (from several Python threads) may
// be in flight, each waited for by its caller, which works on its own job meanwhile.
class worker_pool {
public:
    // Runs part(k) for k in [0, parts) on the caller and up to parts - 1 pool threads. Rethrows
    // the exception of the lowest failing part.
    void run(std::size_t parts, const std::function<void(std::size_t)>& part) {
        if (parts == 0) return;
        job j;
        j.part = &part;
        j.parts = parts;
        j.errors.resize(parts);
        if (parts > 1) {
            std::lock_guard<std::mutex> lock(mutex_);
            while (threads_.size() < parts - 1) threads_.emplace_back([this] { work(); });
            jobs_.push_back(&j);
        }
        wake_.notify_all();
        // The caller works on its own job until every part has been taken.
        for (;;) {
            std::size_t k;
            {
                std::lock_guard<std::mutex> lock(mutex_);
                if (j.next == j.parts) break;
                k = take(j);
            }
            execute(j, k);
        }
        std::unique_lock<std::mutex> lock(mutex_);
        j.finished.wait(lock, [&j] { return j.done == j.parts; });
        lock.unlock();
        for (auto& e : j.errors)
            if (e) std::rethrow_exception(e);
    }

private:
    struct job {
        const std::function<void(std::size_t)>* part = nullptr;
        std::size_t parts = 0, next = 0, done = 0;
        std::vector<std::exception_ptr> errors;
        std::condition_variable finished;
    };

    // Takes the next part of j; mutex_ held. The job leaves the queue with its last part.
    std::size_t take(job& j) {
        const std::size_t k = j.next++;
        if (j.next == j.parts) {
            for (auto it = jobs_.begin(); it != jobs_.end(); ++it)
                if (*it == &j) {
                    jobs_.erase(it);
                    break;
                }
        }
        return k;
    }

    void execute(job& j, std::size_t k) {
        try {
            (*j.part)(k);
        } catch (...) {
            j.errors[k] = std::current_exception();
        }
        std::lock_guard<std::mutex> lock(mutex_);
        if (++j.done == j.parts) j.finished.notify_all();
    }

    void work() {
        for (;;) {
            job* j;
            std::size_t k;
            {
                std::unique_lock<std::mutex> lock(mutex_);
                wake_.wait(lock, [this] { return !jobs_.empty(); });
                j = jobs_.front();
                k = take(*j);
            }
            execute(*j, k);
        }
    }

    std::mutex mutex_;
    std::condition_variable wake_;
    std::deque<job*> jobs_;
    std::vector<std::thread> threads_;  // never joined: they live as long as the process
};

// The process's pool and block cache (below). A forked child gets new ones: its copy of the
// parent's pool has no threads, and either may hold a mutex locked by a thread of the parent.
// The fork is seen by a pthread_atfork handler (registered in NB_MODULE), not by comparing
// getpid() on each call: that is a system call, two or three a batch.
worker_pool* current_pool = nullptr;
class block_cache;
block_cache* current_blocks = nullptr;
void forget_parents_pool_and_cache() {  // in the child, alone, right after fork()
    current_pool = nullptr;  // the parent's are deliberately leaked (see above)
    current_blocks = nullptr;
}

// Called with the GIL held, which serialises it.
worker_pool& pool() {
    if (!current_pool) current_pool = new worker_pool;
    return *current_pool;
}

// The interpreter's exit, as seen by threads coming back from a read without the GIL. Set by
// interpreter_exiting(), which shardpack/__init__.py registers with atexit: CPython runs atexit
// callbacks after joining the non-daemon threads and before it marks itself finalizing.
struct exit_state {
    std::mutex mutex;
    std::condition_variable changed;
    bool exiting = false;
    std::size_t acquiring = 0;  // threads between their check of `exiting` and holding the GIL
};
exit_state& exit_status() {
    static exit_state* s = new exit_state;  // leaked: used by daemon threads until the very end
    return *s;
}

// Releases the GIL for its scope, like nb::gil_scoped_release, except at the interpreter's exit:
// a daemon thread (a Loader's, a tf.data worker's) that comes back from a read_batch while the
// interpreter finalizes would be ended by CPython inside PyEval_RestoreThread (pthread_exit),
// whose unwinding through this destructor (noexcept) calls std::terminate and aborts the whole
// process. Such a thread waits here instead, and ends with the process. Checking
// Py_IsFinalizing() alone left a window (the flag set between the check and the GIL's
// acquisition: CI saw the abort once in a few hundred exits); interpreter_exiting() closes it:
// it waits, without the GIL, for the threads already past the check to hold the GIL.
class gil_released {
public:
    gil_released() : state_(PyEval_SaveThread()) {}
    gil_released(const gil_released&) = delete;
    gil_released& operator=(const gil_released&) = delete;
    ~gil_released() {
        exit_state& s = exit_status();
        {
            std::unique_lock<std::mutex> lock(s.mutex);
            if (s.exiting || finalizing()) {
                lock.unlock();
                // This thread's Reader and arrays stay referenced by its frames for good: not a
                // reference-counting fault, so nanobind's report of them at exit is turned off
                // (a flag only; no Python API is called without the GIL).
                nb::set_leak_warnings(false);
                for (;;) pause();
            }
            ++s.acquiring;
        }
        PyEval_RestoreThread(state_);
        std::lock_guard<std::mutex> lock(s.mutex);
        if (--s.acquiring == 0) s.changed.notify_all();
    }

private:
    static bool finalizing() {
#if PY_VERSION_HEX >= 0x030D0000
        return Py_IsFinalizing();
#else
        return _Py_IsFinalizing();
#endif
    }
    PyThreadState* state_;
};

// Called by atexit with the GIL held: from now on a thread coming back from a read waits for
// the process's end; the ones already acquiring the GIL get it (released here) and go on.
void interpreter_exiting() {
    exit_state& s = exit_status();
    {
        std::lock_guard<std::mutex> lock(s.mutex);
        s.exiting = true;
    }
    nb::gil_scoped_release unlocked;
    std::unique_lock<std::mutex> lock(s.mutex);
    s.changed.wait(lock, [&s] { return s.acquiring == 0; });
}

shardpack::read_context& thread_context() {
    thread_local shardpack::read_context ctx;
    return ctx;
}

enum class label_mode { one_hot, index, none };
// The values of a batch's images and labels (read_batch's dtype and label_dtype).
enum class image_type { uint8, uint16, float32 };
enum class label_type { float32, uint8, uint16, int64 };

// read_batch's options as one typed object, as grain's ReadOptions (shardpack._shardpack.ReadOptions):
// shardpack.Dataset.read_batch builds it from its keyword arguments, checked and resolved there
// (shardpack/_checks.py, _BatchOptions), and passes it with what changes from batch to batch.
struct read_options {
    image_type images = image_type::float32;
    bool channels_first = true;                   // NCHW (else NHWC)
    std::vector<float> mean, stddev;              // float32 images, per channel on the 0..1 scale (up to 4)
    label_mode label = label_mode::one_hot;       // none: no labels
    label_type label_dtype = label_type::float32;
    std::size_t crop_height = 0, crop_width = 0;  // 0 x 0: the records' own size
    shardpack::crop_position crop_position = shardpack::crop_position::center;  // given: read_batch's given_boxes
    shardpack::flip_mode hflip = shardpack::flip_mode::none, vflip = shardpack::flip_mode::none;
    float hflip_probability = 0, vflip_probability = 0;
    std::vector<std::uint32_t> background{0};     // crop_position foreground: the classes that are not
    std::size_t threads = 1;                      // parts the batch is split into (capped in Python)
};

// shardpack.contact_sheet's options, checked there (shardpack/_sheet.py): which records, and how
// they are drawn (shardpack::contact_sheet_options, src/inspect/contact_sheet.hpp).
struct sheet_options {
    std::vector<std::size_t> records;             // empty: `count` records, the first or drawn
    std::size_t count = 16;
    bool random = false;                          // drawn with sample_seed (as the CLI's --sample-seed)
    std::uint64_t sample_seed = 0;
    std::size_t tile = 256, columns = 0;
    double alpha = 0.5;
    std::vector<std::uint32_t> hidden;            // class ids left out of the overlay
    std::string title;
};

// Argument errors raised here (about out= arrays and indices: see read_batch) become the Python classes
// that are both a shardpack.Error and the matching built-in (registered in NB_MODULE).
struct argument_error : shardpack::error {  // shardpack.ArgumentValueError (ValueError)
    using shardpack::error::error;
};
struct argument_type_error : shardpack::error {  // shardpack.ArgumentTypeError (TypeError)
    using shardpack::error::error;
};
PyObject* error_type = nullptr;           // shardpack.Error (RuntimeError)
PyObject* value_error_type = nullptr;     // shardpack.ArgumentValueError
PyObject* type_error_type = nullptr;      // shardpack.ArgumentTypeError
PyObject* index_error_type = nullptr;     // shardpack.IndexOutOfRange

// Text from the dataset (class names, keys) as the JSON side reads it: bytes that are not UTF-8
// come back as lone surrogates (surrogateescape), so os.fsencode(key) gives the bytes back.
nb::str text(std::string_view s) {
    PyObject* o = PyUnicode_DecodeUTF8(s.data(), static_cast<Py_ssize_t>(s.size()), "surrogateescape");
    if (!o) throw nb::python_error();
    return nb::steal<nb::str>(o);
}

// Sets a Python exception of `type` from a C++ message that may hold a path that is not UTF-8.
void set_error(PyObject* type, const char* what) {
    PyObject* message = PyUnicode_DecodeUTF8(what, static_cast<Py_ssize_t>(std::strlen(what)), "backslashreplace");
    if (!message) return;  // the decoding error stays set
    PyErr_SetObject(type, message);
    Py_DECREF(message);
}

// Any device here; caller_array accepts CPU memory: plain (kDLCPU) or pinned (kDLCUDAHost, as
// PyTorch reports a pinned CPU tensor through DLPack).
using any_array = nb::ndarray<nb::c_contig>;

std::string shape_string(const std::vector<std::size_t>& shape) {
    std::string s = "(";
    for (std::size_t i = 0; i < shape.size(); ++i) s += (i ? ", " : "") + std::to_string(shape[i]);
    return s + (shape.size() == 1 ? ",)" : ")");
}

const char* dtype_name(nb::dlpack::dtype t) {
    if (t == nb::dtype<std::uint8_t>()) return "uint8";
    if (t == nb::dtype<float>()) return "float32";
    if (t == nb::dtype<std::int64_t>()) return "int64";
    if (t == nb::dtype<double>()) return "float64";
    if (t == nb::dtype<std::int32_t>()) return "int32";
    if (t == nb::dtype<std::uint16_t>()) return "uint16";
    return "another dtype";
}

// An output array from the caller (NumPy, anything with the buffer protocol or DLPack), used in
// place: it must be a writable, C-contiguous CPU array of exactly this shape and dtype. Never
// converted or copied (that would fill a temporary instead of the caller's array).
any_array caller_array(nb::handle obj, const char* what, const std::vector<std::size_t>& shape,
                       nb::dlpack::dtype dtype) {
    // Writing into a tensor that requires grad would change values autograd has recorded (or
    // will record) without it knowing: torch itself refuses in-place writes to such leaves.
    const int requires_grad = nb::hasattr(obj, "requires_grad") ? PyObject_IsTrue(obj.attr("requires_grad").ptr()) : 0;
    if (requires_grad < 0) throw nb::python_error();
    if (requires_grad)
        throw argument_error(std::string("read_batch: out ") + what +
                             " is a tensor that requires grad, which read_batch does not write into (autograd would not "
                             "see the write); give a tensor without it, e.g. created with requires_grad=False or .detach()");
    any_array a;
    if (!nb::try_cast(obj, a, false))
        throw argument_type_error(std::string("read_batch: out ") + what +
                               " must be a writable, C-contiguous CPU array (NumPy, buffer protocol or DLPack)");
    if (a.device_type() != nb::device::cpu::value && a.device_type() != nb::device::cuda_host::value)
        throw argument_error(std::string("read_batch: out ") + what + " is not in CPU memory (DLPack device type " +
                               std::to_string(a.device_type()) + "); pinned CPU memory is fine");
    std::vector<std::size_t> got(a.ndim());
    for (std::size_t d = 0; d < a.ndim(); ++d) got[d] = a.shape(d);
    if (a.dtype() != dtype)
        throw argument_type_error(std::string("read_batch: out ") + what + " is " + dtype_name(a.dtype()) + " " +
                                  shape_string(got) + ", this batch needs " + dtype_name(dtype) + " " +
                                  shape_string(shape));
    if (got != shape)
        throw argument_error(std::string("read_batch: out ") + what + " is " + dtype_name(a.dtype()) + " " +
                               shape_string(got) + ", this batch needs " + dtype_name(dtype) + " " +
                               shape_string(shape));
    return a;
}

// Whether two arrays' bytes overlap (a view of the other, or two views of one buffer).
bool overlap(const any_array& a, const any_array& b) {
    const auto* a0 = static_cast<const char*>(a.data());
    const auto* b0 = static_cast<const char*>(b.data());
    return a.nbytes() && b.nbytes() && a0 < b0 + b.nbytes() && b0 < a0 + a.nbytes();
}

// Fresh output arrays (read_batch without out=, ds[i] of zstd records). Memory the kernel hands
// out faults once per page on first write, zeroing it: it made fresh batches 3-4x slower than
// filling reused ones. So a block whose array is freed goes back to a small cache that the next
// batch of the same size takes again, already mapped: the steady state of a training loop (one
// batch alive while the next is read) faults nothing. The cache holds at most `cached_blocks`
// blocks and `cached_bytes_limit` bytes; a block that does not fit is returned to the system.
// The blocks are small pages, not MADV_HUGEPAGE: only a process's first few batches fault, and
// there huge pages cost more on a VM (measured on this 2-core one: 88 MiB first written in 2 MiB
// pages took 0.14-0.30 s, in 4 KiB pages 0.06-0.075 s; the second time 0.011 and 0.06 s), since
// a guest's free 2 MiB blocks are what it reports back to its host, which must back them again;
// a cold epoch's first three batches took 65 ms each instead of 8. See
// scripts/bench/py_alloc_bench.py.
//
// allocation (private, for that benchmark): how fresh outputs are allocated.
enum class allocation { pool, huge_pages, numpy, plain };
allocation fresh_allocation = allocation::pool;

constexpr std::size_t huge_page = std::size_t(2) << 20;
constexpr std::size_t small_output = std::size_t(1) << 20;  // below: plain operator new (malloc's heap)

class block_cache {
public:
    struct taken {
        void* data;
        std::size_t bytes;  // the block's size: `bytes` or, from the cache, up to twice that
    };
    // A block of at least `bytes` (a multiple of huge_page): a cached one of that size, else the
    // smallest cached one up to twice that (an epoch's short last batch takes a full batch's
    // block instead of faulting in a new one), else new (huge pages asked for where not cached:
    // the benchmark's huge_pages way).
    taken take(std::size_t bytes, bool cached) {
        if (cached) {
            std::lock_guard<std::mutex> lock(mutex_);
            auto best = free_.end();
            for (auto it = free_.begin(); it != free_.end(); ++it)
                if (it->bytes >= bytes && it->bytes <= 2 * bytes && (best == free_.end() || it->bytes <= best->bytes))
                    best = it;  // the last of the smallest: the most recently given back
            if (best != free_.end()) {
                const taken t{best->data, best->bytes};
                cached_bytes_ -= best->bytes;
                free_.erase(best);
                return t;
            }
        }
        void* p = nullptr;
        if (posix_memalign(&p, huge_page, bytes) != 0) throw std::bad_alloc();
        if (!cached) madvise(p, bytes, MADV_HUGEPAGE);  // advice: without THP it fails harmlessly
        return {p, bytes};
    }

    // Called when an array's last reference goes (the GIL held).
    void give(void* p, std::size_t bytes, bool cached) {
        if (cached) {
            std::lock_guard<std::mutex> lock(mutex_);
            if (bytes <= limit()) {
                // Make room: the oldest blocks go first.
                while (!free_.empty() && (free_.size() >= cached_blocks || cached_bytes_ + bytes > limit())) {
                    std::free(free_.front().data);
                    cached_bytes_ -= free_.front().bytes;
                    free_.erase(free_.begin());
                }
                free_.push_back({p, bytes});
                cached_bytes_ += bytes;
                return;
            }
        }
        std::free(p);
    }

private:
    struct block {
        void* data;
        std::size_t bytes;
    };
    static constexpr std::size_t cached_blocks = 8;  // images + labels of 4 batches
    // An eighth of the machine's memory, at least 256 MiB.
    static std::size_t limit() {
        static const std::size_t bytes = [] {
            const long pages = sysconf(_SC_PHYS_PAGES), page = sysconf(_SC_PAGESIZE);
            const std::size_t total = pages > 0 && page > 0 ? std::size_t(pages) * std::size_t(page) : 0;
            return std::max<std::size_t>(std::size_t(256) << 20, total / 8);
        }();
        return bytes;
    }
    std::mutex mutex_;
    std::vector<block> free_;  // oldest first
    std::size_t cached_bytes_ = 0;
};

// The process's cache; like the pool of threads, a forked child starts its own (see
// forget_parents_pool_and_cache). Blocks from before the fork are the child's copies: they go
// to the child's cache. Called with the GIL held.
block_cache& blocks() {
    if (!current_blocks) current_blocks = new block_cache;
    return *current_blocks;
}

// `bytes` of uninitialised memory for a fresh output, and the capsule that frees it.
std::pair<void*, nb::capsule> output_memory(std::size_t bytes) {
    if (bytes < small_output || fresh_allocation == allocation::plain) {
        void* data = ::operator new(bytes == 0 ? 1 : bytes);
        return {data, nb::capsule(data, [](void* p) noexcept { ::operator delete(p); })};
    }
    const std::size_t rounded = (bytes + huge_page - 1) / huge_page * huge_page;
    const bool cached = fresh_allocation == allocation::pool;
    const block_cache::taken block = blocks().take(rounded, cached);
    void* data = block.data;
    // The capsule's destructor gets only the pointer: the size travels in a small header object.
    struct owned {
        void* data;
        std::size_t bytes;
        bool cached;
    };
    auto* o = new owned{data, block.bytes, cached};
    return {data, nb::capsule(o, [](void* p) noexcept {
                const auto* o = static_cast<owned*>(p);
                blocks().give(o->data, o->bytes, o->cached);
                delete o;
            })};
}

std::size_t element_count(const std::vector<std::size_t>& shape) {
    std::size_t n = 1;
    for (auto d : shape) n *= d;
    return n;
}

nb::object new_numpy(const std::vector<std::size_t>& shape, nb::dlpack::dtype dtype) {
    const std::size_t bytes = element_count(shape) * dtype.bits / 8;
    if (fresh_allocation == allocation::numpy) {
        nb::object np = nb::module_::import_("numpy");
        const char* name = dtype == nb::dtype<float>() ? "float32"
                         : dtype == nb::dtype<std::int64_t>() ? "int64"
                         : dtype == nb::dtype<std::uint16_t>() ? "uint16" : "uint8";
        nb::list dims;
        for (auto d : shape) dims.append(d);
        return np.attr("empty")(nb::tuple(dims), name);
    }
    auto [data, owner] = output_memory(bytes);
    return nb::ndarray<nb::numpy>(data, shape.size(), shape.data(), owner, nullptr, dtype).cast();
}

// A NumPy int64 array that takes over `values` (indices, all below 2^63).
nb::object index_array(std::vector<std::uint64_t>&& values) {
    auto* held = new std::vector<std::uint64_t>(std::move(values));
    nb::capsule owner(held, [](void* p) noexcept { delete static_cast<std::vector<std::uint64_t>*>(p); });
    const std::size_t shape[1] = {held->size()};
    return nb::ndarray<nb::numpy, std::int64_t>(reinterpret_cast<std::int64_t*>(held->data()), 1, shape, owner).cast();
}

// shardpack.epoch_order: include/shardpack/order.hpp, the one implementation of the orders.
nb::object epoch_order(std::uint64_t n, std::uint64_t seed, std::uint64_t epoch, std::size_t rank, std::size_t world,
                       bool drop_last, bool shuffle, const std::string& kind, std::size_t block, std::size_t window,
                       std::vector<std::uint64_t> shard_starts) {
    shardpack::order_options o;
    o.shuffle = shuffle;
    if (kind == "global") o.kind = shardpack::order_kind::global;
    else if (kind == "blocks") o.kind = shardpack::order_kind::blocks;
    else throw std::invalid_argument("order must be \"global\" or \"blocks\", not \"" + kind + "\"");
    o.block = block;
    o.window = window;
    o.shard_starts = std::move(shard_starts);
    std::vector<std::uint64_t> order;
    {
        gil_released unlocked;
        order = shardpack::epoch_order(n, seed, epoch, rank, world, drop_last, o);
    }
    return index_array(std::move(order));
}

nb::object order_blocks(std::uint64_t n, std::size_t block, const std::vector<std::uint64_t>& shard_starts) {
    return index_array(shardpack::order_blocks(n, block, shard_starts));
}

#include "fields_ext.hpp"

// shardpack.mix and the Sampler's resume on another world: include/shardpack/mix.hpp, from checked arguments.
using index_input = nb::ndarray<const std::int64_t, nb::ndim<1>, nb::c_contig, nb::device::cpu>;

shardpack::order_kind order_kind_of(const std::string& kind) {
    if (kind == "global") return shardpack::order_kind::global;
    if (kind == "blocks") return shardpack::order_kind::blocks;
    throw std::invalid_argument("order must be \"global\" or \"blocks\", not \"" + kind + "\"");
}

nb::object mix_full_order(const std::vector<std::uint64_t>& records, const std::vector<double>& weights,
                          const std::vector<std::size_t>& blocks, std::vector<std::vector<std::uint64_t>> shard_starts,
                          std::uint64_t seed, std::uint64_t epoch, bool shuffle, const std::string& kind,
                          std::size_t window, std::uint64_t epoch_size, bool replacement) {
    std::vector<shardpack::mix_source> parts(records.size());
    for (std::size_t k = 0; k < parts.size(); ++k) {
        parts[k].records = records.at(k);
        parts[k].weight = weights.at(k);
        parts[k].block = blocks.at(k);
        parts[k].shard_starts = std::move(shard_starts.at(k));
    }
    shardpack::mix_options o;
    o.epoch_size = epoch_size;
    o.replacement = replacement;
    o.shuffle = shuffle;
    o.kind = order_kind_of(kind);
    o.window = window;
    std::vector<std::uint64_t> order;
    {
        gil_released unlocked;
        order = shardpack::mix_full_order(parts, seed, epoch, o);
    }
    return index_array(std::move(order));
}

nb::object resumed_order(index_input order, const std::vector<std::vector<std::uint64_t>>& stages, std::size_t rank,
                         std::size_t world, bool drop_last, bool contiguous) {
    std::vector<std::uint64_t> values(order.data(), order.data() + order.shape(0));
    std::vector<shardpack::resume_stage> resume;
    for (const auto& consumed : stages) resume.push_back(shardpack::resume_stage{consumed});
    std::vector<std::uint64_t> mine;
    {
        gil_released unlocked;
        mine = shardpack::resumed_order(std::move(values), resume, rank, world, drop_last, contiguous);
    }
    return index_array(std::move(mine));
}

class reader {
public:
    // path: the folder as bytes (os.fsencode), so that any name the file system holds opens.
    // io: "auto", "mmap", "pread", "stream" or "blocks" (checked in Python); max_open_shards,
    // cache_bytes, io_threads: 0 is automatic.
    reader(nb::bytes path, bool verify_checksums, const std::string& io, std::size_t max_open_shards,
           std::uint64_t cache_bytes, unsigned io_threads)
        : path_(path.c_str(), path.size()) {
        shardpack::open_options o;
        o.verify_checksums = verify_checksums;
        o.io = io == "mmap" ? shardpack::io_mode::mmap : io == "pread" ? shardpack::io_mode::pread
             : io == "stream" ? shardpack::io_mode::stream : io == "blocks" ? shardpack::io_mode::blocks
             : shardpack::io_mode::automatic;
        o.max_open_shards = max_open_shards;
        o.cache_bytes = cache_bytes;
        o.io_threads = io_threads;
        o.log = [this](const std::string& message) { io_note_ = message; };  // Python logs it
        gil_released unlocked;
        ds_ = shardpack::dataset::open(path_, o);
    }
    const shardpack::dataset& dataset() const { return ds_; }  // for fields_ext
    std::size_t open_shards() const { return ds_.open_shard_count(); }
    std::size_t max_open_shards() const { return ds_.max_open_shards(); }
    std::string io() const { return shardpack::io_mode_name(ds_.io()); }
    std::string preferred_order() const { return ds_.preferred_order(); }
    std::uint64_t cache_bytes() const { return ds_.cache_bytes(); }
    std::tuple<std::size_t, std::size_t> blocks_layout() const {
        const auto l = ds_.blocks_layout();
        return {l.block, l.window};
    }
    const std::string& io_note() const { return io_note_; }
    bool begin_epoch() const { return ds_.begin_epoch(); }
    bool keep_decoded() const { return ds_.keep_decoded(); }
    std::size_t decoded_count() const { return ds_.decoded_count(); }
    std::uint64_t decoded_bytes() const { return ds_.decoded_bytes(); }
    nb::dict io_counters() const {
        const auto c = ds_.io_counters();
        nb::dict d;
        d["extent_reads"] = c.extent_reads;
        d["extent_bytes"] = c.extent_bytes;
        d["direct_reads"] = c.direct_reads;
        d["direct_bytes"] = c.direct_bytes;
        d["hits"] = c.hits;
        d["waits"] = c.waits;
        d["jumps"] = c.jumps;
        d["evicted_bytes"] = c.evicted_bytes;
        d["dropped_hints"] = c.dropped_hints;
        d["cached_bytes"] = c.cached_bytes;
        d["peak_cached_bytes"] = c.peak_cached_bytes;
        d["held_bytes"] = c.held_bytes;
        d["peak_held_bytes"] = c.peak_held_bytes;
        return d;
    }

    std::size_t size() const { return ds_.size(); }
    nb::str path() const { return text(path_); }
    std::string task() const {
        return ds_.schema().task == shardpack::task::segmentation ? "segmentation" : "classification";
    }
    std::string label_layout() const {
        switch (ds_.schema().layout) {
            case shardpack::label_layout::one_hot: return "onehot";
            case shardpack::label_layout::index: return "index";
            default: return "class_id";
        }
    }
    nb::list classes() const {
        nb::list names;
        for (const auto& c : ds_.classes()) names.append(text(c.name));
        return names;
    }
    nb::object image_shape() const {
        const auto& s = ds_.schema();
        if (s.fixed_height == 0) return nb::none();
        return nb::make_tuple(s.fixed_height, s.fixed_width, s.channels);
    }
    std::size_t channels() const { return ds_.schema().channels; }
    // "uint8", or "uint16" (format 1.4).
    std::string image_dtype() const { return ds_.schema().image_value_bytes == 2 ? "uint16" : "uint8"; }
    // "L", "RGB", "RGBA", or "bands" (format 1.4: the source's samples, no color meaning).
    std::string channel_order() const {
        switch (ds_.schema().order) {
            case shardpack::channel_order::gray: return "L";
            case shardpack::channel_order::rgb: return "RGB";
            case shardpack::channel_order::rgba: return "RGBA";
            default: return "bands";
        }
    }
    std::size_t class_count() const { return ds_.schema().class_count; }
    std::size_t ignore_value() const { return ds_.schema().ignore_value; }
    std::string content_hash() const { return ds_.content_hash(); }
    // The first record of each shard that holds any (for the blocks order: blocks never span two).
    nb::object shard_starts() const { return index_array(shardpack::shard_starts_of(ds_)); }
    // The bytes of all shards (the dataset's size on disk, without manifest.json).
    std::uint64_t data_bytes() const {
        std::uint64_t bytes = 0;
        for (std::size_t k = 0; k < ds_.shard_count(); ++k) bytes += ds_.shard_bytes(k);
        return bytes;
    }

    // i: in [0, len) (checked by shardpack/__init__.py; the reader refuses any other).
    // (height, width) of record i from its header alone (shardpack::dataset::record_size).
    nb::tuple record_size(std::size_t i) const {
        std::pair<std::size_t, std::size_t> size;
        {
            gil_released unlocked;
            size = ds_.record_size(i, thread_context());
        }
        return nb::make_tuple(size.first, size.second);
    }

    nb::str key(std::size_t i) const {
        std::string k;
        {
            gil_released unlocked;
            k = std::string(ds_.read(i, thread_context()).key());
        }
        return text(k);
    }

    // (image, label) of record i. Raw records: read-only arrays over the memory map, owned by a
    // capsule holding the sample (which keeps the mapping). zstd records: decoded into this
    // thread's context and copied into one block of fresh output memory (see output_memory),
    // which the two writable arrays share: no page faults once the cache is warm.
    nb::tuple get(std::size_t k) const {
        const auto& sc = ds_.schema();
        const bool seg = sc.task == shardpack::task::segmentation;
        const bool raw = record_is_raw(k);
        if (raw || fresh_allocation == allocation::plain) {  // plain: zstd records as before #19
            auto* s = new shardpack::sample;
            nb::capsule owner(s, [](void* p) noexcept { delete static_cast<shardpack::sample*>(p); });
            {
                gil_released unlocked;
                *s = ds_.at(k);
            }
            return arrays(*s, owner, nullptr, raw);
        }
        shardpack::read_context& ctx = thread_context();
        if (sc.fixed_height != 0) return get_fixed(k, ctx);
        shardpack::sample smp;
        {
            gil_released unlocked;
            smp = ds_.read(k, ctx);
        }
        const std::size_t image_bytes = smp.height() * smp.width() * sc.channels * sc.image_value_bytes;
        const std::size_t label_at = (image_bytes + 63) / 64 * 64;  // aligned for uint16 maps
        std::size_t label_bytes = 0;
        const unsigned char* label_src = nullptr;
        if (seg) {
            if (sc.layout == shardpack::label_layout::index && sc.label_value_bytes == 2) {
                const auto lab = smp.label_index16();
                label_src = reinterpret_cast<const unsigned char*>(lab.data());
                label_bytes = lab.size() * 2;
            } else {
                const auto lab = smp.label();
                label_src = lab.data();
                label_bytes = lab.size();
            }
        }
        auto [data, owner] = output_memory(label_at + label_bytes);
        auto* dst = static_cast<std::uint8_t*>(data);
        {
            gil_released unlocked;
            std::memcpy(dst, image_bytes_of(smp), image_bytes);
            if (label_bytes) std::memcpy(dst + label_at, label_src, label_bytes);
        }
        return arrays(smp, owner, dst, false, label_at);
    }

    // Starts reading records `indices` (in [0, len), checked by shardpack/__init__.py; the
    // reader skips any other) from storage, a hint (see shardpack/_readahead.py):
    // dataset::prefetch announces their byte ranges, merged per shard (WILLNEED).
    void prefetch(nb::ndarray<const std::int64_t, nb::ndim<1>, nb::c_contig, nb::device::cpu> indices) {
        const std::int64_t* data = indices.data();
        std::vector<std::size_t> which(data, data + indices.shape(0));
        gil_released unlocked;
        ds_.prefetch(which.data(), which.size());
    }

    // The batch: returns (images, labels, boxes), the caller's arrays where given. The options
    // were checked and resolved by shardpack/__init__.py (_BatchOptions): threads capped.
    // seed and epoch draw the random crops and flips; given_boxes: int64 (N, 4) of y, x, hflip,
    // vflip where the options say "given". Checked here: the indices (checked_indices, as they
    // are copied) and the caller's out= arrays, because only here is their memory visible
    // (buffer protocol or DLPack). The steps are the functions below (private:).
    nb::tuple read_batch(nb::ndarray<const std::int64_t, nb::ndim<1>, nb::c_contig, nb::device::cpu> indices,
                         const read_options& o, std::uint64_t seed, std::uint64_t epoch, nb::object out_images,
                         nb::object out_labels, nb::object given_boxes, nb::object out_boxes) {
        const std::size_t n = indices.shape(0);
        batch_augmentation aug = augmentation_of(o, seed, epoch, given_boxes, n);
        const std::vector<std::size_t> which = checked_indices(indices.data(), n);
        const batch_shape shape = shape_of(o, which);
        batch_arrays out = outputs_of(o, shape, which, out_images, out_labels, out_boxes);
        // The windows and flips each sample got: for boxes=, and for foreground crops always (to
        // count the records that had no foreground).
        const bool foreground = aug.on && aug.aug.position == shardpack::crop_position::foreground;
        std::vector<shardpack::crop_box> applied(aug.on && (!out.boxes_obj.is_none() || foreground) ? n : 0);
        std::vector<std::int32_t> class_ids;  // see buffers_of
        shardpack::sample_buffers all = buffers_of(o, shape, out, class_ids);
        if (aug.on) {
            if (!aug.given.empty()) aug.aug.given = aug.given.data();
            all.augment = &aug.aug;
            if (!applied.empty()) all.applied = applied.data();
        }
        worker_pool& workers = pool();  // (with the GIL)
        {
            gil_released unlocked;
            read_parts(workers, which, all, o.threads);
            narrow_class_ids(class_ids, out);
            if (foreground)
                for (const shardpack::crop_box& a : applied) fallbacks_ += a.fallback;
            if (!out.boxes_obj.is_none()) write_boxes(applied, out.boxes, n);
        }
        return nb::make_tuple(out.images_obj, out.labels_obj, out.boxes_obj);
    }

    // -- class colors, contact sheets, foreground crops (issue 33)
    // (r, g, b) per class: the dictionary's color, or the palette's (src/inspect/contact_sheet.hpp).
    nb::list class_colors() const {
        nb::list out;
        for (std::size_t c = 0; c < ds_.classes().size(); ++c) {
            const shardpack::rgb k = shardpack::class_color(ds_, c);
            out.append(nb::make_tuple(k.r, k.g, k.b));
        }
        return out;
    }
    // Foreground-crop reads (read_batch) that found no foreground pixel and took a uniform window.
    std::uint64_t foreground_fallbacks() const { return fallbacks_.load(); }
    // shardpack.contact_sheet, from options it checked: (pixels (H, W, 3) uint8, tiles, legend).
    // `augment` (a ReadOptions, or None for the records as stored): the crops and flips of read_batch.
    nb::tuple contact_sheet(const sheet_options& options, nb::object augment, std::uint64_t seed,
                            std::uint64_t epoch) const {
        shardpack::augmentation aug;
        if (!augment.is_none())
            aug = augmentation_of(nb::cast<const read_options&>(augment), seed, epoch, nb::none(), 0).aug;
        shardpack::contact_sheet_options o;
        o.records = options.records.empty()
                        ? shardpack::sheet_records(ds_.size(), options.count, options.random, options.sample_seed)
                        : options.records;
        o.tile = options.tile;
        o.columns = options.columns;
        o.alpha = options.alpha;
        o.hidden = options.hidden;
        o.title = options.title;
        o.augment = augment.is_none() ? nullptr : &aug;
        shardpack::contact_sheet sheet;
        {
            gil_released unlocked;
            sheet = shardpack::render_contact_sheet(ds_, o);
        }
        const std::vector<std::size_t> shape{sheet.canvas.height, sheet.canvas.width, 3};
        nb::object pixels = new_numpy(shape, nb::dtype<std::uint8_t>());
        std::memcpy(nb::cast<nb::ndarray<std::uint8_t>>(pixels).data(), sheet.canvas.pixels.data(), sheet.canvas.pixels.size());
        nb::list tiles, legend;
        for (const shardpack::sheet_tile& t : sheet.tiles) {
            nb::dict d;
            d["index"] = t.index;
            d["x"] = t.x;
            d["y"] = t.y;
            d["width"] = t.width;
            d["height"] = t.height;
            d["source_height"] = t.source_height;
            d["source_width"] = t.source_width;
            d["box"] = nb::make_tuple(t.box.y, t.box.x, int(t.box.hflip), int(t.box.vflip));
            d["fallback"] = t.box.fallback;
            tiles.append(d);
        }
        for (const shardpack::sheet_legend_entry& e : sheet.legend) {
            nb::dict d;
            d["class_id"] = e.class_id;
            d["x"] = e.x;
            d["y"] = e.y;
            d["size"] = e.size;
            d["color"] = nb::make_tuple(e.color.r, e.color.g, e.color.b);
            d["hidden"] = e.hidden;
            legend.append(d);
        }
        return nb::make_tuple(pixels, tiles, legend);
    }

private:
    shardpack::dataset ds_;
    std::string path_;
    std::string io_note_;  // what open() said about its choice of I/O (open_options::log)
    std::atomic<std::uint64_t> fallbacks_{0};

    // -- read_batch's steps, in their order

    // A batch's crops and flips (the reader's augmentation) and the given boxes it points to.
    struct batch_augmentation {
        shardpack::augmentation aug;
        std::vector<shardpack::crop_box> given;  // crop_position or flips "given": per sample
        bool on = false;                         // any crop or flip
    };
    static batch_augmentation augmentation_of(const read_options& o, std::uint64_t seed, std::uint64_t epoch,
                                              const nb::object& given_boxes, std::size_t n) {
        batch_augmentation a;
        // The output is crop_height x crop_width (0 x 0: the record's size).
        a.aug.height = o.crop_height;
        a.aug.width = o.crop_width;
        a.aug.seed = seed;
        a.aug.epoch = epoch;
        a.aug.hflip_probability = o.hflip_probability;
        a.aug.vflip_probability = o.vflip_probability;
        a.aug.position = o.crop_position;
        a.aug.background = o.background;
        a.aug.hflip = o.hflip;
        a.aug.vflip = o.vflip;
        a.on = o.crop_height != 0 || o.hflip != shardpack::flip_mode::none || o.vflip != shardpack::flip_mode::none;
        // Given boxes and flips: int64 (N, 4) of y, x, hflip, vflip (made by Dataset.read_batch).
        if (!given_boxes.is_none()) {
            const auto g = nb::cast<nb::ndarray<const std::int64_t, nb::ndim<2>, nb::c_contig, nb::device::cpu>>(
                given_boxes);
            a.given.resize(n);
            for (std::size_t j = 0; j < n && g.shape(0) == n && g.shape(1) == 4; ++j) {
                const std::int64_t* row = g.data() + 4 * j;
                a.given[j].y = std::uint32_t(row[0]);
                a.given[j].x = std::uint32_t(row[1]);
                a.given[j].hflip = row[2] != 0;
                a.given[j].vflip = row[3] != 0;
            }
        }
        return a;
    }

    // The batch's geometry: n records of h x w x c, k classes.
    struct batch_shape {
        std::size_t n, h, w, c, k;
        bool seg;
    };
    batch_shape shape_of(const read_options& o, const std::vector<std::size_t>& which) const {
        const auto& sc = ds_.schema();
        batch_shape s{which.size(), o.crop_height ? o.crop_height : sc.fixed_height,
                      o.crop_width ? o.crop_width : sc.fixed_width, sc.channels, sc.class_count,
                      sc.task == shardpack::task::segmentation};
        if (s.h == 0 && s.n > 0) {
            // Records of varying size (no --size) and no crop: the batch is its first record's
            // size, and the reader refuses a record of another (sample_buffers::batch_height).
            gil_released unlocked;
            std::tie(s.h, s.w) = ds_.record_size(which[0], thread_context());
        }
        // A crop larger than the records is refused before the batch is allocated (a crop of
        // 65536 x 65536 would otherwise be a MemoryError instead of this message).
        if (s.n > 0 && o.crop_height != 0 && sc.fixed_height != 0 &&
            (o.crop_height > sc.fixed_height || o.crop_width > sc.fixed_width))
            throw shardpack::error(path_ + ": crop " + std::to_string(o.crop_width) + "x" + std::to_string(o.crop_height) +
                                   " is larger than record " + std::to_string(which[0]) + " (" +
                                   std::to_string(sc.fixed_width) + "x" + std::to_string(sc.fixed_height) +
                                   "; every record of this dataset is that size)");
        return s;
    }

    // The output arrays, fresh or the caller's (out=, checked: shape, dtype, memory, no overlap).
    struct batch_arrays {
        nb::object images_obj, labels_obj = nb::none(), boxes_obj = nb::none();
        any_array images, labels, boxes;
        nb::dlpack::dtype label_dtype;
    };
    batch_arrays outputs_of(const read_options& o, const batch_shape& s, const std::vector<std::size_t>& which,
                            const nb::object& out_images, const nb::object& out_labels,
                            const nb::object& out_boxes) const {
        const std::size_t n = s.n, h = s.h, w = s.w, c = s.c, k = s.k;
        const auto image_dtype = o.images == image_type::float32  ? nb::dtype<float>()
                               : o.images == image_type::uint16 ? nb::dtype<std::uint16_t>()
                                                                : nb::dtype<std::uint8_t>();
        const std::vector<std::size_t> image_shape =
            o.channels_first ? std::vector<std::size_t>{n, c, h, w} : std::vector<std::size_t>{n, h, w, c};
        batch_arrays out;
        out.label_dtype = o.label_dtype == label_type::float32 ? nb::dtype<float>()
                        : o.label_dtype == label_type::uint8   ? nb::dtype<std::uint8_t>()
                        : o.label_dtype == label_type::uint16  ? nb::dtype<std::uint16_t>()
                                                               : nb::dtype<std::int64_t>();
        std::vector<std::size_t> label_shape;
        if (o.label == label_mode::one_hot) {
            label_shape = !s.seg ? std::vector<std::size_t>{n, k}
                        : o.channels_first ? std::vector<std::size_t>{n, k, h, w}
                                           : std::vector<std::size_t>{n, h, w, k};
        } else if (o.label == label_mode::index) {
            label_shape = s.seg ? std::vector<std::size_t>{n, h, w} : std::vector<std::size_t>{n};
        }
        const bool labelled = o.label != label_mode::none;
        try {
            out.images_obj = out_images.is_none() ? new_numpy(image_shape, image_dtype) : nb::borrow(out_images);
            if (labelled)
                out.labels_obj = out_labels.is_none() ? new_numpy(label_shape, out.label_dtype) : nb::borrow(out_labels);
        } catch (const std::bad_alloc&) {
            // A crop larger than a record of a dataset of mixed sizes: say which record.
            if (o.crop_height != 0) check_crop_fits(which, o.crop_height, o.crop_width);
            throw;
        }
        out.images = caller_array(out.images_obj, "images", image_shape, image_dtype);
        if (labelled) out.labels = caller_array(out.labels_obj, "labels", label_shape, out.label_dtype);
        if (!out_boxes.is_none()) {
            out.boxes_obj = nb::borrow(out_boxes);
            out.boxes = caller_array(out.boxes_obj, "boxes", {n, 4}, nb::dtype<std::int64_t>());
        }
        if (labelled && overlap(out.images, out.labels))
            throw argument_error("read_batch: out images and labels overlap in memory; give two separate arrays");
        return out;
    }

    // One sample_buffers for the whole batch, over the output arrays; each part reads its slice.
    // Class ids of a classification batch in a type the reader has no output for (uint8,
    // uint16) are read as int32 into class_ids and narrowed afterwards (narrow_class_ids).
    static shardpack::sample_buffers buffers_of(const read_options& o, const batch_shape& s, batch_arrays& out,
                                                std::vector<std::int32_t>& class_ids) {
        shardpack::sample_buffers all;
        all.channels_first = o.channels_first;
        for (std::size_t ch = 0; ch < s.c && ch < 4 && ch < o.mean.size() && ch < o.stddev.size(); ++ch) {
            all.norm.mean[ch] = o.mean[ch];
            all.norm.stddev[ch] = o.stddev[ch];
        }
        if (o.images == image_type::float32) all.image_f32 = static_cast<float*>(out.images.data());
        else if (o.images == image_type::uint16) all.image_u16 = static_cast<std::uint16_t*>(out.images.data());
        else all.image_u8 = static_cast<std::uint8_t*>(out.images.data());
        std::size_t label_n = 0;
        if (o.label == label_mode::one_hot) {
            label_n = s.seg ? s.h * s.w * s.k : s.k;
            if (out.label_dtype == nb::dtype<float>()) all.label_f32 = static_cast<float*>(out.labels.data());
            else all.label_u8 = static_cast<std::uint8_t*>(out.labels.data());
        } else if (o.label == label_mode::index) {
            label_n = s.seg ? s.h * s.w : 1;
            const bool i64 = out.label_dtype == nb::dtype<std::int64_t>(), u8 = out.label_dtype == nb::dtype<std::uint8_t>();
            if (s.seg && i64) all.label_index_i64 = static_cast<std::int64_t*>(out.labels.data());
            else if (s.seg && u8) all.label_index_u8 = static_cast<std::uint8_t*>(out.labels.data());
            else if (s.seg) all.label_index = static_cast<std::uint16_t*>(out.labels.data());
            else if (i64) all.class_id_i64 = static_cast<std::int64_t*>(out.labels.data());
            else {
                class_ids.resize(s.n);
                all.class_id = class_ids.data();
            }
        }
        all.image_capacity = s.n * s.h * s.w * s.c;
        all.label_capacity = all.label_index_capacity = s.n * label_n;
        if (!o.crop_height) {
            all.batch_height = s.h;
            all.batch_width = s.w;
        }
        return all;
    }

    // Reads the batch in contiguous parts on the process's pool (the calling thread takes one).
    // Called with the GIL released.
    void read_parts(worker_pool& workers, const std::vector<std::size_t>& which, const shardpack::sample_buffers& all,
                    std::size_t threads) const {
        const std::size_t n = which.size(), parts = std::max<std::size_t>(1, std::min(threads, n));
        const shardpack::dataset& ds = ds_;
        const std::function<void(std::size_t)> part = [&](std::size_t p) {
            const std::size_t begin = n * p / parts, end = n * (p + 1) / parts;
            const std::size_t count = end - begin;
            ds.read_batch(which.data() + begin, count, all.slice(begin, count, n), thread_context());
        };
        workers.run(parts, part);
    }

    // The int32 class ids of buffers_of into the uint8 or uint16 labels.
    static void narrow_class_ids(const std::vector<std::int32_t>& class_ids, batch_arrays& out) {
        if (class_ids.empty()) return;
        if (out.label_dtype == nb::dtype<std::uint8_t>())
            std::copy(class_ids.begin(), class_ids.end(), static_cast<std::uint8_t*>(out.labels.data()));
        else
            std::copy(class_ids.begin(), class_ids.end(), static_cast<std::uint16_t*>(out.labels.data()));
    }

    // boxes=: (y, x, hflip, vflip) per sample; without crops or flips each sample is its whole
    // record: (0, 0, 0, 0).
    static void write_boxes(const std::vector<shardpack::crop_box>& applied, any_array& boxes, std::size_t n) {
        std::int64_t* b = static_cast<std::int64_t*>(boxes.data());
        for (std::size_t j = 0; j < n; ++j) {
            const shardpack::crop_box a = applied.empty() ? shardpack::crop_box{} : applied[j];
            b[4 * j] = a.y;
            b[4 * j + 1] = a.x;
            b[4 * j + 2] = a.hflip;
            b[4 * j + 3] = a.vflip;
        }
    }

    // read_batch's indices as positions in [0, len), checked here as they are copied (the one
    // check: shardpack/__init__.py passes int64 arrays on unchecked, and other indices after
    // _checks.indices, which leaves them in range): each in [-len, len), negative ones
    // counting from the end as in NumPy, else shardpack.IndexOutOfRange with the message
    // _checks.indices gives. Called with the GIL held.
    std::vector<std::size_t> checked_indices(const std::int64_t* data, std::size_t n) const {
        const std::int64_t records = static_cast<std::int64_t>(ds_.size());
        std::vector<std::size_t> which(n);
        for (std::size_t j = 0; j < n; ++j) {
            const std::int64_t v = data[j], at = v < 0 ? v + records : v;
            if (at < 0 || at >= records) {
                PyErr_Format(index_error_type, "%U: index %lld is out of range (%lld records)", text(path_).ptr(),
                             static_cast<long long>(v), static_cast<long long>(records));
                throw nb::python_error();
            }
            which[j] = static_cast<std::size_t>(at);
        }
        return which;
    }

    // Throws the reader's "crop ... is larger than record i" for the first record of `which`
    // smaller than the crop (reads each record's header; only on a failed allocation).
    void check_crop_fits(const std::vector<std::size_t>& which, std::size_t crop_height, std::size_t crop_width) const {
        gil_released unlocked;
        shardpack::augmentation a;
        a.height = crop_height;
        a.width = crop_width;
        for (std::size_t j = 0; j < which.size(); ++j) {
            const shardpack::sample s = ds_.read(which[j], thread_context());
            shardpack::plan_augmentation(a, which[j], s.height(), s.width(), j);
        }
    }

    // Whether at(i) points into a mapping (a raw record of a mapped shard), not a copy.
    bool record_is_raw(std::size_t i) const { return ds_.zero_copy(i); }

    // get() of a zstd record of a dataset of one size: decoded straight into a block of fresh
    // output memory (the reader's band frames decompress into the image and a stored one-hot or
    // uint8 index label directly), with no copy through the context's buffer.
    nb::tuple get_fixed(std::size_t k, shardpack::read_context& ctx) const {
        const auto& sc = ds_.schema();
        const std::size_t h = sc.fixed_height, w = sc.fixed_width, c = sc.channels;
        const bool wide = sc.image_value_bytes == 2;
        const std::size_t image_bytes = h * w * c * sc.image_value_bytes, label_at = (image_bytes + 63) / 64 * 64;
        const bool seg = sc.task == shardpack::task::segmentation;
        const bool index = sc.layout == shardpack::label_layout::index, index16 = index && sc.label_value_bytes == 2;
        const std::size_t label_bytes = !seg ? 0 : index16 ? h * w * 2 : index ? h * w : h * w * sc.class_count;
        auto [data, owner] = output_memory(label_at + label_bytes);
        auto* dst = static_cast<std::uint8_t*>(data);
        shardpack::sample_buffers out;
        if (wide) out.image_u16 = reinterpret_cast<std::uint16_t*>(dst);
        else out.image_u8 = dst;
        out.image_capacity = h * w * c;
        if (seg && index16) out.label_index = reinterpret_cast<std::uint16_t*>(dst + label_at);
        else if (seg && index) out.label_index_u8 = dst + label_at;
        else if (seg) out.label_u8 = dst + label_at;
        out.label_capacity = out.label_index_capacity = seg ? label_bytes / (index16 ? 2 : 1) : 0;
        std::int32_t class_id = -1;
        if (!seg) out.class_id = &class_id;
        {
            gil_released unlocked;
            ds_.read_into(k, out, ctx);
        }
        nb::object image = view(dst, {h, w, c}, wide ? nb::dtype<std::uint16_t>() : nb::dtype<std::uint8_t>(), owner, false);
        if (!seg) return nb::make_tuple(image, nb::int_(class_id));
        nb::object label = index16 ? view(dst + label_at, {h, w}, nb::dtype<std::uint16_t>(), owner, false)
                         : index   ? view(dst + label_at, {h, w}, nb::dtype<std::uint8_t>(), owner, false)
                                   : view(dst + label_at, {h, w, std::size_t(sc.class_count)}, nb::dtype<std::uint8_t>(),
                                          owner, false);
        return nb::make_tuple(image, label);
    }

    // (image, label) arrays of a sample: over its own bytes (copy == nullptr; read only for raw
    // records, the memory map), or over `copy`, where its image and, at label_at, its label were copied.
    nb::tuple arrays(const shardpack::sample& smp, const nb::capsule& owner, std::uint8_t* copy, bool read_only,
                     std::size_t label_at = 0) const {
        const auto& sc = ds_.schema();
        const std::size_t h = smp.height(), w = smp.width();
        const void* image_data = copy ? static_cast<const void*>(copy) : image_bytes_of(smp);
        nb::object image = view(image_data, {h, w, sc.channels},
                                sc.image_value_bytes == 2 ? nb::dtype<std::uint16_t>() : nb::dtype<std::uint8_t>(), owner, read_only);
        nb::object label;
        if (sc.task == shardpack::task::classification) {
            label = nb::int_(smp.class_id());
            return nb::make_tuple(image, label);
        }
        const bool index16 = sc.layout == shardpack::label_layout::index && sc.label_value_bytes == 2;
        const void* label_data = copy ? static_cast<const void*>(copy + label_at)
                               : index16 ? static_cast<const void*>(smp.label_index16().data())
                                         : static_cast<const void*>(smp.label().data());
        if (index16)
            label = view(label_data, {h, w}, nb::dtype<std::uint16_t>(), owner, read_only);
        else if (sc.layout == shardpack::label_layout::index)
            label = view(label_data, {h, w}, nb::dtype<std::uint8_t>(), owner, read_only);
        else
            label = view(label_data, {h, w, std::size_t(sc.class_count)}, nb::dtype<std::uint8_t>(), owner, read_only);
        return nb::make_tuple(image, label);
    }

    // A sample's image bytes, uint8 or uint16 (little-endian: the wheels are built for little-endian hosts).
    const void* image_bytes_of(const shardpack::sample& smp) const {
        if (ds_.schema().image_value_bytes == 2) return smp.image16().data();
        return smp.image().data();
    }

    // A view of a sample's bytes: read-only for raw records (the memory map), writable for
    // zstd records (the sample's own buffer).
    static nb::object view(const void* data, std::initializer_list<std::size_t> shape, nb::dlpack::dtype dtype,
                           const nb::capsule& owner, bool read_only) {
        const std::vector<std::size_t> dims(shape);
        if (read_only)
            return nb::ndarray<nb::numpy, nb::ro>(data, dims.size(), dims.data(), owner, nullptr, dtype).cast();
        return nb::ndarray<nb::numpy>(const_cast<void*>(data), dims.size(), dims.data(), owner, nullptr, dtype).cast();
    }
};

// The exception classes: every error is a shardpack.Error; argument errors are also the
// built-in a NumPy user expects. Made here so that errors raised in C++ get them.
void bind_errors(nb::module_& m) {
    const auto new_type = [&m](const char* name, PyObject* bases, const char* doc) {
        // "_shardpack.X", the name stubgen loads the module by; shardpack/__init__.py sets
        // __module__ to "shardpack", which re-exports them.
        const std::string qualified = std::string("_shardpack.") + name;
        PyObject* t = PyErr_NewExceptionWithDoc(qualified.c_str(), doc, bases, nullptr);
        if (!t) throw nb::python_error();
        m.attr(name) = nb::borrow(t);  // the module's reference; `t` stays for the translator
        return t;
    };
    error_type = new_type("Error", PyExc_RuntimeError,
                          "Every error of shardpack: damaged or missing data, I/O, bad arguments.");
    const auto both = [](PyObject* builtin) {
        return nb::make_tuple(nb::handle(error_type), nb::handle(builtin)).release().ptr();
    };
    value_error_type = new_type("ArgumentValueError", both(PyExc_ValueError),
                                "An argument of the right type with a value shardpack cannot use: a shardpack.Error "
                                "and a ValueError.");
    type_error_type = new_type("ArgumentTypeError", both(PyExc_TypeError),
                               "An argument of a type shardpack cannot use: a shardpack.Error and a TypeError.");
    index_error_type = new_type("IndexOutOfRange", both(PyExc_IndexError),
                                "A record index outside [-len(ds), len(ds)): a shardpack.Error and an IndexError.");
    nb::register_exception_translator([](const std::exception_ptr& p, void*) {
        try {
            std::rethrow_exception(p);
        } catch (const argument_type_error& e) {
            set_error(type_error_type, e.what());
        } catch (const argument_error& e) {
            set_error(value_error_type, e.what());
        } catch (const std::invalid_argument& e) {  // include/shardpack/order.hpp's argument checks
            set_error(value_error_type, e.what());
        } catch (const shardpack::error& e) {
            set_error(error_type, e.what());
        }
    });
}

// Module functions: the epoch orders, mixing, and the process's hooks.
void bind_functions(nb::module_& m) {
    static const bool atfork_registered = pthread_atfork(nullptr, nullptr, forget_parents_pool_and_cache) == 0;
    if (!atfork_registered) throw std::runtime_error("_shardpack: pthread_atfork failed");
    m.def("interpreter_exiting", &interpreter_exiting,
          "For atexit only: threads coming back from a read from now on wait for the process's end.");
    m.def("_set_allocation", [](const std::string& how) {
        if (how == "pool") fresh_allocation = allocation::pool;
        else if (how == "huge_pages") fresh_allocation = allocation::huge_pages;
        else if (how == "numpy") fresh_allocation = allocation::numpy;
        else if (how == "plain") fresh_allocation = allocation::plain;
        else throw argument_error("_set_allocation: pool, huge_pages, numpy or plain, not " + how);
    }, "how"_a, "Private (scripts/bench/py_alloc_bench.py): how fresh outputs are allocated.");

    m.def("epoch_order", &epoch_order, "n"_a, "seed"_a, "epoch"_a, "rank"_a, "world"_a, "drop_last"_a, "shuffle"_a,
          "order"_a, "block"_a, "window"_a, "shard_starts"_a,
          nb::sig("def epoch_order(n: int, seed: int, epoch: int, rank: int, world: int, drop_last: bool, "
                  "shuffle: bool, order: str, block: int, window: int, shard_starts: collections.abc.Sequence[int]) "
                  "-> numpy.typing.NDArray[numpy.int64]"),
          "shardpack.epoch_order's orders (include/shardpack/order.hpp), from checked arguments.");
    m.def("order_blocks", &order_blocks, "n"_a, "block"_a, "shard_starts"_a,
          nb::sig("def order_blocks(n: int, block: int, shard_starts: collections.abc.Sequence[int]) "
                  "-> numpy.typing.NDArray[numpy.int64]"));

    m.def("mix_counts", &shardpack::mix_counts, "weights"_a, "epoch_size"_a);
    m.def("mix_full_order", &mix_full_order, "records"_a, "weights"_a, "blocks"_a, "shard_starts"_a, "seed"_a,
          "epoch"_a, "shuffle"_a, "order"_a, "window"_a, "epoch_size"_a, "replacement"_a,
          "shardpack.mix's whole order of an epoch (include/shardpack/mix.hpp), from checked arguments.");
    m.def("resumed_order", &resumed_order, "order"_a, "stages"_a, "rank"_a, "world"_a, "drop_last"_a, "contiguous"_a,
          "A rank's share of the rest of an epoch after changes of world (include/shardpack/mix.hpp).");
}

// Reader.read_batch's and Reader.contact_sheet's options.
void bind_options(nb::module_& m) {
    // read_batch's options (read_options): one object of typed fields, enums where a word was.
    nb::enum_<image_type>(m, "ImageType", "read_batch's dtype: the images' values.")
        .value("uint8", image_type::uint8)
        .value("uint16", image_type::uint16)
        .value("float32", image_type::float32);
    nb::enum_<label_type>(m, "LabelType", "read_batch's label_dtype: the labels' values.")
        .value("float32", label_type::float32)
        .value("uint8", label_type::uint8)
        .value("uint16", label_type::uint16)
        .value("int64", label_type::int64);
    nb::enum_<label_mode>(m, "LabelMode", "read_batch's label: one-hot, index (class ids), or none.")
        .value("onehot", label_mode::one_hot)
        .value("index", label_mode::index)
        .value("none", label_mode::none);
    nb::enum_<shardpack::crop_position>(m, "CropPosition", "read_batch's crop_position (given: read_batch's given_boxes).")
        .value("center", shardpack::crop_position::center)
        .value("random", shardpack::crop_position::random)
        .value("foreground", shardpack::crop_position::foreground)
        .value("given", shardpack::crop_position::given);
    nb::enum_<shardpack::flip_mode>(m, "FlipMode", "read_batch's hflip and vflip (given: read_batch's given_boxes).")
        .value("none", shardpack::flip_mode::none)
        .value("random", shardpack::flip_mode::random)
        .value("given", shardpack::flip_mode::given);
    nb::class_<read_options>(m, "ReadOptions",
                              "Reader.read_batch's options, checked and built by shardpack.Dataset.read_batch.")
        .def("__init__",
             [](read_options* self, image_type images, bool channels_first, std::vector<float> mean,
                std::vector<float> stddev, label_mode label, label_type label_dtype, std::size_t crop_height,
                std::size_t crop_width, shardpack::crop_position crop_position, shardpack::flip_mode hflip,
                float hflip_probability, shardpack::flip_mode vflip, float vflip_probability,
                std::vector<std::uint32_t> background, std::size_t threads) {
                 new (self) read_options{images, channels_first, std::move(mean), std::move(stddev), label,
                                          label_dtype, crop_height, crop_width, crop_position, hflip, vflip,
                                          hflip_probability, vflip_probability, std::move(background), threads};
             },
             nb::kw_only(), "images"_a = image_type::float32, "channels_first"_a = true,
             "mean"_a = std::vector<float>{}, "stddev"_a = std::vector<float>{}, "label"_a = label_mode::one_hot,
             "label_dtype"_a = label_type::float32, "crop_height"_a = 0, "crop_width"_a = 0,
             "crop_position"_a = shardpack::crop_position::center, "hflip"_a = shardpack::flip_mode::none,
             "hflip_probability"_a = 0.0f, "vflip"_a = shardpack::flip_mode::none, "vflip_probability"_a = 0.0f,
             "background"_a = std::vector<std::uint32_t>{0}, "threads"_a = 1)
        .def_rw("images", &read_options::images)
        .def_rw("channels_first", &read_options::channels_first)
        .def_rw("mean", &read_options::mean)
        .def_rw("stddev", &read_options::stddev)
        .def_rw("label", &read_options::label)
        .def_rw("label_dtype", &read_options::label_dtype)
        .def_rw("crop_height", &read_options::crop_height)
        .def_rw("crop_width", &read_options::crop_width)
        .def_rw("crop_position", &read_options::crop_position)
        .def_rw("hflip", &read_options::hflip)
        .def_rw("hflip_probability", &read_options::hflip_probability)
        .def_rw("vflip", &read_options::vflip)
        .def_rw("vflip_probability", &read_options::vflip_probability)
        .def_rw("background", &read_options::background)
        .def_rw("threads", &read_options::threads);
    nb::class_<sheet_options>(m, "SheetOptions",
                              "Reader.contact_sheet's options, checked and built by shardpack.contact_sheet.")
        .def("__init__",
             [](sheet_options* self, std::vector<std::size_t> records, std::size_t count, bool random,
                std::uint64_t sample_seed, std::size_t tile, std::size_t columns, double alpha,
                std::vector<std::uint32_t> hidden, std::string title) {
                 new (self) sheet_options{std::move(records), count, random, sample_seed, tile, columns, alpha,
                                          std::move(hidden), std::move(title)};
             },
             nb::kw_only(), "records"_a = std::vector<std::size_t>{}, "count"_a = 16, "random"_a = false,
             "sample_seed"_a = 0, "tile"_a = 256, "columns"_a = 0, "alpha"_a = 0.5,
             "hidden"_a = std::vector<std::uint32_t>{}, "title"_a = "")
        .def_rw("records", &sheet_options::records)
        .def_rw("count", &sheet_options::count)
        .def_rw("random", &sheet_options::random)
        .def_rw("sample_seed", &sheet_options::sample_seed)
        .def_rw("tile", &sheet_options::tile)
        .def_rw("columns", &sheet_options::columns)
        .def_rw("alpha", &sheet_options::alpha)
        .def_rw("hidden", &sheet_options::hidden)
        .def_rw("title", &sheet_options::title);
}

void bind_reader(nb::module_& m) {
    nb::class_<reader>(m, "Reader", "One open dataset (the index stays in C++); see shardpack.Dataset.")
        .def(nb::init<nb::bytes, bool, const std::string&, std::size_t, std::uint64_t, unsigned>(), "path"_a,
             "verify_checksums"_a = true, "io"_a = "auto", "max_open_shards"_a = 0, "cache_bytes"_a = 0, "io_threads"_a = 0)
        .def_prop_ro("open_shards", &reader::open_shards)
        .def_prop_ro("io", &reader::io)
        .def_prop_ro("preferred_order", &reader::preferred_order)
        .def_prop_ro("cache_bytes", &reader::cache_bytes)
        .def_prop_ro("blocks_layout", &reader::blocks_layout)
        .def_prop_ro("io_note", &reader::io_note)
        .def_prop_ro("io_counters", &reader::io_counters, nb::sig("def io_counters(self) -> dict[str, int]"))
        .def("begin_epoch", &reader::begin_epoch, nb::call_guard<nb::gil_scoped_release>())
        .def("keep_decoded", &reader::keep_decoded)
        .def_prop_ro("decoded_count", &reader::decoded_count)
        .def_prop_ro("decoded_bytes", &reader::decoded_bytes)
        .def_prop_ro("max_open_shards", &reader::max_open_shards)
        .def("__len__", &reader::size)
        .def_prop_ro("path", &reader::path)
        .def_prop_ro("task", &reader::task)
        .def_prop_ro("label_layout", &reader::label_layout)
        .def_prop_ro("classes", &reader::classes, nb::sig("def classes(self) -> list[str]"))
        .def_prop_ro("image_shape", &reader::image_shape,
                     nb::sig("def image_shape(self) -> tuple[int, int, int] | None"))
        .def_prop_ro("channels", &reader::channels)
        .def_prop_ro("image_dtype", &reader::image_dtype)
        .def_prop_ro("channel_order", &reader::channel_order)
        .def_prop_ro("class_count", [](const reader& r) { return r.class_count(); })
        .def_prop_ro("ignore_value", &reader::ignore_value)
        .def_prop_ro("content_hash", &reader::content_hash)
        .def_prop_ro("shard_starts", &reader::shard_starts,
                     nb::sig("def shard_starts(self) -> numpy.typing.NDArray[numpy.int64]"))
        .def_prop_ro("data_bytes", &reader::data_bytes)
        .def("key", &reader::key, "i"_a, "The key of record i, in [0, len).")
        .def("record_size", &reader::record_size, "i"_a, nb::sig("def record_size(self, i: int) -> tuple[int, int]"),
             "(height, width) of record i, in [0, len), from its header alone.")
        .def("get", &reader::get, "i"_a,
             nb::sig("def get(self, i: int) -> tuple[numpy.typing.NDArray[numpy.uint8] | numpy.typing.NDArray[numpy.uint16], "
                     "numpy.typing.NDArray[numpy.uint8] | numpy.typing.NDArray[numpy.uint16] | int]"),
             "(image, label) of record i, in [0, len).")
        .def("prefetch", &reader::prefetch, "indices"_a,
             nb::sig("def prefetch(self, indices: numpy.typing.NDArray[numpy.int64]) -> None"),
             "Starts reading records `indices` (in [0, len)) from storage: a hint.")
        .def("read_batch", &reader::read_batch, "indices"_a, "options"_a, "seed"_a = 0, "epoch"_a = 0,
             "out_images"_a.none() = nb::none(), "out_labels"_a.none() = nb::none(),
             "given_boxes"_a.none() = nb::none(), "out_boxes"_a.none() = nb::none(),
             nb::sig("def read_batch(self, indices: numpy.typing.NDArray[numpy.int64], options: ReadOptions, "
                     "seed: int = 0, epoch: int = 0, out_images: object | None = None, out_labels: object | None = None, "
                     "given_boxes: numpy.typing.NDArray[numpy.int64] | None = None, "
                     "out_boxes: numpy.typing.NDArray[numpy.int64] | None = None) "
                     "-> tuple[typing.Any, typing.Any, numpy.typing.NDArray[numpy.int64] | None]"),
             "The batch, with options checked by shardpack.Dataset.read_batch.")
        // Contact sheets, class colors, foreground crops (issue 33).
        .def_prop_ro("class_colors", &reader::class_colors, nb::sig("def class_colors(self) -> list[tuple[int, int, int]]"))
        .def_prop_ro("foreground_fallbacks", &reader::foreground_fallbacks)
        .def("contact_sheet", &reader::contact_sheet, "options"_a, "augment"_a.none(), "seed"_a, "epoch"_a,
             nb::sig("def contact_sheet(self, options: SheetOptions, augment: ReadOptions | None, seed: int, "
                     "epoch: int) -> tuple[numpy.typing.NDArray[numpy.uint8], list[dict[str, typing.Any]], "
                     "list[dict[str, typing.Any]]]"),
             "shardpack.contact_sheet, from options it checked.")
        .def_prop_ro("fields", [](const reader& r) { return fields_ext::declarations(r.dataset()); },
                     nb::sig("def fields(self) -> list[tuple[str, str, list[str]]]"))
        .def("read_fields",
             [](const reader& r, nb::ndarray<const std::int64_t, nb::ndim<1>, nb::c_contig, nb::device::cpu> indices,
                const std::vector<std::string>& names, nb::object windows, std::size_t crop_height, std::size_t crop_width,
                double min_box_visibility) {
                 return fields_ext::read(r.dataset(), indices, names, windows, crop_height, crop_width, min_box_visibility);
             },
             "indices"_a, "names"_a, "windows"_a.none(), "crop_height"_a, "crop_width"_a, "min_box_visibility"_a,
             nb::sig("def read_fields(self, indices: numpy.typing.NDArray[numpy.int64], names: collections.abc.Sequence[str], "
                     "windows: numpy.typing.NDArray[numpy.int64] | None, crop_height: int, crop_width: int, "
                     "min_box_visibility: float) -> dict[str, typing.Any]"),
             "Fields `names` of records `indices` as columns; boxes follow `windows` (see shardpack.Dataset.fields).");
}

}  // namespace

NB_MODULE(_shardpack, m) {
    m.doc() = "The binding of the shardpack C++ reader; use the shardpack package, not this module.";
    m.attr("version") = SHARDPACK_VERSION;  // CMake's project(VERSION), as pyproject's; shardpack.__version__
    bind_errors(m);
    bind_functions(m);
    bind_options(m);
    bind_reader(m);
}
