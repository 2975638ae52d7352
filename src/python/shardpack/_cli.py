"""The `shardpack` command of a pip-installed package: execs the CLI binary the wheel carries
(shardpack/bin/shardpack, built by cmake/wheel_cli.cmake), with the same arguments, standard
streams and exit status. A wheel built where the packer's dependencies were missing carries no
binary; then this says why and how to get one, and exits 1.
"""
import os
import sys
from pathlib import Path
from typing import Optional

_HERE = Path(__file__).resolve().parent


def cli_path() -> Optional[str]:
    """The CLI binary this package installed, or None for a reader-only wheel."""
    binary = _HERE / "bin" / "shardpack"
    return str(binary) if os.access(binary, os.X_OK) else None


def main() -> None:
    binary = cli_path()
    if binary is None:
        missing = _HERE / "cli-missing.txt"
        why = missing.read_text(errors="replace").strip() if missing.is_file() else "its binary is not in the package"
        sys.stderr.write(
            "shardpack: this installation has the Python reader only, not the command-line tool: "
            f"{why}\n"
            "Install the packer's dependencies (./scripts/install-deps.sh on Debian) and run pip install . again, "
            "or build the CLI with CMake (src/cli/README.md: Installing the CLI).\n")
        sys.exit(1)
    sys.stdout.flush()
    sys.stderr.flush()
    os.execv(binary, ["shardpack"] + sys.argv[1:])


if __name__ == "__main__":
    main()
