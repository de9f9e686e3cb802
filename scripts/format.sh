#!/usr/bin/env bash
# Formats the C++/CUDA sources with the project's .clang-format; --check only reports.
set -euo pipefail
cd "$(dirname "$0")/.."
mode=(-i)
[ "${1:-}" = "--check" ] && mode=(--dry-run -Werror)
mapfile -t files < <(git ls-files --cached --others --exclude-standard -- 'src/*' 'tests/*' 'bench/*' \
  | grep -E '\.(h|hpp|cpp|cu|cuh)$')
[ ${#files[@]} -eq 0 ] && exit 0
clang-format "${mode[@]}" "${files[@]}"
[ "${1:-}" = "--check" ] && echo "format check: ${#files[@]} files clean"
exit 0
