#!/usr/bin/env bash
# Fetches the Alibaba GPU trace "openb" (cluster-trace-gpu-v2023), which the
# packing study reads, into DIR, and checks every file against
# bench/packing/openb.sha256 with sha256sum -c. docs/trace.md describes the
# trace, where it comes from and its terms of use.
#
#   hack/fetch-openb.sh DIR           download the 26 csv files into DIR, then check them
#   hack/fetch-openb.sh --check DIR   only check the files already in DIR
#
# The files come from alibaba/clusterdata at the commit that published them
# (OPENB_URL overrides the base URL, e.g. a mirror or file:///path). A file is
# written under its name only once complete; any mismatch exits non-zero.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
sums=$root/bench/packing/openb.sha256
commit=50a91c7c74abe3b658188dc78ac1dd302970d40c
url=${OPENB_URL:-https://raw.githubusercontent.com/alibaba/clusterdata/$commit/cluster-trace-gpu-v2023/csv}

usage() {
  echo "usage: $0 [--check] DIR" >&2
  exit 2
}

check=false
if [ "${1:-}" = --check ]; then
  check=true
  shift
fi
[ $# -eq 1 ] && [ -n "$1" ] || usage
dir=$1

if ! $check; then
  command -v curl >/dev/null || { echo "fetch-openb: needs curl" >&2; exit 1; }
  mkdir -p "$dir"
  while read -r _ name; do
    echo "fetch-openb: $name" >&2
    if ! curl -fsSL --retry 3 -o "$dir/$name.part" "$url/$name"; then
      rm -f "$dir/$name.part"
      echo "fetch-openb: could not download $url/$name" >&2
      exit 1
    fi
    mv "$dir/$name.part" "$dir/$name"
  done <"$sums"
fi

[ -d "$dir" ] || { echo "fetch-openb: $dir is not a directory" >&2; exit 1; }
if (cd "$dir" && sha256sum --check --strict --quiet "$sums"); then
  echo "fetch-openb: the $(wc -l <"$sums") files in $dir match $sums" >&2
else
  echo "fetch-openb: $dir does not hold the published openb trace (above: the files that differ or are missing)" >&2
  exit 1
fi
