#!/usr/bin/env bash
# Tool calls and reasoning of DeepSeek V3.1, V3.2 and V4, Kimi K2, gpt-oss (harmony), Qwen3.5,
# GLM-4.7 and Gemma 4 through the openai client (tests/node/formats_test.mjs): per format, a
# small synthetic qwen3 model carrying the family's chat template and vocabulary, served on a
# free port.
set -euo pipefail
herd=${1:?usage: serve_formats_test.sh path/to/herd [deepseek|deepseek-v3.2|deepseek-v4|kimi|gpt-oss|qwen3.5|glm-4.7|gemma4 ...]}
herd=$(realpath "$herd")
shift
formats=(deepseek deepseek-v3.2 deepseek-v4 kimi gpt-oss qwen3.5 glm-4.7 gemma4)
[ $# -eq 0 ] || formats=("$@")
here=$(cd "$(dirname "$0")" && pwd)
[ -d "$here/node/node_modules/openai" ] ||
  { echo "FAIL: tests/node has no node_modules: run scripts/install-deps"; exit 1; }
dir=$(mktemp -d)
source "$here/serve_lib.sh"
trap 'serve_cleanup; rm -rf "$dir"' EXIT
templates=../shared/chat-templates/templates
for format in "${formats[@]}"; do
  case $format in
    # The DeepSeek V3 vocabulary carries V3's template; V3.1's writes calls another way.
    deepseek) vocab=(--vocab ../shared/vocab/ggml-vocab-deepseek-v3.gguf)
              template=$templates/deepseek-ai-DeepSeek-V3.1.jinja ;;
    deepseek-v3.2) vocab=(--vocab ../shared/vocab/ggml-vocab-deepseek-v3.gguf)
                   template=$templates/deepseek-ai-DeepSeek-V3.2.jinja ;;
    deepseek-v4) vocab=(--vocab ../shared/vocab/ggml-vocab-deepseek-v3.gguf)
                 template=$templates/deepseek-ai-DeepSeek-V4.jinja ;;
    # No Kimi, Qwen3.5, GLM or Gemma 4 vocabulary is at hand: herd's byte-level one (ChatML's, <think>
    # and <tool_call> markers its tokens), other markers as plain text.
    kimi) vocab=() template=$templates/moonshotai-Kimi-K2.jinja ;;
    qwen3.5) vocab=() template=$templates/Qwen3.5-4B.jinja ;;
    glm-4.7) vocab=() template=$templates/zai-org-GLM-4.7-Flash.jinja ;;
    gemma4) vocab=() template=$templates/google-gemma-4-31B-it.jinja ;;
    # gpt-oss's template is in src/server/testdata (its vocabulary carries none). Its
    # vocabulary needs the o200k pre-tokenizer: where the tokenizer lacks it, herd's
    # byte-level vocabulary, the markers as plain text.
    gpt-oss) vocab=()
             o200k=../shared/vocab/ggml-vocab-gpt-4o.gguf
             if "$herd" tokenize -m "$o200k" -t hi >/dev/null 2>&1; then vocab=(--vocab "$o200k"); fi
             echo "gpt-oss vocabulary: ${vocab[1]:-the built-in byte-level one}"
             template=src/server/testdata/openai-gpt-oss-120b.jinja ;;
    *) fail "unknown format $format" ;;
  esac
  model=$dir/$format.gguf
  "$herd" synth --arch qwen3 "${vocab[@]}" --chat-template "$template" --embd 128 --layers 1 \
    --heads 4 --kv-heads 2 --type q4_0 --out "$model" >/dev/null 2>&1 || fail "synth $format"
  serve_start --api-key test-key --slots 2
  HERD_FORMAT=$format HERD_URL=$url node "$here/node/formats_test.mjs" || fail "formats_test.mjs $format"
  serve_stop
done
