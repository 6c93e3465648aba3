#!/usr/bin/env bash
# herd synth and herd inspect through the CLI: every architecture and type writes a file
# that loads; bad options fail with exit code 1 and a message naming the problem.
set -euo pipefail
herd=${1:?usage: synth_cli_test.sh path/to/herd}
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
fail() { echo "FAIL: $*"; exit 1; }

for arch in llama qwen2 qwen3 qwen3moe; do
  for type in f32 f16 bf16 q8_0 q4_0 q4_k_m; do
    f=$dir/$arch-$type.gguf
    "$herd" synth --arch "$arch" --embd 256 --ff 256 --layers 2 --heads 4 --kv-heads 2 \
      --experts 4 --experts-used 2 --type "$type" --out "$f" 2>/dev/null || fail "synth $arch $type"
    out=$("$herd" inspect --model "$f" --tensors)
    grep -q "general.architecture *\"$arch\"" <<<"$out" || fail "inspect $arch $type: architecture"
    grep -q "blk.1.attn_q.weight" <<<"$out" || fail "inspect $arch $type: tensors"
  done
done

# Errors: exit code 1, "herd: error:" and the reason, no file left behind.
expect_error() {  # expect_error <needle> <args...>
  local needle=$1; shift
  set +e
  err=$("$herd" "$@" 2>&1 >/dev/null)
  code=$?
  set -e
  [ "$code" -eq 1 ] || fail "$* exited $code, expected 1"
  grep -q "herd: error:" <<<"$err" || fail "$*: no 'herd: error:' in: $err"
  grep -q -- "$needle" <<<"$err" || fail "$*: expected '$needle' in: $err"
}
expect_error "unknown architecture 'gpt9'" synth --arch gpt9 --out "$dir/x.gguf"
expect_error "unknown --type 'q9_9'" synth --type q9_9 --out "$dir/x.gguf"
expect_error "not a multiple of --heads" synth --embd 100 --heads 3 --out "$dir/x.gguf"
expect_error "cannot open" inspect --model "$dir/missing.gguf"
printf 'GGUF\3\0\0\0' >"$dir/trunc.gguf"
expect_error "truncated" inspect --model "$dir/trunc.gguf"
[ ! -e "$dir/x.gguf" ] || fail "a failed synth left a file"
echo "synth_cli_test: ok"
