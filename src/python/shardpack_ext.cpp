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
// from call to call. After fork() the child does not have the parent's threads: the pool notices
// the new process id and starts a fresh one (the old one is left alone: its mutexes may have
// been held at the fork).
#include <nanobind/nanobind.h>
#include <nanobind/ndarray.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/vector.h>

#include <unistd.h>

#include <condition_variable>
#include <deque>
#include <exception>
#include <functional>
#include <mutex>
#include <thread>

#include "shardpack/order.hpp"
#include "shardpack/reader.hpp"

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

// The process's pool; called with the GIL held, which serialises it. A forked child gets a new
// pool (its copy of the parent's has no threads, and possibly a mutex locked by one of them).
worker_pool& pool() {
    static worker_pool* current = nullptr;
    static pid_t owner = 0;
    if (!current || owner != getpid()) {
        current = new worker_pool;  // the previous one is deliberately leaked (see above)
        owner = getpid();
    }
    return *current;
}

shardpack::read_context& thread_context() {
    thread_local shardpack::read_context ctx;
    return ctx;
}

enum class label_mode { one_hot, index, none };

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
    return "another dtype";
}

// An output array from the caller (NumPy, anything with the buffer protocol or DLPack), used in
// place: it must be a writable, C-contiguous CPU array of exactly this shape and dtype. Never
// converted or copied (that would fill a temporary instead of the caller's array).
any_array caller_array(nb::handle obj, const char* what, const std::vector<std::size_t>& shape,
                       nb::dlpack::dtype dtype) {
    any_array a;
    if (!nb::try_cast(obj, a, false))
        throw shardpack::error(std::string("read_batch: out ") + what +
                               " must be a writable, C-contiguous CPU array (NumPy, buffer protocol or DLPack)");
    if (a.device_type() != nb::device::cpu::value && a.device_type() != nb::device::cuda_host::value)
        throw shardpack::error(std::string("read_batch: out ") + what + " is not in CPU memory (DLPack device type " +
                               std::to_string(a.device_type()) + "); pinned CPU memory is fine");
    std::vector<std::size_t> got(a.ndim());
    for (std::size_t d = 0; d < a.ndim(); ++d) got[d] = a.shape(d);
    if (got != shape || a.dtype() != dtype)
        throw shardpack::error(std::string("read_batch: out ") + what + " is " + dtype_name(a.dtype()) + " " +
                               shape_string(got) + ", this batch needs " + dtype_name(dtype) + " " +
                               shape_string(shape));
    return a;
}

nb::object new_numpy(const std::vector<std::size_t>& shape, nb::dlpack::dtype dtype) {
    std::size_t n = 1;
    for (auto d : shape) n *= d;
    const std::size_t bytes = n * dtype.bits / 8;
    void* data = ::operator new(bytes == 0 ? 1 : bytes);
    nb::capsule owner(data, [](void* p) noexcept { ::operator delete(p); });
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
        nb::gil_scoped_release unlocked;
        order = shardpack::epoch_order(n, seed, epoch, rank, world, drop_last, o);
    }
    return index_array(std::move(order));
}

nb::object order_blocks(std::uint64_t n, std::size_t block, const std::vector<std::uint64_t>& shard_starts) {
    return index_array(shardpack::order_blocks(n, block, shard_starts));
}

class reader {
public:
    reader(const std::string& path, bool verify_checksums) : path_(path) {
        shardpack::open_options o;
        o.verify_checksums = verify_checksums;
        nb::gil_scoped_release unlocked;
        ds_ = shardpack::dataset::open(path, o);
        std::size_t first = 0;
        for (std::size_t k = 0; k < ds_.shard_count(); ++k) {
            first_record_.push_back(first);
            first += ds_.shard(k).record_count();
        }
    }

    std::size_t size() const { return ds_.size(); }
    const std::string& path() const { return path_; }
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
    std::vector<std::string> classes() const {
        std::vector<std::string> names;
        for (const auto& c : ds_.classes()) names.push_back(c.name);
        return names;
    }
    nb::object image_shape() const {
        const auto& s = ds_.schema();
        if (s.fixed_height == 0) return nb::none();
        return nb::make_tuple(s.fixed_height, s.fixed_width, s.channels);
    }
    std::size_t channels() const { return ds_.schema().channels; }
    std::size_t ignore_value() const { return ds_.schema().ignore_value; }
    std::string content_hash() const { return ds_.content_hash(); }
    // The first record of each shard that holds any (for the blocks order: blocks never span two).
    nb::object shard_starts() const { return index_array(shardpack::shard_starts_of(ds_)); }
    // The bytes of all shards (the dataset's size on disk, without manifest.json).
    std::uint64_t data_bytes() const {
        std::uint64_t bytes = 0;
        for (std::size_t k = 0; k < ds_.shard_count(); ++k) bytes += ds_.shard(k).size();
        return bytes;
    }

    std::size_t checked(std::int64_t i) const {
        const auto n = static_cast<std::int64_t>(ds_.size());
        if (i < -n || i >= n)
            throw shardpack::error(path_ + ": index " + std::to_string(i) + " is out of range (" + std::to_string(n) +
                                   " records)");
        return static_cast<std::size_t>(i < 0 ? i + n : i);
    }

    std::string key(std::int64_t i) const {
        const std::size_t k = checked(i);
        nb::gil_scoped_release unlocked;
        return std::string(ds_.read(k, thread_context()).key());
    }

    // (image, label) of record i: arrays over the sample's bytes, owned by a capsule holding it.
    nb::tuple get(std::int64_t i) const {
        const std::size_t k = checked(i);
        auto* s = new shardpack::sample;
        nb::capsule owner(s, [](void* p) noexcept { delete static_cast<shardpack::sample*>(p); });
        {
            nb::gil_scoped_release unlocked;
            *s = ds_.at(k);
        }
        const shardpack::sample& smp = *s;
        const bool raw = record_is_raw(k);
        const auto img = smp.image();
        nb::object image = view(img.data(), {img.shape()[0], img.shape()[1], img.shape()[2]}, nb::dtype<std::uint8_t>(),
                                owner, raw);
        const auto& sc = ds_.schema();
        nb::object label;
        if (sc.task == shardpack::task::classification) {
            label = nb::int_(smp.class_id());
        } else if (sc.layout == shardpack::label_layout::index && sc.label_value_bytes == 2) {
            const auto lab = smp.label_index16();
            label = view(lab.data(), {lab.shape()[0], lab.shape()[1]}, nb::dtype<std::uint16_t>(), owner, raw);
        } else if (sc.layout == shardpack::label_layout::index) {
            const auto lab = smp.label();
            label = view(lab.data(), {lab.shape()[0], lab.shape()[1]}, nb::dtype<std::uint8_t>(), owner, raw);
        } else {
            const auto lab = smp.label();
            label = view(lab.data(), {lab.shape()[0], lab.shape()[1], lab.shape()[2]}, nb::dtype<std::uint8_t>(),
                         owner, raw);
        }
        return nb::make_tuple(image, label);
    }

    // The batch's arrays: returns (images, labels), the caller's when given.
    nb::tuple read_batch(nb::ndarray<const std::int64_t, nb::ndim<1>, nb::c_contig, nb::device::cpu> indices,
                         bool as_float, bool channels_first, std::vector<float> mean, std::vector<float> stddev,
                         const std::string& label, nb::object out_images, nb::object out_labels,
                         std::size_t threads, std::size_t crop_height, std::size_t crop_width,
                         const std::string& crop_position, const std::string& hflip, float hflip_probability,
                         const std::string& vflip, float vflip_probability, nb::object given_boxes,
                         std::uint64_t seed, std::uint64_t epoch, nb::object out_boxes) {
        const auto& sc = ds_.schema();
        const std::size_t n = indices.shape(0);

        // Crops and flips: the output is crop_height x crop_width (0 x 0: the record's size).
        shardpack::augmentation aug;
        aug.height = crop_height;
        aug.width = crop_width;
        aug.seed = seed;
        aug.epoch = epoch;
        aug.hflip_probability = hflip_probability;
        aug.vflip_probability = vflip_probability;
        if (crop_position == "center") aug.position = shardpack::crop_position::center;
        else if (crop_position == "random") aug.position = shardpack::crop_position::random;
        else if (crop_position == "given") aug.position = shardpack::crop_position::given;
        else throw shardpack::error("read_batch: crop_position must be \"center\", \"random\" or boxes, not \"" +
                                    crop_position + "\"");
        const auto flip_mode = [](const std::string& m, const char* what) {
            if (m == "none") return shardpack::flip_mode::none;
            if (m == "random") return shardpack::flip_mode::random;
            if (m == "given") return shardpack::flip_mode::given;
            throw shardpack::error(std::string("read_batch: ") + what + " must be a probability or booleans");
        };
        aug.hflip = flip_mode(hflip, "hflip");
        aug.vflip = flip_mode(vflip, "vflip");
        if ((crop_height == 0) != (crop_width == 0))
            throw shardpack::error("read_batch: crop needs both a height and a width of at least 1");
        if (crop_height == 0 && aug.position == shardpack::crop_position::given)
            throw shardpack::error("read_batch: crop boxes need a crop size");
        const bool augmented = crop_height != 0 || aug.hflip != shardpack::flip_mode::none ||
                               aug.vflip != shardpack::flip_mode::none;
        // Given boxes and flips: int64 (N, 4) of y, x, hflip, vflip, checked here.
        std::vector<shardpack::crop_box> given;
        if (!given_boxes.is_none()) {
            const auto g = nb::cast<nb::ndarray<const std::int64_t, nb::ndim<2>, nb::c_contig, nb::device::cpu>>(
                given_boxes);
            if (g.shape(0) != n || g.shape(1) != 4)
                throw shardpack::error("read_batch: given boxes must be of shape (" + std::to_string(n) + ", 4)");
            given.resize(n);
            for (std::size_t j = 0; j < n; ++j) {
                const std::int64_t* row = g.data() + 4 * j;
                if (row[0] < 0 || row[1] < 0 || row[0] > 65535 || row[1] > 65535)
                    throw shardpack::error("read_batch: crop box " + std::to_string(j) + " at (y " + std::to_string(row[0]) +
                                           ", x " + std::to_string(row[1]) + ") is outside any record");
                given[j].y = std::uint32_t(row[0]);
                given[j].x = std::uint32_t(row[1]);
                given[j].hflip = row[2] != 0;
                given[j].vflip = row[3] != 0;
            }
        }
        if ((aug.position == shardpack::crop_position::given || aug.hflip == shardpack::flip_mode::given ||
             aug.vflip == shardpack::flip_mode::given) && given.size() != n)
            throw shardpack::error("read_batch: given boxes or flips need one row per sample");

        if (crop_height == 0 && sc.fixed_height == 0)
            throw shardpack::error(path_ + ": read_batch needs a dataset with a fixed image size (built with --size) "
                                           "or a crop size");
        const std::size_t h = crop_height ? crop_height : sc.fixed_height, w = crop_width ? crop_width : sc.fixed_width;
        const std::size_t c = sc.channels, k = sc.class_count;
        const bool seg = sc.task == shardpack::task::segmentation;

        // Indices: checked (and negative ones wrapped) before anything is written.
        std::vector<std::size_t> which(n);
        for (std::size_t j = 0; j < n; ++j) which[j] = checked(indices.data()[j]);

        label_mode mode;
        if (label == "onehot") mode = label_mode::one_hot;
        else if (label == "index") mode = label_mode::index;
        else if (label == "stored")
            mode = seg && sc.layout == shardpack::label_layout::one_hot ? label_mode::one_hot : label_mode::index;
        else if (label == "none") mode = label_mode::none;
        else throw shardpack::error("read_batch: label must be \"onehot\", \"index\" or \"stored\", not \"" + label + "\"");

        const auto image_dtype = as_float ? nb::dtype<float>() : nb::dtype<std::uint8_t>();
        const std::vector<std::size_t> image_shape =
            channels_first ? std::vector<std::size_t>{n, c, h, w} : std::vector<std::size_t>{n, h, w, c};
        std::vector<std::size_t> label_shape;
        nb::dlpack::dtype label_dtype = nb::dtype<std::int64_t>();
        if (mode == label_mode::one_hot) {
            label_dtype = image_dtype;
            label_shape = !seg ? std::vector<std::size_t>{n, k}
                        : channels_first ? std::vector<std::size_t>{n, k, h, w}
                                         : std::vector<std::size_t>{n, h, w, k};
        } else if (mode == label_mode::index) {
            label_shape = seg ? std::vector<std::size_t>{n, h, w} : std::vector<std::size_t>{n};
        }

        if (mean.size() != c || stddev.size() != c)
            throw shardpack::error("read_batch: normalize needs " + std::to_string(c) + " means and standard deviations");
        shardpack::normalization norm;
        for (std::size_t ch = 0; ch < c; ++ch) {
            if (!(stddev[ch] != 0.0f)) throw shardpack::error("read_batch: a standard deviation of normalize is 0");
            norm.mean[ch] = mean[ch];
            norm.stddev[ch] = stddev[ch];
        }

        nb::object images_obj = out_images.is_none() ? new_numpy(image_shape, image_dtype) : nb::borrow(out_images);
        nb::object labels_obj = mode == label_mode::none ? nb::none()
                              : out_labels.is_none() ? new_numpy(label_shape, label_dtype)
                                                     : nb::borrow(out_labels);
        any_array images = caller_array(images_obj, "images", image_shape, image_dtype);
        any_array labels;
        if (mode != label_mode::none) labels = caller_array(labels_obj, "labels", label_shape, label_dtype);
        nb::object boxes_obj = nb::none();
        any_array boxes;
        if (!out_boxes.is_none()) {
            boxes_obj = nb::borrow(out_boxes);
            boxes = caller_array(boxes_obj, "boxes", {n, 4}, nb::dtype<std::int64_t>());
        }
        std::vector<shardpack::crop_box> applied(augmented && !boxes_obj.is_none() ? n : 0);

        // One sample_buffers for the whole batch; each part offsets its pointers.
        shardpack::sample_buffers all;
        all.channels_first = channels_first;
        all.norm = norm;
        const std::size_t image_n = h * w * c;
        std::size_t label_n = 0;
        if (as_float) all.image_f32 = static_cast<float*>(images.data());
        else all.image_u8 = static_cast<std::uint8_t*>(images.data());
        if (mode == label_mode::one_hot) {
            label_n = seg ? h * w * k : k;
            if (as_float) all.label_f32 = static_cast<float*>(labels.data());
            else all.label_u8 = static_cast<std::uint8_t*>(labels.data());
        } else if (mode == label_mode::index) {
            label_n = seg ? h * w : 1;
            if (seg) all.label_index_i64 = static_cast<std::int64_t*>(labels.data());
            else all.class_id_i64 = static_cast<std::int64_t*>(labels.data());
        }

        const std::size_t hw = std::thread::hardware_concurrency();
        std::size_t parts = threads == 0 ? (hw == 0 ? 1 : hw) : threads;
        parts = std::max<std::size_t>(1, std::min(parts, n));
        worker_pool& workers = pool();
        const shardpack::dataset& ds = ds_;
        const std::function<void(std::size_t)> part = [&](std::size_t p) {
            const std::size_t begin = n * p / parts, end = n * (p + 1) / parts;
            const std::size_t count = end - begin;
            shardpack::sample_buffers out = all;
            out.image_capacity = count * image_n;
            if (out.image_f32) out.image_f32 += begin * image_n;
            if (out.image_u8) out.image_u8 += begin * image_n;
            out.label_capacity = out.label_index_capacity = count * label_n;
            if (out.label_f32) out.label_f32 += begin * label_n;
            if (out.label_u8) out.label_u8 += begin * label_n;
            if (out.label_index_i64) out.label_index_i64 += begin * label_n;
            if (out.class_id_i64) out.class_id_i64 += begin;
            // Given boxes and the applied ones are per slot of this part's batch.
            shardpack::augmentation part_aug = aug;
            if (augmented) {
                if (!given.empty()) part_aug.given = given.data() + begin;
                out.augment = &part_aug;
                if (!applied.empty()) out.applied = applied.data() + begin;
            }
            ds.read_batch(which.data() + begin, count, out, thread_context());
        };
        {
            nb::gil_scoped_release unlocked;
            workers.run(parts, part);
            if (!boxes_obj.is_none()) {
                // Without crops or flips each sample is its whole record: (0, 0, 0, 0).
                std::int64_t* b = static_cast<std::int64_t*>(boxes.data());
                for (std::size_t j = 0; j < n; ++j) {
                    const shardpack::crop_box a = applied.empty() ? shardpack::crop_box{} : applied[j];
                    b[4 * j] = a.y;
                    b[4 * j + 1] = a.x;
                    b[4 * j + 2] = a.hflip;
                    b[4 * j + 3] = a.vflip;
                }
            }
        }
        return nb::make_tuple(images_obj, labels_obj, boxes_obj);
    }

private:
    shardpack::dataset ds_;
    std::string path_;

    std::vector<std::size_t> first_record_;  // per shard, for record_is_raw

    bool record_is_raw(std::size_t i) const {
        const auto shard = static_cast<std::size_t>(
            std::upper_bound(first_record_.begin(), first_record_.end(), i) - first_record_.begin() - 1);
        return ds_.shard(shard).entry(i - first_record_[shard]).codec == shardpack::detail::codec_raw;
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

}  // namespace

NB_MODULE(_shardpack, m) {
    m.doc() = "The binding of the shardpack C++ reader; use the shardpack package, not this module.";
    nb::exception<shardpack::error>(m, "Error", PyExc_RuntimeError);

    m.def("epoch_order", &epoch_order, "n"_a, "seed"_a, "epoch"_a, "rank"_a, "world"_a, "drop_last"_a, "shuffle"_a,
          "order"_a, "block"_a, "window"_a, "shard_starts"_a);
    m.def("order_blocks", &order_blocks, "n"_a, "block"_a, "shard_starts"_a);

    nb::class_<reader>(m, "Reader")
        .def(nb::init<const std::string&, bool>(), "path"_a, "verify_checksums"_a = true)
        .def("__len__", &reader::size)
        .def_prop_ro("path", &reader::path)
        .def_prop_ro("task", &reader::task)
        .def_prop_ro("label_layout", &reader::label_layout)
        .def_prop_ro("classes", &reader::classes)
        .def_prop_ro("image_shape", &reader::image_shape)
        .def_prop_ro("channels", &reader::channels)
        .def_prop_ro("ignore_value", &reader::ignore_value)
        .def_prop_ro("content_hash", &reader::content_hash)
        .def_prop_ro("shard_starts", &reader::shard_starts)
        .def_prop_ro("data_bytes", &reader::data_bytes)
        .def("key", &reader::key, "i"_a)
        .def("get", &reader::get, "i"_a)
        .def("read_batch", &reader::read_batch, "indices"_a, "as_float"_a, "channels_first"_a, "mean"_a, "stddev"_a,
             "label"_a, "out_images"_a.none(), "out_labels"_a.none(), "threads"_a, "crop_height"_a = 0,
             "crop_width"_a = 0, "crop_position"_a = "center", "hflip"_a = "none", "hflip_probability"_a = 0.5f,
             "vflip"_a = "none", "vflip_probability"_a = 0.5f, "given_boxes"_a.none() = nb::none(), "seed"_a = 0,
             "epoch"_a = 0, "out_boxes"_a.none() = nb::none());
}
