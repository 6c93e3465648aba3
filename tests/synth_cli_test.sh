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
# What each Vulkan device would hold of a model (lavapipe here, whose memory holds it all).
if "$herd" devices --device vulkan >/dev/null 2>&1; then
  out=$("$herd" inspect --model "$dir/qwen3moe-q8_0.gguf")
  grep -q "^device vulkan:0: .*device-local: holds all of it" <<<"$out" ||
    fail "inspect: the Vulkan device and what it holds: $out"
fi

# The architectures with rows of their own options: each type loads, evaluates to finite
# logits and generates. deepseek2 also as V2-Lite (plain attn_q) and V2 (softmax router),
# glm4moe also as GLM-4.5-Air (no q/k norm).
new_archs=(
  "deepseek2|--embd 128 --heads 4 --head-dim 96 --rope-dim 32 --layers 3 --ff 256 --expert-ff 64"
  "deepseek2-lite|--embd 128 --heads 4 --head-dim 96 --rope-dim 32 --layers 3 --ff 256 --expert-ff 64 --q-lora 0"
  "deepseek2-v2|--embd 128 --heads 4 --head-dim 96 --rope-dim 32 --layers 3 --ff 256 --expert-ff 64 --gating softmax --expert-groups 4 --expert-groups-used 2"
  "gpt-oss|--embd 128 --heads 4 --kv-heads 2 --head-dim 64 --layers 2 --expert-ff 64 --window 8"
  "gemma3|--embd 128 --heads 4 --kv-heads 2 --head-dim 64 --layers 6 --ff 256 --window 8"
  "glm4moe|--embd 128 --heads 4 --kv-heads 2 --head-dim 64 --layers 3 --ff 256 --expert-ff 64"
  "glm4moe-air|--embd 128 --heads 4 --kv-heads 2 --head-dim 64 --layers 3 --ff 256 --expert-ff 64 --qk-norm 0"
  "minimax-m2|--embd 128 --heads 4 --kv-heads 2 --head-dim 64 --layers 2 --expert-ff 64"
  "glm-dsa|--embd 128 --heads 4 --head-dim 96 --rope-dim 32 --head-dim-v 64 --kv-lora 64 --layers 3 --ff 256 --expert-ff 64"
  "gemma4|--embd 128 --heads 4 --kv-heads 2 --head-dim 32 --layers 6 --ff 256 --window 8 --experts 8 --experts-used 2 --expert-ff 64"
  "gemma4-e|--embd 128 --heads 4 --kv-heads 1 --head-dim 32 --layers 6 --ff 256 --window 8 --experts 0 --per-layer-embd 32 --global-every 3"
)
for entry in "${new_archs[@]}"; do
  name=${entry%%|*}
  read -r -a flags <<<"${entry#*|}"
  arch=${name%%-lite}
  arch=${arch%%-v2}
  arch=${arch%%-air}
  arch=${arch%%-e}
  for type in f32 q8_0 q4_k_m; do
    f=$dir/$name-$type.gguf
    "$herd" synth --arch "$arch" "${flags[@]}" --ctx 256 --type "$type" --out "$f" 2>/dev/null ||
      fail "synth $name $type"
    out=$("$herd" inspect --model "$f" --tensors)
    grep -q "general.architecture *\"$arch\"" <<<"$out" || fail "inspect $name $type: architecture"
    "$herd" eval --model "$f" -t 2 --tokens 1,2,3,4,5,6,7,8,9,10,11,12 --dump-logits "$dir/l.bin" \
      2>/dev/null || fail "eval $name $type"
    [ -s "$dir/l.bin" ] || fail "eval $name $type: no logits"
    ! od -An -v -f "$dir/l.bin" | grep -qi 'nan\|inf' || fail "eval $name $type: logits not finite"
    # Random weights may well generate control tokens that print nothing: the exit code says.
    "$herd" run --model "$f" -t 2 -p "hello" -n 4 --temp 0 >/dev/null 2>&1 || fail "run $name $type"
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
expect_error "--gating 'relu'" synth --arch deepseek2 --gating relu --out "$dir/x.gguf"
expect_error "--window: llama has no sliding-window layers" synth --window 8 --out "$dir/x.gguf"
expect_error "--rope-dim" synth --arch deepseek2 --embd 128 --heads 4 --head-dim 48 --rope-dim 48 \
  --out "$dir/x.gguf"
expect_error "cannot open" inspect --model "$dir/missing.gguf"
printf 'GGUF\3\0\0\0' >"$dir/trunc.gguf"
expect_error "truncated" inspect --model "$dir/trunc.gguf"
[ ! -e "$dir/x.gguf" ] || fail "a failed synth left a file"
echo "synth_cli_test: ok"
