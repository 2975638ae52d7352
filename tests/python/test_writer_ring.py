"""shardpack.write's ring (src/pipeline/sample_stream.hpp, "The ring"): large pixel parts go into
a sealed memfd the build maps read-only instead of the pipe. A tiny ring (wrapping round, the
writer waiting for the build's releases) gives the same dataset as the pipe and as the CLI's
build; the build refuses a hostile ring or ring part, naming the sample, and publishes nothing;
a writer killed with kill -9 while its ring is in use publishes nothing; a build that dies
while the writer waits for room in the ring does not leave it hanging."""
import json
import os
import pathlib
import signal
import socket
import struct
import subprocess
import sys
import tempfile
import textwrap
import threading
import time

import fcntl
import numpy as np
import pytest

import shardpack
from shardpack import _writer
from shardpack._cli import cli_path
from conftest import run, tool
from pngread import read_png
from test_writer import assert_same_dataset, children, class_dict, rows_of

pytestmark = pytest.mark.skipif(cli_path() is None or not hasattr(os, "memfd_create"),
                                reason="no CLI binary (a reader-only wheel), or no memfd here")


@pytest.fixture
def ring_spy(monkeypatch):
    """Counts the parts put into the ring and the times the writer had to wait for room."""
    counts = {"parts": 0, "waits": 0}
    put, take = _writer._Ring.put, _writer._Ring._take_releases

    def counted_put(self, data):
        counts["parts"] += 1
        return put(self, data)

    def counted_take(self, block):
        counts["waits"] += block
        return take(self, block)

    monkeypatch.setattr(_writer._Ring, "put", counted_put)
    monkeypatch.setattr(_writer._Ring, "_take_releases", counted_take)
    return counts


def tiny_ring(monkeypatch, size=16384):
    monkeypatch.setattr(_writer, "_RING_BYTES", size)
    monkeypatch.setattr(_writer, "_RING_MIN_PART", 1)


@pytest.mark.parametrize("threads", [1, 2])
def test_tiny_ring_equals_cli_build_and_the_pipe(tmp_path, monkeypatch, ring_spy, threads):
    """12 samples of 40x30 (3,600-byte images and masks) through a 16 KiB ring: parts of at most
    4 KiB, so it wraps round many times and the writer waits for releases; the dataset equals the
    CLI's build of the PNGs, and the pipe's, input digest included."""
    src = tmp_path / "src"
    run(tool("make_sample_data"), "--out", src, "--count", 12, "--width", 40, "--height", 30)
    cli_out = tmp_path / "cli"
    run(tool("shardpack"), "-q", "build", "--csv", src / "list.csv", "--classes", src / "class_dict.csv", "--out", cli_out,
        "--threads", threads)
    rows = rows_of(src / "list.csv")
    samples = [{"key": i, "image": read_png(src / i), "label": read_png(src / m)} for i, m in rows]
    classes = class_dict(src / "class_dict.csv")
    tiny_ring(monkeypatch)
    shardpack.write(tmp_path / "ring", samples, task="seg", classes=classes, threads=threads, quiet=True)
    assert ring_spy["parts"] == 2 * len(rows) and ring_spy["waits"] > 0
    monkeypatch.setattr(_writer, "_RING_BYTES", 0)
    shardpack.write(tmp_path / "pipe", samples, task="seg", classes=classes, threads=threads, quiet=True)
    assert ring_spy["parts"] == 2 * len(rows)  # the pipe took them all
    assert_same_dataset(cli_out, tmp_path / "ring")
    assert_same_dataset(tmp_path / "pipe", tmp_path / "ring")
    digest = lambda d: json.loads((tmp_path / d / "manifest.json").read_text())["input_digest"]
    assert digest("ring") == digest("pipe")


def test_mixed_sizes_ring_and_pipe_agree(tmp_path, monkeypatch, ring_spy):
    """Parts of many sizes, uint8 and uint16, some over a quarter of the ring (the pipe), some
    under the smallest ring part (the pipe), the rest in a 32 KiB ring: the same dataset as all
    on the pipe."""
    rng = np.random.default_rng(7)
    samples = []
    for i in range(40):
        h, w = int(rng.integers(8, 70)), int(rng.integers(8, 70))
        dtype = np.uint16 if i % 3 == 0 else np.uint8
        samples.append((f"s{i}", rng.integers(0, 256 if dtype == np.uint8 else 65536, (h, w, 3)).astype(dtype), i % 3))
    kwargs = dict(task="cls", classes=["a", "b", "c"], size=(32, 32), resize="stretch", depth=16, quiet=True)
    tiny_ring(monkeypatch, 32768)
    monkeypatch.setattr(_writer, "_RING_MIN_PART", 2000)
    shardpack.write(tmp_path / "ring", samples, **kwargs)
    in_ring = sum(1 for _, a, _ in samples if 2000 <= a.nbytes <= 8192)
    assert 0 < in_ring < len(samples) and ring_spy["parts"] == in_ring
    monkeypatch.setattr(_writer, "_RING_BYTES", 0)
    shardpack.write(tmp_path / "pipe", samples, **kwargs)
    assert_same_dataset(tmp_path / "pipe", tmp_path / "ring")


def test_default_ring_takes_large_pixels(tmp_path, ring_spy):
    samples = [(np.full((256, 256, 3), i, np.uint8), i % 2) for i in range(6)] + [(np.zeros((8, 8, 3), np.uint8), 0)]
    shardpack.write(tmp_path / "d", samples, task="cls", classes=["a", "b"], quiet=True)
    assert ring_spy["parts"] == 6  # the 8x8 one went on the pipe
    ds = shardpack.open(tmp_path / "d")
    assert [int(ds[i][0][0, 0, 0]) for i in range(7)] == [0, 1, 2, 3, 4, 5, 0]



def test_the_first_sample_sizes_the_ring(tmp_path, monkeypatch, ring_spy):
    """Four times the first sample's largest pixel part, 4 to 16 MiB: 256x256 RGB parts get 4 MiB
    (a write touches every page of its ring once: a small one costs fewer page faults), 1024x1024
    RGB 16 MiB. A later part over a quarter of the ring goes on the pipe; the data are the same."""
    sizes = []
    ring_init = _writer._Ring.__init__

    def spy(self, size):
        sizes.append(size)
        ring_init(self, size)

    monkeypatch.setattr(_writer._Ring, "__init__", spy)
    small, large = np.full((256, 256, 3), 3, np.uint8), np.full((1024, 1024, 3), 4, np.uint8)
    shardpack.write(tmp_path / "a", [(small, 0), (large, 1), (small, 0)], task="cls", classes=["a", "b"], quiet=True)
    assert sizes == [4 << 20] and ring_spy["parts"] == 2  # 3 MiB is over a quarter of 4 MiB: the pipe
    shardpack.write(tmp_path / "b", [(large, 1), (small, 0)], task="cls", classes=["a", "b"], quiet=True)
    assert sizes == [4 << 20, 16 << 20] and ring_spy["parts"] == 4
    a, b = shardpack.open(tmp_path / "a"), shardpack.open(tmp_path / "b")
    assert np.array_equal(a[1][0], b[0][0]) and np.array_equal(a[0][0], b[1][0]) and int(a[1][0].max()) == 4
    shardpack.write(tmp_path / "c", [(np.zeros((8, 8, 3), np.uint8), 0)], task="cls", classes=["a"], quiet=True)
    assert sizes[-1] == 4 << 20  # no pixel part for the ring in the first sample: the smallest


# --- hostile streams, sent to the CLI by hand ---------------------------------------------------

HEAD = struct.Struct("<BBBBBBBBIIIIiIIIQQII")


def sample_frame(image_kind, image, width=8, height=8, offset=None, image_bytes=None, key=b"k"):
    """A cls sample of a width x height RGB image: on the pipe (image: its bytes), or in the ring
    at offset (image_kind 3)."""
    n = width * height * 3 if image_bytes is None else image_bytes
    head = HEAD.pack(ord("S"), image_kind, 3, 0, 0, 1, 1, 0, width, height, 0, 0, 0, len(key), 1, 0, n, 0, 0, 0)
    return head + key + b"0" + (struct.pack("<Q", offset) if image_kind == 3 else image)


def end_frame(count):
    return HEAD.pack(ord("E"), 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, -1, 0, 0, 0, count, 0, 0, 0)


def memfd(size, seal=True, name="shardpack-ring"):
    fd = os.memfd_create(name, os.MFD_CLOEXEC | os.MFD_ALLOW_SEALING)
    os.ftruncate(fd, size)
    os.pwrite(fd, bytes(range(256)) * (size // 256), 0)
    if seal:
        fcntl.fcntl(fd, fcntl.F_ADD_SEALS, fcntl.F_SEAL_SHRINK | fcntl.F_SEAL_GROW)
    return fd


def build_stream(tmp_path, stream, pass_fds=()):
    """`shardpack build --samples -` of `stream`: (exit status, stderr, whether it published)."""
    names = tmp_path / "names.txt"
    names.write_text("a\n")
    out = tmp_path / "out"
    r = subprocess.run([tool("shardpack"), "build", "--samples", "-", "--task", "cls", "--classes", str(names),
                        "--out", str(out)], input=stream, capture_output=True, pass_fds=pass_fds, timeout=60)
    return r.returncode, r.stderr.decode(), (out / "manifest.json").exists()


def v3(ring_fd, ack_fd, ring_bytes, total=1):
    return struct.pack("<8sQiiQ", b"SPSAMPv3", total, ring_fd, ack_fd, ring_bytes)


def test_ring_stream_by_hand_packs_and_v2_still_reads(tmp_path):
    ring = memfd(65536)
    mine, theirs = socket.socketpair()
    try:
        pixels = os.pread(ring, 192, 1000)
        rc, err, published = build_stream(tmp_path, v3(ring, theirs.fileno(), 65536) + sample_frame(3, None, offset=1000) +
                                          end_frame(1), (ring, theirs.fileno()))
        assert rc == 0 and published, err
        assert shardpack.open(tmp_path / "out")[0][0].tobytes() == pixels
        # The stream of the previous writer (v2, no ring) is still read.
        rc, err, published = build_stream(tmp_path, b"SPSAMPv2" + struct.pack("<Q", 1) + sample_frame(2, pixels) +
                                          end_frame(1))
        assert rc == 0 and published, err
        assert shardpack.open(tmp_path / "out")[0][0].tobytes() == pixels
    finally:
        os.close(ring)
        mine.close()
        theirs.close()



def test_a_stream_cut_short_names_the_sample_by_its_index(tmp_path):
    """Cut inside a sample's image, inside its key, after its last byte: the message names the
    sample as the writer numbers them (from 0), and nothing is published."""
    pixels = bytes(range(192))
    one, two = sample_frame(2, pixels, key=b"first"), sample_frame(2, pixels, key=b"second")
    v2 = b"SPSAMPv2" + struct.pack("<Q", 2)
    for stream, message in [(v2 + one[:100], "inside the image of sample 0"),
                            (v2 + one + two[:66], "inside the key of sample 1"),
                            (v2 + one + two, "ended after 2 samples without its end mark")]:
        rc, err, published = build_stream(tmp_path, stream)
        assert rc == 1 and not published and message in err, err

HOSTILE = [
    # (what, ring size as announced, ring size made, sealed, frames after a good sample, message)
    ("past the end", 65536, 65536, True, [sample_frame(3, None, offset=65536 - 100)],
     "standard input: sample 1: the image's ring part at 65436 (192 bytes) lies outside the ring of 65536 bytes"),
    ("offset beyond", 65536, 65536, True, [sample_frame(3, None, offset=2**64 - 8)],
     f"sample 1: the image's ring part at {2**64 - 8} (192 bytes) lies outside the ring of 65536 bytes"),
    ("bytes beyond", 65536, 65536, True, [sample_frame(3, None, offset=8, image_bytes=2**64 - 4)],
     "sample 1: the image's ring part at 8"),
    ("wrong size", 65536, 4096, True, [], "the sample stream's ring (descriptor {ring}): it holds 4096 bytes, the header says 65536"),
    ("not sealed", 65536, 65536, False, [], "not sealed against shrinking"),
    ("too small", 100, 100, True, [], "100 bytes, outside 4096.."),
]


@pytest.mark.parametrize("case", range(len(HOSTILE)))
def test_hostile_ring_refused(tmp_path, case):
    what, announced, made, sealed, frames, message = HOSTILE[case]
    ring = memfd(made, sealed)
    mine, theirs = socket.socketpair()
    try:
        good = sample_frame(3, None, offset=0)
        stream = v3(ring, theirs.fileno(), announced, 2) + good + b"".join(frames) + end_frame(1 + len(frames))
        rc, err, published = build_stream(tmp_path, stream, (ring, theirs.fileno()))
        assert rc == 1 and message.format(ring=ring) in err, (what, err)
        assert not published, what
    finally:
        os.close(ring)
        mine.close()
        theirs.close()


def test_ring_descriptors_checked(tmp_path):
    """A ring that is not a memfd, descriptors that are not open or are the standard streams, an
    acknowledgement channel that is not a stream socket, a ring part without a ring."""
    ring = memfd(65536)
    mine, theirs = socket.socketpair()
    r, w = os.pipe()
    with tempfile.TemporaryFile(dir=tmp_path) as regular:
        regular.truncate(65536)
        plain = regular.fileno()
        try:
            frame = sample_frame(3, None, offset=0) + end_frame(1)
            cases = [
                (v3(plain, theirs.fileno(), 65536), (plain, theirs.fileno()), f"(descriptor {plain}): not a memfd ("),
                (v3(1000, theirs.fileno(), 65536), (theirs.fileno(),), "(descriptor 1000): not an open descriptor"),
                (v3(1, theirs.fileno(), 65536), (theirs.fileno(),), "(descriptor 1): a standard stream, not a descriptor the writer passed"),
                (v3(ring, ring, 65536), (ring,), "the same descriptor as its acknowledgements"),
                (v3(ring, w, 65536), (ring, w), f"acknowledgement socket (descriptor {w}): not a stream socket"),
                (v3(ring, 2, 65536), (ring,), "acknowledgement socket (descriptor 2): a standard stream"),
                (v3(-1, -1, 0), (), "standard input: sample 0: the image is in the ring, but the stream has none"),
            ]
            for stream, fds, message in cases:
                rc, err, published = build_stream(tmp_path, stream + frame, fds)
                assert rc == 1 and message in err, (message, err)
                assert not published
        finally:
            for fd in (ring, r, w):
                os.close(fd)
            mine.close()
            theirs.close()


def test_ring_part_of_the_wrong_shape_is_the_samples_error(tmp_path):
    """The part's bytes do not make its shape: the sample's error (nothing copied), under
    --on-error like any bad sample."""
    ring = memfd(65536)
    mine, theirs = socket.socketpair()
    try:
        stream = v3(ring, theirs.fileno(), 65536) + sample_frame(3, None, offset=0, image_bytes=191) + end_frame(1)
        rc, err, published = build_stream(tmp_path, stream, (ring, theirs.fileno()))
        assert rc == 1 and "191 bytes do not make 8x8x3 uint8" in err and not published, err
    finally:
        os.close(ring)
        mine.close()
        theirs.close()


# --- processes that die -------------------------------------------------------------------------

KILLED_RING_WRITER = textwrap.dedent("""
    import sys, time, numpy as np, shardpack
    from shardpack import _writer
    _writer._RING_BYTES = 1 << 20
    def samples():
        for i in range(1000000):
            if i == 50:
                print("half", flush=True)
            if i >= 50:
                time.sleep(0.01)
            yield np.full((160, 160, 3), i % 251, np.uint8), i % 2  # 75 KiB: in the ring
    shardpack.write(sys.argv[1], samples(), task="cls", classes=["a", "b"], shard_size=65536, quiet=True)
""")


def test_kill_9_mid_write_with_the_ring_leaves_previous_dataset(tmp_path):
    out = tmp_path / "d"
    shardpack.write(out, [(np.full((8, 8, 3), 7, np.uint8), 1)] * 5, task="cls", classes=["a", "b"], quiet=True)
    published = lambda: {f.name: f.read_bytes() for f in out.iterdir() if f.is_file() and f.name != ".shardpack.lock"}
    before = published()
    script = tmp_path / "w.py"
    script.write_text(KILLED_RING_WRITER)
    p = subprocess.Popen([sys.executable, str(script), str(out)], stdout=subprocess.PIPE, text=True)
    assert p.stdout.readline().strip() == "half"
    time.sleep(0.3)
    build = children(p.pid)
    assert build, "the writer's build process"
    assert "/memfd:shardpack-ring" in pathlib.Path(f"/proc/{build[0]}/maps").read_text(), "the build maps the ring"
    os.kill(p.pid, signal.SIGKILL)
    p.wait()
    deadline = time.time() + 30
    while any(pathlib.Path(f"/proc/{c}").exists() for c in build) and time.time() < deadline:
        time.sleep(0.05)
    assert not any(pathlib.Path(f"/proc/{c}").exists() for c in build), "the build outlived its writer"
    assert published() == before
    assert len(shardpack.open(out)) == 5
    run(tool("shardpack"), "verify", out)


def test_build_killed_while_the_writer_waits_for_room(tmp_path, monkeypatch, ring_spy):
    """The build dies (kill -9) while the writer has filled a tiny ring: the writer raises
    shardpack.Error instead of waiting for a release that will not come."""
    tiny_ring(monkeypatch, 65536)
    me = os.getpid()

    def samples():
        for i in range(100000):
            if i == 30:  # the build is a child of the thread that runs write (this one)
                for c in pathlib.Path(f"/proc/{me}/task/{threading.get_native_id()}/children").read_text().split():
                    os.kill(int(c), signal.SIGKILL)
            yield np.full((64, 64, 3), i % 251, np.uint8), 0  # 12 KiB: five fill the ring

    done = []

    def write():
        try:
            shardpack.write(tmp_path / "d", samples(), task="cls", classes=["a"], quiet=True)
        except shardpack.Error as e:
            done.append(e)

    t = threading.Thread(target=write, daemon=True)
    t.start()
    t.join(60)
    assert not t.is_alive(), "the writer hangs after its build died"
    assert done and ring_spy["parts"] >= 5
    assert not (tmp_path / "d" / "manifest.json").exists()
