#!/usr/bin/env bash
# End-to-end test of `herd chat-template`: renderings through --template and --model (a tiny
# GGUF written here holding only a chat template and a vocabulary), --tools / --kwargs /
# --bos / --eos, the exact bytes of the output (no newline added), and the error paths: a
# template's raise_exception() exits 1 with its message on stderr.
# Usage: tests/chat_template_cli_test.sh path/to/herd
set -euo pipefail
export LC_ALL=C

herd=${1:?usage: $0 path/to/herd}
root=$(cd "$(dirname "$0")/.." && pwd)
templates=$root/../shared/chat-templates/templates
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
failures=0
checks=0

expect_eq() {  # expect_eq what expected actual
  checks=$((checks + 1))
  if [[ "$2" != "$3" ]]; then
    failures=$((failures + 1))
    printf 'FAIL %s\n  expected: %q\n  actual:   %q\n' "$1" "$2" "$3"
  fi
}

# Runs herd and captures stdout exactly (the x keeps trailing newlines), stderr and status.
run() {
  local out
  set +e
  out=$("$herd" chat-template "$@" 2>"$tmp/stderr"; echo "x$?")
  set -e
  status=${out##*x}
  stdout=${out%x*}
  stderr=$(cat "$tmp/stderr")
}

cat >"$tmp/user.json" <<'EOF'
[{"role": "user", "content": "Hello"}]
EOF
cat >"$tmp/alternating.json" <<'EOF'
[{"role": "user", "content": "Hi"}, {"role": "assistant", "content": "Yo"}, {"role": "user", "content": "Ça va ? 日本"}]
EOF
cat >"$tmp/not_alternating.json" <<'EOF'
[{"role": "user", "content": "a"}, {"role": "user", "content": "b"}]
EOF

# A real template (Gemma 2) with a generation prompt and a BOS given on the command line.
run --template "$templates/google-gemma-2-2b-it.jinja" --messages "$tmp/user.json" \
  --add-generation-prompt --bos '<bos>'
expect_eq "gemma status" 0 "$status"
expect_eq "gemma output" $'<bos><start_of_turn>user\nHello<end_of_turn>\n<start_of_turn>model\n' "$stdout"

# Mistral v0.2: BOS/EOS text, non-ASCII content passed through unchanged.
run --template "$templates/mistralai-Mistral-7B-Instruct-v0.2.jinja" --messages "$tmp/alternating.json" \
  --bos '<s>' --eos '</s>'
expect_eq "mistral status" 0 "$status"
expect_eq "mistral output" '<s>[INST] Hi [/INST]Yo</s>[INST] Ça va ? 日本 [/INST]' "$stdout"

# The template raises: exit 1, the template's message on stderr, nothing on stdout.
run --template "$templates/mistralai-Mistral-7B-Instruct-v0.2.jinja" --messages "$tmp/not_alternating.json"
expect_eq "raise status" 1 "$status"
expect_eq "raise stdout" "" "$stdout"
expect_eq "raise message" 1 \
  "$(grep -c 'Conversation roles must alternate user/assistant/user/assistant/...' <<<"$stderr" || true)"

# --tools and --kwargs reach the template as variables; tojson is Python's json.dumps.
cat >"$tmp/vars.jinja" <<'EOF'
{{ tools | tojson }}|{{ enable_thinking }}|{{ documents }}|{{ add_generation_prompt }}|{{ bos_token is defined }}
EOF
echo '[{"name": "f", "description": "São Paulo <&>"}]' >"$tmp/tools.json"
echo '{"enable_thinking": false}' >"$tmp/kwargs.json"
run --template "$tmp/vars.jinja" --messages "$tmp/user.json" --tools "$tmp/tools.json" --kwargs "$tmp/kwargs.json"
expect_eq "variables status" 0 "$status"
expect_eq "variables output" '[{"name": "f", "description": "São Paulo <&>"}]|False|None|False|False' "$stdout"

# --model: a GGUF holding tokenizer.chat_template, tokenizer.ggml.tokens and the BOS/EOS ids.
u32() {  # little-endian; the inner printf spells the bytes as \xNN escapes for the outer one
  printf "$(printf '\\x%02x\\x%02x\\x%02x\\x%02x' $(($1 & 255)) $((($1 >> 8) & 255)) \
    $((($1 >> 16) & 255)) $((($1 >> 24) & 255)))"
}
u64() { u32 "$1"; u32 0; }
gguf_string() { u64 "${#1}"; printf '%s' "$1"; }
{
  printf 'GGUF'; u32 3; u64 0; u64 4
  gguf_string tokenizer.chat_template; u32 8
  gguf_string '{{ bos_token }}{% for m in messages %}<{{ m.role }}>{{ m.content }}{% endfor %}{{ eos_token }}'
  gguf_string tokenizer.ggml.tokens; u32 9; u32 8; u64 3
  gguf_string '<unk>'; gguf_string '<BOS>'; gguf_string '<EOS>'
  gguf_string tokenizer.ggml.bos_token_id; u32 4; u32 1
  gguf_string tokenizer.ggml.eos_token_id; u32 4; u32 2
} >"$tmp/model.gguf"
run --model "$tmp/model.gguf" --messages "$tmp/user.json"
expect_eq "model status" 0 "$status"
expect_eq "model output" '<BOS><user>Hello<EOS>' "$stdout"
run --model "$tmp/model.gguf" --messages "$tmp/user.json" --eos '[END]'
expect_eq "model eos override" '<BOS><user>Hello[END]' "$stdout"

# Errors: malformed JSON, a template syntax error, neither --model nor --template.
echo '[{"role": ' >"$tmp/broken.json"
run --template "$tmp/vars.jinja" --messages "$tmp/broken.json"
expect_eq "bad json status" 1 "$status"
expect_eq "bad json message" 1 "$(grep -c 'invalid JSON' <<<"$stderr" || true)"
printf '{%% if x %%}unclosed' >"$tmp/broken.jinja"
run --template "$tmp/broken.jinja" --messages "$tmp/user.json"
expect_eq "syntax error status" 1 "$status"
expect_eq "syntax error message" 1 "$(grep -c '\[chat\] line 1' <<<"$stderr" || true)"
run --messages "$tmp/user.json"
expect_eq "no template status" 1 "$status"

echo "chat_template_cli_test: $((checks - failures))/$checks checks passed"
[[ $failures -eq 0 ]]
