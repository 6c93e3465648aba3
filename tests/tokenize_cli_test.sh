#!/usr/bin/env bash
# End-to-end test of `herd tokenize`: the tokenizer vectors of the small models through the
# command line, the --no-bos / default special-token handling, and the error path.
# Usage: tests/tokenize_cli_test.sh path/to/herd
set -euo pipefail

herd=${1:?usage: $0 path/to/herd}
root=$(cd "$(dirname "$0")/.." && pwd)
shared=$root/../shared
failures=0
checks=0

expect_eq() {  # expect_eq what expected actual
  checks=$((checks + 1))
  if [[ "$2" != "$3" ]]; then
    failures=$((failures + 1))
    printf 'FAIL %s\n  expected: %s\n  actual:   %s\n' "$1" "$2" "$3"
  fi
}

# Every string of a .inp/.out pair (format: ../shared/vocab/README.md) through the CLI with
# no special tokens added and none parsed.
check_vectors() {  # check_vectors model.gguf file.inp file.out
  local model=$1 sep=$'\n__ggml_vocab_test__\n' data rest item i=0
  local -a inputs=() expected=()
  data=$(cat "$2"; printf x)  # the x keeps trailing newlines
  rest=${data%x}
  while [[ -n "$rest" ]]; do
    if [[ "$rest" == *"$sep"* ]]; then
      item=${rest%%"$sep"*}
      rest=${rest#*"$sep"}
    else
      item=$rest
      rest=""
    fi
    inputs+=("$item")
  done
  mapfile -t expected < "$3"
  expect_eq "$(basename "$2") count" "${#expected[@]}" "${#inputs[@]}"
  for ((i = 0; i < ${#inputs[@]}; i++)); do
    local want got
    want=$(echo ${expected[$i]})  # collapse surrounding whitespace
    got=$("$herd" tokenize --model "$model" --text "${inputs[$i]}" --no-bos --no-parse-special)
    expect_eq "$(basename "$2") string $i" "$want" "$got"
  done
}

check_vectors "$shared/models/llama-f16.gguf" "$shared/models/vocab-spm.inp" "$shared/models/vocab-spm.out"
check_vectors "$shared/models/qwen2-f32.gguf" "$shared/models/vocab-bpe.inp" "$shared/models/vocab-bpe.out"
check_vectors "$shared/vocab/ggml-vocab-llama-spm.gguf" "$shared/vocab/ggml-vocab-llama-spm.gguf.inp" \
  "$shared/vocab/ggml-vocab-llama-spm.gguf.out"

# Defaults: the model's special tokens are added (SPM: BOS 1) and special text is parsed.
expect_eq "spm --no-bos" "259 75 260 329 262 367 324 268 269" \
  "$("$herd" tokenize --model "$shared/models/llama-f16.gguf" --text "Hello world" --no-bos)"
expect_eq "spm default adds BOS" "1 259 75 260 329 262 367 324 268 269" \
  "$("$herd" tokenize --model "$shared/models/llama-f16.gguf" --text "Hello world")"
expect_eq "qwen2 parses <|im_start|>" "382" \
  "$("$herd" tokenize --model "$shared/models/qwen2-f32.gguf" --text "<|im_start|>" --no-bos)"
expect_eq "llama3 default adds BOS" "128000 9906 1917" \
  "$("$herd" tokenize --model "$shared/vocab/ggml-vocab-llama-bpe.gguf" --text "Hello world")"
# Chat markers of the frontier vocabularies are single ids (ids from the files' token
# tables; the plain words are single tokens there). gpt-oss adds no BOS; DeepSeek V3 does,
# so its check passes --no-bos to keep the BOS written in the text the only one.
expect_eq "gpt-4o harmony markers" "200006 173781 200005 17196 200008 3686 200007" \
  "$("$herd" tokenize --model "$shared/vocab/ggml-vocab-gpt-4o.gguf" \
    --text '<|start|>assistant<|channel|>final<|message|>hi<|end|>')"
bar=$'\xef\xbd\x9c' low=$'\xe2\x96\x81'  # U+FF5C and U+2581 as UTF-8, whatever the locale
expect_eq "deepseek-v3 full-width markers" "0 128803 19923 128804 23166 1" \
  "$("$herd" tokenize --model "$shared/vocab/ggml-vocab-deepseek-v3.gguf" --no-bos --text \
    "<${bar}begin${low}of${low}sentence${bar}><${bar}User${bar}>Hello<${bar}Assistant${bar}>Hi<${bar}end${low}of${low}sentence${bar}>")"
expect_eq "deepseek-v3 default adds BOS" "0 19923" \
  "$("$herd" tokenize --model "$shared/vocab/ggml-vocab-deepseek-v3.gguf" --text "Hello")"
pieces=$("$herd" tokenize --model "$shared/models/llama-f16.gguf" --text "Hello" --no-bos --pieces)
expect_eq "--pieces" $'259 75 260 329 262\n259\t\xe2\x96\x81\n75\t<0x48>\n260\te\n329\tll\n262\to' \
  "$pieces"

# A file that is not a model: exit code 1 and a message naming the problem.
checks=$((checks + 1))
if err=$("$herd" tokenize --model "$shared/vocab/README.md" --text x 2>&1); then
  failures=$((failures + 1))
  echo "FAIL: a non-GGUF file was accepted"
elif [[ "$err" != "herd: error: "* ]]; then
  failures=$((failures + 1))
  echo "FAIL: unexpected error output: $err"
fi

echo "$((checks - failures)) passed, $failures failed"
[[ $failures -eq 0 ]]
