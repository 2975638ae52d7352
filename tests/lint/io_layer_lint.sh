#!/usr/bin/env bash
# The I/O-layer lint (issue #18): every file shardpack opens, reads whole, writes, renames,
# links or removes goes through src/io/ (or, for the header-only reader, the rules of
# include/shardpack/detail/regular_file.hpp). This fails, naming file and line, when code
# elsewhere in src/, include/ or tools/ does it another way. Exceptions are listed, each with
# its reason, in io_layer_allow.txt beside this script.
#
#   io_layer_lint.sh ROOT          check the tree at ROOT
#   io_layer_lint.sh --self-test   check that a planted violation of each kind is caught
# Takes well under a second.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"

# What counts as file I/O by other means (extended regular expressions, one a line).
patterns=(
  'std::(i|o)?fstream\b'
  '(^|[^_[:alnum:]])(std::)?(fopen|freopen|fdopen|tmpfile)[[:space:]]*\('
  '(std::filesystem|fs)::(remove|remove_all|rename|copy|copy_file|copy_symlink|create_hard_link|create_symlink|create_directory_symlink|resize_file|create_directory|create_directories|permissions)[[:space:]]*\('
  '(^|[^_[:alnum:].>:])(::)?(openat|creat|renameat|renameat2|unlink|unlinkat|linkat|symlink|symlinkat|mkdirat|rmdir|ftruncate|mkstemp|mkfifo|mknod)[[:space:]]*\('
  '(^|[^_[:alnum:].>:])::(open|rename|link|mkdir|truncate|remove|mmap|read|pread|write|pwrite)[[:space:]]*\('
  'std::rename[[:space:]]*\(|std::remove[[:space:]]*\([^,)]*\)'
  '(^|[^_[:alnum:]])(open_regular_file|read_regular_file|read_whole_file|read_fully)[[:space:]]*\('
)

lint() {  # lint ROOT ALLOWFILE: prints violations, returns 1 if any
  local root="$1" allow="$2" found=0
  local -a allowed=()
  while IFS= read -r line; do
    line="${line%%#*}"; line="${line//[[:space:]]/}"
    [[ -n "$line" ]] && allowed+=("$line")
  done < "$allow"
  cd "$root"
  while IFS= read -r file; do
    [[ "$file" == src/io/* ]] && continue
    local skip=0
    for a in "${allowed[@]}"; do
      if [[ "$a" == */ && "$file" == "$a"* ]] || [[ "$file" == "$a" ]]; then skip=1; break; fi
    done
    ((skip)) && continue
    # Comments and string literals are not code: strip // comments and "..." before matching.
    local stripped
    stripped="$(sed -e 's#"\([^"\\]\|\\.\)*"#""#g' -e 's#//.*$##' "$file")"
    for p in "${patterns[@]}"; do
      if hits="$(grep -nE "$p" <<<"$stripped")"; then
        while IFS= read -r h; do
          echo "$file:${h%%:*}: file I/O outside src/io/: ${h#*:}"
          found=1
        done <<<"$hits"
      fi
    done
  done < <(find src include tools -type f \( -name '*.cpp' -o -name '*.hpp' -o -name '*.h' -o -name '*.c' \) 2>/dev/null | sort)
  return $found
}

if [[ "${1:-}" == "--self-test" ]]; then
  tmp="$(mktemp -d)"; trap 'rm -rf "$tmp"' EXIT
  mkdir -p "$tmp/src/io" "$tmp/src/x" "$tmp/include" "$tmp/tools"
  echo 'void ok() { int fd = ::open("a", 0); }' > "$tmp/src/io/fine.cpp"           # inside the layer
  echo 'auto d = dataset::open(p); // std::ifstream in(p);' > "$tmp/src/x/ok.cpp"    # a method and a comment
  printf 'src/x/allowed.cpp  # the reason\n' > "$tmp/allow.txt"
  echo 'std::ifstream in(p);' > "$tmp/src/x/allowed.cpp"
  bad=('std::ifstream in(p);' 'std::ofstream out(p);' 'FILE* f = fopen(p, "r");' 'fs::remove(p, ec);'
       'std::filesystem::rename(a, b);' 'fs::create_hard_link(a, b);' 'int fd = ::open(p, O_RDONLY);'
       'if (unlink(p) != 0) {}' '::linkat(a, b, c, d, 0);' 'std::rename(a, b);' '::rename(a, b);'
       'auto s = detail::read_regular_file(p, n);' 'n = ::read(fd, b, 4);')
  status=0
  for i in "${!bad[@]}"; do
    echo "${bad[$i]}" > "$tmp/src/x/bad.cpp"
    if out="$(lint "$tmp" "$tmp/allow.txt")"; then
      echo "self-test FAILED: not caught: ${bad[$i]}"; status=1
    elif [[ "$out" != *"src/x/bad.cpp:1:"* || "$out" == *ok.cpp* || "$out" == *allowed.cpp* || "$out" == *fine.cpp* ]]; then
      echo "self-test FAILED for '${bad[$i]}': $out"; status=1
    fi
  done
  rm "$tmp/src/x/bad.cpp"
  if ! out="$(lint "$tmp" "$tmp/allow.txt")"; then echo "self-test FAILED: a clean tree reported: $out"; status=1; fi
  [[ $status == 0 ]] && echo "io_layer_lint self-test: ${#bad[@]} planted violations caught, the clean tree passes"
  exit $status
fi

root="${1:?usage: io_layer_lint.sh ROOT | --self-test}"
if lint "$root" "$here/io_layer_allow.txt"; then
  echo "io_layer_lint: no file I/O outside src/io/ (and the allow-list)"
else
  echo "io_layer_lint: use src/io/ (input_file, output_folder, output_file) instead, or add the file to"
  echo "tests/lint/io_layer_allow.txt with the reason"
  exit 1
fi
