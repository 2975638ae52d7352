"""shardpack.mix (weighted mixing of datasets, include/shardpack/mix.hpp) and resuming an epoch on
another number of ranks: per-epoch counts of a 0.6/0.3/0.1 mix, equal on 4 ranks, exact resume;
a 4 -> 2 -> 3 change of world mid-epoch reading every remaining sample once (global, blocks and
mixed orders, through the torch Sampler and Loader); classes matched by name (labels renumbered
exactly, conflicts refused); datasets of different image sizes read with a crop, refused
without; the mix through read_batch and the torch Dataset/DataLoader (Keras, tf.data and
Grain: test_mix_keras_tf.py, run in .venv-tf). A few seconds."""
import collections
import pathlib

import numpy as np
import pytest

import shardpack
from conftest import run, tool


@pytest.fixture(scope="module")
def sets(built, tmp_path_factory):
    """Datasets to mix: segmentation with the classes in another order and with one class more;
    classification with a subset of the classes and at another image size."""
    root = tmp_path_factory.mktemp("mix")
    seg = pathlib.Path(built.root) / "src-seg"
    rows = (seg / "class_dict.csv").read_text().splitlines()
    reversed_dict = root / "class_dict_reversed.csv"
    reversed_dict.write_text("\n".join([rows[0]] + rows[1:][::-1]) + "\n")
    extra_dict = root / "class_dict_extra.csv"
    extra_dict.write_text("\n".join(rows + ["zzz_extra,1,2,3,a colour no mask has"]) + "\n")
    out = {}
    for name, classes in (("seg-reversed", reversed_dict), ("seg-extra", extra_dict)):
        out[name] = str(root / name)
        run(tool("shardpack"), "-q", "build", "--csv", seg / "list.csv", "--classes", classes, "--size", "32x24",
            "--label-layout", "index", "--out", out[name])
    cls = pathlib.Path(built.root) / "src-cls"
    lines = (cls / "list.csv").read_text().splitlines()
    names = sorted({line.rsplit(",", 1)[1] for line in lines[1:]})
    subset = root / "cls-subset.csv"
    subset.write_text("\n".join([lines[0]] + [r for r in lines[1:] if r.rsplit(",", 1)[1] != names[0]]) + "\n")
    out["cls-subset"] = str(root / "cls-subset")
    run(tool("shardpack"), "-q", "build", "--csv", subset, "--root", cls, "--size", "24x20", "--out", out["cls-subset"])
    out["cls-small"] = str(root / "cls-small")
    run(tool("shardpack"), "-q", "build", "--csv", cls / "list.csv", "--size", "20x16", "--out", out["cls-small"])
    out.update({k: built[k] for k in ("onehot", "index", "raw", "cls", "cls-raw")})
    return out


def counts_of(m, order):
    part, _ = m.locate(order)
    return np.bincount(part, minlength=len(m.datasets)).tolist()


def test_a_06_03_01_mix_gives_its_counts_equal_on_4_ranks(sets):
    m = shardpack.mix([sets["onehot"], sets["index"], sets["raw"]], weights=[0.6, 0.3, 0.1], epoch_size=1000)
    assert m.counts == [600, 300, 100] and len(m) == 30 and m.epoch_size == 1000
    for order in ("global", "blocks"):
        for epoch in range(3):
            full = m.full_order(5, epoch, order=order)
            assert counts_of(m, full) == [600, 300, 100]
            shares = [shardpack.epoch_order(m, 5, epoch, rank=r, world=4, order=order) for r in range(4)]
            assert [len(s) for s in shares] == [250] * 4
            assert sorted(np.concatenate(shares).tolist()) == sorted(full.tolist())
    # Not a multiple: 1001 samples, 4 ranks of 251 (padded from the start) or 250 (dropped).
    m = shardpack.mix([sets["onehot"], sets["index"], sets["raw"]], weights=[0.6, 0.3, 0.1], epoch_size=1001)
    assert m.counts == [601, 300, 100]  # 600.6, 300.3, 100.1: the largest remainder gets the one left
    assert {len(shardpack.epoch_order(m, 0, 0, rank=r, world=4)) for r in range(4)} == {251}
    assert {len(shardpack.epoch_order(m, 0, 0, rank=r, world=4, drop_last=True)) for r in range(4)} == {250}
    # Any weights: the counts sum to the epoch and each is within 1 of its exact share.
    rng = np.random.default_rng(0)
    for _ in range(200):
        w = rng.random(3) * 10
        size = int(rng.integers(0, 5000))
        c = shardpack.mix([sets["onehot"], sets["index"], sets["raw"]], weights=w.tolist(), epoch_size=size).counts
        assert sum(c) == size and np.all(np.abs(np.array(c) - size * w / w.sum()) < 1)


def test_the_mixed_order_is_that_of_the_cpp_header(sets):
    # A pure function of (seed, epoch, rank, world), the same as tests/test_mix.cpp computes.
    m = shardpack.mix([sets["onehot"], sets["index"], sets["raw"]], weights=[0.6, 0.3, 0.1], epoch_size=20)
    a = m.full_order(3, 1)
    assert a.tolist() == [9, 14, 3, 5, 10, 7, 8, 16, 2, 1, 17, 4, 11, 3, 9, 27, 23, 13, 4, 8]  # test_mix.cpp's
    assert np.array_equal(a, m.full_order(3, 1)) and not np.array_equal(a, m.full_order(3, 2))
    # Without replacement dataset 2 (10 records, 2 an epoch) is drawn through in 5 epochs.
    seen = np.concatenate([m.locate(m.full_order(3, e))[1][m.locate(m.full_order(3, e))[0] == 2] for e in range(5)])
    assert sorted(seen.tolist()) == list(range(10))
    unshuffled = m.full_order(0, 0, shuffle=False)
    # Smooth: 12/6/2, the j-th of dataset k at (2j + 1) / (2 c_k), the earlier dataset on ties (11 before 20).
    assert unshuffled.tolist() == [0, 10, 1, 2, 11, 20, 3, 4, 12, 5, 6, 13, 7, 8, 14, 21, 9, 0, 15, 1]
    r = shardpack.mix([sets["onehot"], sets["index"]], weights=[1, 1], epoch_size=50, replacement=True)
    assert counts_of(r, r.full_order(0, 0)) == [25, 25]
    with pytest.raises(shardpack.ArgumentValueError, match="replacement"):
        r.full_order(0, 0, order="blocks")


@pytest.mark.parametrize("order", ["global", "blocks"])
def test_the_loader_resumes_a_mix_exactly(sets, order):
    spt = pytest.importorskip("shardpack.torch", reason="PyTorch is not importable")
    m = shardpack.mix([sets["onehot"], sets["index"], sets["raw"]], weights=[0.6, 0.3, 0.1], epoch_size=40)

    def loader():
        return spt.Loader(m, batch_size=4, seed=9, rank=1, world=4, order=order, dtype="uint8", label="index",
                          crop=(16, 16), crop_position="random", hflip=0.5)

    a = loader()
    a.set_epoch(2)
    whole = [(i.clone(), l.clone()) for i, l in a]
    assert len(whole) == 3  # 10 samples on this rank: 4 + 4 + 2
    b = loader()
    b.set_epoch(2)
    it = iter(b)
    first = next(it)
    state = b.state_dict()
    del it
    c = loader()
    c.load_state_dict(state)
    rest = list(c)
    assert len(rest) == 2
    for (x, y), (u, v) in zip(whole, [first] + rest):
        assert np.array_equal(x.numpy(), u.numpy()) and np.array_equal(y.numpy(), v.numpy())


def _world_changes(make):
    """Reads an epoch on 4 ranks, part-way; resumes on 2 (each rank from the states of all 4,
    or from one, as DDP ranks are in step), part-way; then on 3 to the end. Returns every index
    read, and the indices the last world read."""
    read = []
    samplers = [make(r, 4) for r in range(4)]
    for s in samplers:
        s.set_epoch(3)
    taken = [7, 7, 7, 7]
    for s, t in zip(samplers, taken):
        read += s.take()[:t].tolist()
    states = [s.state_dict(consumed=t) for s, t in zip(samplers, taken)]
    two = [make(r, 2) for r in range(2)]
    for s in two:
        s.load_state_dict(states[0])  # all 4 read as far: one state stands for them
    taken = [5, 5]
    for s, t in zip(two, taken):
        read += s.take()[:t].tolist()
    states = [s.state_dict(consumed=t) for s, t in zip(two, taken)]
    three = [make(r, 3) for r in range(3)]
    for s in three:
        s.load_state_dict(states)  # a list: each rank's own position
    last = [s.take() for s in three]
    assert len({len(x) for x in last}) == 1  # equal shares
    return read, last


@pytest.mark.parametrize("kind", ["global", "blocks", "mixed", "mixed-blocks"])
def test_4_to_2_to_3_ranks_mid_epoch_read_every_remaining_sample_once(sets, kind):
    spt = pytest.importorskip("shardpack.torch", reason="PyTorch is not importable")
    order = "blocks" if kind.endswith("blocks") else "global"
    if kind.startswith("mixed"):
        source = shardpack.mix([sets["onehot"], sets["index"], sets["raw"]], weights=[0.6, 0.3, 0.1], epoch_size=97)
        full = source.full_order(0, 3, order=order, block=2, window=2)
    else:
        source = 203  # records
        full = shardpack.epoch_order(source, 0, 3, order=order, block=2, window=2)

    def make(rank, world):
        return spt.Sampler(source, rank=rank, world=world, order=order, block=2, window=2)

    read, last = _world_changes(make)
    everything = read + np.concatenate(last).tolist()
    pads = sum(len(x) for x in last) - (len(full) - len(read))
    assert 0 <= pads < 3  # the last world pads its shares to one length, from the rest's start
    expected = collections.Counter(full.tolist())
    got = collections.Counter(everything)
    extra = got - expected
    assert sum(extra.values()) == pads and not (expected - got)  # every sample once, pads aside
    # The consumed ones are not read again (the last world's indices, pads aside, are the rest).
    rest = collections.Counter(full.tolist()) - collections.Counter(read)
    assert not (rest - collections.Counter(np.concatenate(last).tolist()))


def test_a_state_of_another_world_resumes_through_the_loader(sets):
    spt = pytest.importorskip("shardpack.torch", reason="PyTorch is not importable")
    make = lambda r, w: spt.Loader(sets["onehot"], batch_size=2, seed=1, rank=r, world=w, dtype="uint8",  # noqa: E731
                                   label="index")
    four = [make(r, 4) for r in range(4)]
    read = []
    states = []
    for lo in four:
        it = iter(lo)
        read += [next(it)]
        states.append(lo.state_dict())
        del it
    two = [make(r, 2) for r in range(2)]
    rest = []
    for lo in two:
        lo.load_state_dict(states)
        rest += list(lo)
    seen = sum(len(b[0]) for b in read) + sum(len(b[0]) for b in rest)
    assert seen == 10  # 8 read on 4 ranks (2 each, of 3 each), the 2 left on 2 ranks: 1 each
    with pytest.raises(shardpack.ArgumentValueError, match="states for a world"):
        two[0].load_state_dict(states[:3])


def test_classes_are_matched_by_name(sets):
    a, rev, extra = (shardpack.open(sets[k]) for k in ("index", "seg-reversed", "seg-extra"))
    assert rev.classes == a.classes[::-1]
    m = shardpack.mix([a, rev, extra], weights=[1, 1, 1])
    assert m.classes == a.classes + ["zzz_extra"] and m.ignore_value == 255
    n = len(a)
    idx = np.arange(3 * n)
    images, labels = m.read_batch(idx, dtype="uint8", label="index", label_dtype="uint8")
    ai, al = a.read_batch(np.arange(n), dtype="uint8", label="index", label_dtype="uint8")
    for k in range(3):  # the same images, so the same labels once renumbered
        assert np.array_equal(images[k * n:(k + 1) * n], ai)
        assert np.array_equal(labels[k * n:(k + 1) * n], al)
    onehot = m.read_batch(idx, dtype="uint8", label="onehot")[1]
    ao = a.read_batch(np.arange(n), dtype="uint8", label="onehot")[1]
    assert onehot.shape[1] == len(m.classes)
    for k in range(3):
        assert np.array_equal(onehot[k * n:(k + 1) * n, :-1], ao) and not onehot[k * n:(k + 1) * n, -1].any()
    nhwc = m.read_batch(idx[n:], dtype="uint8", label="onehot", layout="NHWC")[1]
    assert np.array_equal(nhwc, np.moveaxis(onehot[n:], 1, -1))
    # ds[i] alike.
    assert np.array_equal(m[n + 3][1], a[3][1])
    # A single dataset's batch needing no renumbering is read as it is; the same values.
    assert np.array_equal(m.read_batch([0, 1], label="index")[1], a.read_batch([0, 1], label="index")[1])
    # Classification: a subset of the classes, ids renumbered.
    full, sub = shardpack.open(sets["cls"]), shardpack.open(sets["cls-subset"])
    c = shardpack.mix([sub, full])
    assert set(c.classes) == set(full.classes) and c.classes[:len(sub.classes)] == sub.classes
    ids = c.read_batch(np.arange(len(c)), label="index")[1]
    names = [c.classes[i] for i in ids]
    assert names == [sub.classes[sub[i][1]] for i in range(len(sub))] + [full.classes[full[i][1]] for i in range(len(full))]
    assert c[0][1] == c.classes.index(sub.classes[sub[0][1]])


def test_conflicts_are_refused_clearly(sets):
    with pytest.raises(shardpack.ArgumentValueError, match="different tasks"):
        shardpack.mix([sets["index"], sets["cls"]])
    with pytest.raises(shardpack.ArgumentValueError, match="channel counts"):
        shardpack.mix([sets["cls"], sets["cls-raw"]])  # RGB and grey
    with pytest.raises(shardpack.ArgumentValueError, match="classes= lacks"):
        shardpack.mix([sets["index"], sets["seg-extra"]], classes=shardpack.open(sets["index"]).classes)
    with pytest.raises(shardpack.ArgumentValueError, match="every weight is 0"):
        shardpack.mix([sets["index"], sets["raw"]], weights=[0, 0])
    with pytest.raises(shardpack.ArgumentValueError, match="weights for"):
        shardpack.mix([sets["index"], sets["raw"]], weights=[1])
    with pytest.raises(shardpack.ArgumentValueError, match="finite"):
        shardpack.mix([sets["index"], sets["raw"]], weights=[1, float("nan")])
    with pytest.raises(shardpack.ArgumentTypeError):
        shardpack.mix(sets["index"])
    with pytest.raises(shardpack.ArgumentValueError, match="no datasets"):
        shardpack.mix([])


def test_different_image_sizes_read_with_a_crop(sets):
    big, small = shardpack.open(sets["cls"]), shardpack.open(sets["cls-small"])
    m = shardpack.mix([big, small])
    assert m.image_shape is None
    with pytest.raises(shardpack.ArgumentValueError, match="not all of one size.*crop"):
        m.read_batch([0])
    with pytest.raises(shardpack.ArgumentValueError, match="crop"):
        m.batch_spec(4)
    n = len(big)
    images, labels, boxes = m.read_batch([0, n], crop=(16, 16), dtype="uint8", layout="NHWC", return_boxes=True)
    assert images.shape == (2, 16, 16, 3)
    assert np.array_equal(images[0], big.read_batch([0], crop=(16, 16), dtype="uint8", layout="NHWC")[0][0])
    assert np.array_equal(images[1], small.read_batch([0], crop=(16, 16), dtype="uint8", layout="NHWC")[0][0])
    assert boxes.shape == (2, 4)
    with pytest.raises(shardpack.Error):
        m.read_batch([n], crop=(17, 17))  # larger than the small dataset's 16 rows
    # out= arrays are filled in place.
    out = (np.zeros((2, 3, 16, 16), np.float32), np.zeros((2, len(m.classes)), np.float32))
    got = m.read_batch([n, 1], crop=(16, 16), out=out)
    assert got[0] is out[0] and np.array_equal(out[0], m.read_batch([n, 1], crop=(16, 16))[0])
    # The adapters crop to a common size the same way; without a crop they refuse at once.
    spt = pytest.importorskip("shardpack.torch", reason="PyTorch is not importable")
    images, _ = next(iter(spt.Loader(m, batch_size=4, crop=(16, 16), dtype="uint8")))
    assert tuple(images.shape) == (4, 3, 16, 16)
    with pytest.raises(shardpack.ArgumentValueError, match="not all of one size"):
        spt.Loader(m, batch_size=4)


def test_the_torch_dataset_and_dataloader_read_a_mix(sets):
    spt = pytest.importorskip("shardpack.torch", reason="PyTorch is not importable")
    from torch.utils.data import DataLoader
    m = shardpack.mix([sets["onehot"], sets["index"], sets["raw"]], weights=[0.6, 0.3, 0.1], epoch_size=30)
    ds = spt.Dataset(m, dtype="uint8", label="index")
    sampler = spt.Sampler(m, seed=2)
    assert len(sampler) == 30
    order = m.full_order(2, 0)
    expected = m.read_batch(order, dtype="uint8", label="index")
    for workers in (0, 2):  # the same batches in worker processes (the mix pickles by its datasets' paths)
        batches = list(DataLoader(ds, batch_size=8, sampler=sampler, collate_fn=spt.collate, num_workers=workers))
        assert np.array_equal(np.concatenate([b[0].numpy() for b in batches]), expected[0])
        assert np.array_equal(np.concatenate([b[1].numpy() for b in batches]), expected[1])


# The Keras, tf.data and Grain adapters read a mix in tests/python/test_mix_keras_tf.py (in .venv-tf).


def test_a_mixed_batch_is_the_same_for_any_thread_count(sets):
    m = shardpack.mix([sets["onehot"], sets["index"], sets["raw"]], weights=[0.6, 0.3, 0.1], epoch_size=40)
    order = m.full_order(4, 0)
    options = dict(dtype="uint8", label="index", crop=(16, 16), crop_position="random", hflip=0.5, seed=4)
    want = m.read_batch(order, threads=1, **options)
    for threads in (2, 4, 0):
        got = m.read_batch(order, threads=threads, **options)
        assert np.array_equal(got[0], want[0]) and np.array_equal(got[1], want[1]), threads


def test_the_blocks_order_of_a_mix_does_not_depend_on_its_readers_caches(sets):
    """A dataset's own blocks order shrinks its windows to fit its reader's cache
    (Dataset.blocks_layout); a mix's does not: ranks whose caches differ, and a resume with
    another cache, must read one order, and a mix's Sampler state records no layout. So a mix
    takes blocks of about 4 MiB of each dataset's bytes and windows of 16 unless told."""
    small = shardpack.open(sets["onehot"], io="blocks", cache_bytes=3 * 5 * (4 << 20))  # 5 windows of 4 MiB blocks
    assert small.blocks_layout[1] == 5
    plain = shardpack.open(sets["onehot"])
    other = shardpack.open(sets["index"])
    small_mix, plain_mix = shardpack.mix([small, other], weights=[1, 1]), shardpack.mix([plain, other], weights=[1, 1])
    for block in (1, None):
        order = small_mix.full_order(3, 0, order="blocks", block=block)
        assert np.array_equal(order, plain_mix.full_order(3, 0, order="blocks", block=block))
        assert np.array_equal(order, plain_mix.full_order(3, 0, order="blocks", block=block, window=16))
        assert np.array_equal(small_mix._block_starts(block, None)[0], plain_mix._block_starts(block, None)[0])
        assert small_mix._block_starts(block, None)[1] == 16  # the loaders' read-ahead: the same window
    assert not np.array_equal(small_mix.full_order(3, 0, order="blocks", block=1),
                              small_mix.full_order(3, 0, order="blocks", block=1, window=5))  # 10 blocks: it matters
    spt = pytest.importorskip("shardpack.torch", reason="PyTorch is not importable")
    # A state saved with the small cache resumes exactly with the default one.
    saved = spt.Sampler(small_mix, seed=1, order="blocks", block=1)
    it = iter(saved)
    head = [next(it) for _ in range(6)]
    whole = list(spt.Sampler(small_mix, seed=1, order="blocks", block=1))
    resumed = spt.Sampler(plain_mix, seed=1, order="blocks", block=1)
    resumed.load_state_dict(saved.state_dict())
    assert head + list(resumed) == whole


_MIX_RANK_SCRIPT = r"""
import json, sys
import torch.distributed as dist
import shardpack, shardpack.torch as spt
a, b, out = sys.argv[1], sys.argv[2], sys.argv[3]
dist.init_process_group("gloo", init_method="env://")
rank = dist.get_rank()
# The ranks' readers choose apart: rank 0 reads dataset a through a small cache (it prefers the
# blocks order), rank 1 maps it (global).
first = shardpack.open(a, io="blocks", cache_bytes=12 << 20) if rank == 0 else shardpack.open(a, io="mmap")
m = shardpack.mix([first, shardpack.open(b, io="mmap")], weights=[0.6, 0.4], epoch_size=30)
s = spt.Sampler(m, seed=5)
json.dump({"order": s.order, "preferred": m.preferred_order, "indices": [int(i) for i in s]}, open(out, "w"))
dist.destroy_process_group()
"""


def test_ranks_of_a_distributed_job_agree_on_a_mixs_auto_order(sets, tmp_path):
    """Two torch.distributed ranks (gloo, on this machine) whose mixes prefer different orders (one
    rank's reader of a dataset reads blocks through a small cache, the other's maps it) read one
    order, so the epoch's 30 samples are split between them, 15 each, none twice."""
    pytest.importorskip("torch.distributed", reason="PyTorch is not importable")
    import json
    import os
    import socket
    import subprocess
    import sys
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    script = tmp_path / "rank.py"
    script.write_text(_MIX_RANK_SCRIPT)
    procs = []
    for rank in range(2):
        env = dict(os.environ, RANK=str(rank), WORLD_SIZE="2", MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port))
        procs.append(subprocess.Popen([sys.executable, str(script), sets["onehot"], sets["index"],
                                       str(tmp_path / f"{rank}.json")], env=env, stderr=subprocess.PIPE, text=True))
    for p in procs:
        _, err = p.communicate(timeout=120)
        if p.returncode != 0 and "gloo" in err.lower() and "unsupported" in err.lower():
            pytest.skip(f"torch.distributed gloo cannot run here: {err.strip()[-200:]}")
        assert p.returncode == 0, err
    got = [json.loads((tmp_path / f"{rank}.json").read_text()) for rank in range(2)]
    assert [g["preferred"] for g in got] == ["blocks", "global"]
    assert [g["order"] for g in got] == ["blocks", "blocks"]
    m = shardpack.mix([sets["onehot"], sets["index"]], weights=[0.6, 0.4], epoch_size=30)
    full = m.full_order(5, 0, order="blocks")
    assert [len(g["indices"]) for g in got] == [15, 15]
    assert sorted(got[0]["indices"] + got[1]["indices"]) == sorted(full.tolist())  # every sample of the epoch once
