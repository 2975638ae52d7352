"""The defaults table of the Python guide (src/python/README.md, #21 item 3) says what every adapter's signature
says: shuffle, drop_last, seed and the first epoch, row by row.

Each row is checked where its framework imports: the torch rows in .venv, the Keras, tf.data and
Grain rows in .venv-tf (test_keras_tf.py and test_grain.py call check_rows for theirs). Under a
second."""
import importlib
import inspect
import re

import pytest

from conftest import ROOT

ROW = re.compile(r"^\| `shardpack\.(\w+)\.(\w+)` \|(.*)\|\s*$")


def table():
    """{(module, name): {"shuffle": cell, "drop_last": cell, "seed": cell, "epoch": cell}}."""
    text = (ROOT / "src" / "python" / "README.md").read_text(encoding="utf-8")
    start = text.index("**Defaults, the same in every adapter**")
    rows = {}
    for line in text[start:].splitlines()[2:]:
        if not line.startswith("|"):
            if rows:
                break
            continue
        m = ROW.match(line)
        if m:
            cells = [c.strip() for c in m.group(3).split("|")]
            rows[(m.group(1), m.group(2))] = dict(zip(("shuffle", "drop_last", "seed", "epoch"), cells))
    return rows


def parameters(module, name):
    obj = getattr(importlib.import_module(f"shardpack.{module}"), name)
    return inspect.signature(obj.__init__ if inspect.isclass(obj) else obj).parameters


def check_rows(modules):
    """Checks the table's rows of these shardpack modules; returns how many were checked."""
    checked = 0
    for (module, name), cells in table().items():
        if module not in modules:
            continue
        params = parameters(module, name)
        for key in ("shuffle", "drop_last"):
            if cells[key] in ("True", "False"):
                assert params[key].default is (cells[key] == "True"), (module, name, key)
                assert params[key].kind is inspect.Parameter.KEYWORD_ONLY, (module, name, key)
        seed = re.match(r"^(\d+)", cells["seed"])
        if seed:
            assert params["seed"].default == int(seed.group(1)), (module, name)
        epoch = re.match(r"^`epoch=(\d+)`$", cells["epoch"])
        if epoch:
            assert params["epoch"].default == int(epoch.group(1)), (module, name)
        checked += 1
    return checked


def test_the_table_has_every_adapter():
    assert set(table()) == {("torch", "Loader"), ("torch", "Sampler"), ("torch", "Dataset"),
                            ("keras", "PyDataset"), ("tf", "dataset"), ("grain", "dataset"),
                            ("grain", "DataSource")}
    assert all(cells["shuffle"] == "True" for (m, n), cells in table().items() if n not in ("Dataset", "DataSource"))


def test_the_torch_rows_match_the_signatures():
    pytest.importorskip("torch", reason="PyTorch is not installed here (scripts/python-env.sh installs Debian's)")
    assert check_rows({"torch"}) == 3
