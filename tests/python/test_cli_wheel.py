"""The `shardpack` command that pip install . provides (cmake/wheel_cli.cmake, shardpack/_cli.py).

scripts/python-env.sh builds the wheel with the CLI taken from the CMake build folder, so the
venv that runs these tests has it; a reader-only wheel (built without the packer's
dependencies) must say so instead. A second or two."""
import pathlib
import subprocess
import sys

import pytest

import shardpack
from shardpack import _cli


def venv_command():
    return pathlib.Path(sys.executable).parent / "shardpack"


def test_the_pip_installed_command_runs_the_cli_or_says_why_not():
    command = venv_command()
    assert command.exists(), f"pip install . put no `shardpack` command in {command.parent}"
    r = subprocess.run([str(command), "--version"], capture_output=True, text=True, timeout=60)
    if _cli.cli_path() is not None:
        assert r.returncode == 0, r.stderr
        assert r.stdout.strip() == f"shardpack {shardpack.__version__}"
        # the binary itself, executable, inside the package
        assert pathlib.Path(_cli.cli_path()).parent == pathlib.Path(shardpack.__file__).resolve().parent / "bin"
    else:  # a reader-only wheel: exit 1 and the reason recorded at build time
        assert r.returncode == 1
        assert "has the Python reader only" in r.stderr and "pip install ." in r.stderr


def test_the_command_passes_arguments_streams_and_exit_status(tmp_path):
    if _cli.cli_path() is None:
        pytest.skip("this wheel is reader-only (built without the packer's dependencies)")
    command = str(venv_command())
    bad = subprocess.run([command, "build", "--csv", str(tmp_path / "none.csv"), "--out", str(tmp_path / "o")],
                         capture_output=True, text=True, timeout=60)
    assert bad.returncode in (1, 2) and "none.csv" in bad.stderr
    usage = subprocess.run([command, "--no-such-option"], capture_output=True, text=True, timeout=60)
    assert usage.returncode == 2


def test_a_reader_only_wheel_says_why(tmp_path, monkeypatch, capsys):
    (tmp_path / "cli-missing.txt").write_text("the packer's dependencies were not found when the wheel was built: "
                                              "Could NOT find TBB\n")
    monkeypatch.setattr(_cli, "_HERE", tmp_path)
    assert _cli.cli_path() is None
    with pytest.raises(SystemExit) as e:
        _cli.main()
    assert e.value.code == 1
    err = capsys.readouterr().err
    assert "Could NOT find TBB" in err and "src/cli/README.md: Installing the CLI" in err
