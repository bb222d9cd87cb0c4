#!/usr/bin/env bash
# Checks every #include "..." of the source tree against the layer order in
# LAYERS: a file may include its own folder and folders listed before its
# own, never one listed after it (which would make a cycle possible). Prints
# one line per violation and exits 1 when there is any. Tests are exempt
# (they sit above everything). Usage: scripts/check-layers.sh [REPO]
set -euo pipefail
cd "${1:-$(dirname "$0")/..}"
[ -f LAYERS ] || { echo "check-layers: no LAYERS file" >&2; exit 2; }

git ls-files -- 'engine/*' 'workloads/*' 'deploy/*' 'faults/*' 'sim/*' 'reports/*' 'cli/*' |
  grep -E '\.(c|h|cu)$' |
  xargs grep -Hn '^[[:space:]]*#[[:space:]]*include[[:space:]]*"' |
  awk -v layers=LAYERS '
    BEGIN {
      while ((getline line < layers) > 0) {
        sub(/#.*/, "", line)
        n = split(line, f, /[[:space:]]+/)
        if (f[1] == "") { for (i = 1; i < n; i++) f[i] = f[i + 1]; n-- }
        if (n < 1 || f[1] == "") continue
        rank[f[1]] = ++count
        for (i = 2; i <= n; i++) if (f[i] != "") owner["dcr/" f[i] ".h"] = f[1]
      }
      bad = 0
    }
    # The layer of a path: engine/<folder> (engine/include/dcr is mapped per
    # header), workloads/<folder>, else the top-level folder.
    function unit(path,   p, k) {
      k = split(path, p, "/")
      if (p[1] == "engine" || p[1] == "workloads") return (k > 2 ? p[1] "/" p[2] : p[1])
      return p[1]
    }
    {
      colon = index($0, ":"); file = substr($0, 1, colon - 1)
      rest = substr($0, colon + 1); colon = index(rest, ":"); lineno = substr(rest, 1, colon - 1)
      match(rest, /"[^"]+"/); inc = substr(rest, RSTART + 1, RLENGTH - 2)
      from = unit(file)
      if (file ~ /^engine\/include\/dcr\//) {
        from = owner["dcr/" substr(file, length("engine/include/dcr/") + 1)]
        if (from == "") { printf "%s: a public header no engine folder owns (add it to LAYERS)\n", file; bad = 1; next }
      }
      if (!(from in rank)) { printf "%s: folder %s is not in LAYERS\n", file, from; bad = 1; next }
      if (inc ~ /^dcr\//) {
        to = owner[inc]
        if (to == "") { printf "%s:%s: includes %s, which no engine folder owns in LAYERS\n", file, lineno, inc; bad = 1; next }
      } else if (inc ~ /^(workloads|deploy|faults|sim|reports|cli|engine)\//) {
        to = unit(inc)
      } else if (inc ~ /\//) {
        to = "engine/" substr(inc, 1, index(inc, "/") - 1)   # engine-relative internal header
      } else {
        next                                                  # beside the file
      }
      if (!(to in rank)) { printf "%s:%s: includes %s of %s, which is not in LAYERS\n", file, lineno, inc, to; bad = 1; next }
      if (rank[to] > rank[from]) {
        printf "%s:%s: %s (layer %s) includes %s of %s, a layer above it\n", file, lineno, from, rank[from], inc, to
        bad = 1
      }
    }
    END { exit bad }
  ' && echo "check-layers: every include follows LAYERS"
