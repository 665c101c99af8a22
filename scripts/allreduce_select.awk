# Summarises BenchmarkAllReduceSelect (collective/bench_select_test.go):
# per world size and size, the median over the rounds of the wall-clock
# and CPU time of one allreduce, the ring beside the default choice
# (auto), and their ratio; with ring-sockets in COLLECTIVE_BENCH_ALGOS also
# the ring over TCP alone beside the default choice. Usage:
#   go test -run '^$' -bench AllReduceSelect ./collective | awk -f scripts/allreduce_select.awk
function median(list,    a, n, i, j, t) {
  n = split(list, a, " ")
  for (i = 2; i <= n; i++) {
    t = a[i]
    for (j = i - 1; j >= 1 && a[j] + 0 > t + 0; j--) a[j + 1] = a[j]
    a[j + 1] = t
  }
  if (n % 2) return a[(n + 1) / 2]
  return (a[n / 2] + a[n / 2 + 1]) / 2
}
/^BenchmarkAllReduceSelect\// {
  split($1, part, "/")
  sub(/^ranks=/, "", part[3]); sub(/^size=/, "", part[4]); sub(/^algo=/, "", part[5]); sub(/-[0-9]+$/, "", part[5])
  key = part[3] " " part[4]
  if (!(key in seen)) { seen[key] = 1; order[++keys] = key }
  for (i = 2; i < NF; i++) {
    if ($(i + 1) == "us/op") wall[key, part[5]] = wall[key, part[5]] " " $i
    if ($(i + 1) == "cpu-us/op") cpu[key, part[5]] = cpu[key, part[5]] " " $i
  }
}
END {
  for (k = 1; k <= keys; k++) if (wall[order[k], "ring-sockets"] != "") sockets = 1
  printf "%-6s %-10s %12s %12s %8s %14s %14s %8s", "ranks", "bytes", "ring ms", "auto ms", "ring/auto", "ring cpu ms", "auto cpu ms", "cpu r/a"
  if (sockets) printf " %12s %8s %14s %8s", "sockets ms", "sock/auto", "sockets cpu ms", "cpu s/a"
  printf "\n"
  for (k = 1; k <= keys; k++) {
    key = order[k]
    if (wall[key, "ring"] == "" || wall[key, "auto"] == "") continue
    split(key, f, " ")
    r = median(wall[key, "ring"]) / 1000; a = median(wall[key, "auto"]) / 1000
    rc = median(cpu[key, "ring"]) / 1000; ac = median(cpu[key, "auto"]) / 1000
    printf "%-6s %-10s %12.3f %12.3f %7.2fx %14.3f %14.3f %7.2fx", f[1], f[2], r, a, r / a, rc, ac, (ac > 0 ? rc / ac : 0)
    if (sockets && wall[key, "ring-sockets"] != "") {
      s = median(wall[key, "ring-sockets"]) / 1000; sc = median(cpu[key, "ring-sockets"]) / 1000
      printf " %12.3f %7.2fx %14.3f %7.2fx", s, s / a, sc, (ac > 0 ? sc / ac : 0)
    }
    printf "\n"
  }
}
