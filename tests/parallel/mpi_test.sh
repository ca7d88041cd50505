#!/usr/bin/env bash
# `mpirun -np N cohort logits ... --mpi --layout L` (ranks found through MPI, the comm MPI
# transport) must write the single-process logits (within 1e-4, same argmax on every row).
#
#   mpi_test.sh MPIEXEC COHORT_BINARY MODEL N LAYOUT
set -euo pipefail
mpiexec=$1 cohort=$2 model=$3 n=$4 layout=$5
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
tokens=1,10,20,30,40,50,60,70,80,90,100,110,120,130,140,150,7,300,42,11
"$cohort" -t 1 logits -m "$model" --tokens "$tokens" -b 5 -o "$tmp/single.f32"
timeout 60 "$mpiexec" --allow-run-as-root --oversubscribe -np "$n" \
  "$cohort" -t 1 logits -m "$model" --tokens "$tokens" -b 5 -o "$tmp/mpi.f32" --mpi --layout "$layout"
python3 - "$tmp/single.f32" "$tmp/mpi.f32" <<'PY'
import array, sys
a, b = (array.array("f", open(p, "rb").read()) for p in sys.argv[1:3])
assert len(a) == len(b) and a, "logit files differ in size"
n = 512
diff = max(abs(x - y) for x, y in zip(a, b))
same = all(max(range(n), key=lambda i: a[r*n+i]) == max(range(n), key=lambda i: b[r*n+i])
           for r in range(len(a) // n))
print(f"max |diff| {diff:.3g}, argmax equal on every row: {same}")
sys.exit(0 if diff <= 1e-4 and same else 1)
PY
