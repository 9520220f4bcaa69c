#!/usr/bin/env bash
# Adding an op is one file and one line: kernel-lab-toy is the lab built with tests/toy/toy.cu
# and the one line of tests/toy/toy_ops.def, nothing else. The toy op must then be in `list`
# with the blocks its template instances give, refused at any other block, checked against its
# reference (every variant, block and math mode on a GPU; the reference without one), and in
# bench, like every op. Usage: toy_op_test.sh KERNEL_LAB_TOY
set -uo pipefail
lab=$1
fail=0
expect() {  # expect CODE DESCRIPTION -- command...
  local code=$1 what=$2
  shift 3
  out=$("$@" 2>&1)
  local got=$?
  if [ "$got" != "$code" ]; then
    echo "FAIL: $what: exit $got, expected $code: $*"
    echo "$out" | tail -20
    fail=1
  fi
}
contains() {  # contains TEXT DESCRIPTION
  if ! grep -qF -- "$1" <<<"$out"; then
    echo "FAIL: $2: no '$1' in:"
    echo "$out" | tail -20
    fail=1
  fi
}

expect 0 "list" -- "$lab" list
contains "toy" "the toy op is listed"
contains "v2_template" "its variants are listed"
contains "blocks: 64x1 256x1*" "v2's blocks are its template instances, no more"
contains "matmul" "the lab's own ops are still there"

expect 64 "a block with no instance" -- "$lab" check --lab toy --variant toy=v2_template \
  --block toy=128x1
contains "128x1" "the refusal names the block"

expect 0 "check, every variant, block and math" -- "$lab" check --lab toy --size 4099
contains "toy" "check ran the toy op"
if grep -q "no CUDA device" <<<"$out"; then
  contains "cpu reference" "without a GPU, its reference ran"
else
  contains "v2_template" "on a GPU, every variant was checked"
  expect 0 "bench" -- "$lab" bench --lab toy --size 2^20 --sweep-variants --reps 20
  contains "toy_v2_template<256,1>" "bench times the template instance by name"
fi
[ "$fail" = 0 ] && echo "toy op: listed, refused at a block it has no instance for, checked (and on a GPU benched)"
exit $fail
