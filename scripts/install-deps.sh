#!/usr/bin/env bash
# Installs what shardpack needs from Debian's packages, and only what is missing.
set -euo pipefail

packages=(cmake g++ make pkg-config libpng-dev libturbojpeg0-dev libjpeg62-turbo-dev libzstd-dev
          libtbb-dev libspdlog-dev libcli11-dev catch2 libxxhash-dev libdeflate-dev python3 zstd
          libcurl4-openssl-dev fuse3 libfuse3-dev libtiff-dev)
packages+=("$@")

missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
[ ${#missing[@]} -eq 0 ] && exit 0

echo "installing: ${missing[*]}" >&2
sudo=""
[ "$(id -u)" -ne 0 ] && sudo="sudo"
export DEBIAN_FRONTEND=noninteractive
$sudo apt-get update -qq
$sudo apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
