#!/usr/bin/env bash
# herd pull, ls, rm and --model org/repo:QUANT against a stand-in for the Hugging Face hub
# (tests/hf_fixture.py): the default pick and a quant tag, split files (pulled together and
# run as one model, also on a pod), a connection cut
# mid-file and a partial file from an earlier run (both resumed with Range), a wrong hash
# refused, 429 then success, pages of a listing, HF_TOKEN sent to the hub and not to the
# CDN it redirects to, a copy found in HERD_MODEL_PATH, clear errors. About 5 s.
set -euo pipefail
herd=${1:?usage: pull_e2e_test.sh path/to/herd}
here=$(cd "$(dirname "$0")" && pwd)
source "$here/requires.sh"
require_tools python3 curl cmp
dir=$(mktemp -d)
pids=()
cleanup() {
  local pid
  for pid in "${pids[@]}"; do kill "$pid" 2>/dev/null || true; done
  for pid in "${pids[@]}"; do wait "$pid" 2>/dev/null || true; done
  rm -rf "$dir"
}
trap cleanup EXIT
fail() { echo "FAIL: $*"; exit 1; }

# The hub's repositories: a small model in two quants and a projector, and a split model.
tiny=$dir/hub/test/tiny-GGUF
mkdir -p "$tiny" "$dir/hub/test/split-GGUF/Q8_0"
"$herd" synth --arch llama --embd 256 --ff 512 --layers 2 --heads 4 --kv-heads 2 --type q8_0 \
  --out "$tiny/tiny-Q8_0.gguf" 2>/dev/null
"$herd" synth --arch llama --embd 256 --ff 512 --layers 2 --heads 4 --kv-heads 2 --type q4_k_m \
  --out "$tiny/tiny-Q4_K_M.gguf" 2>/dev/null
head -c 1000 "$tiny/tiny-Q8_0.gguf" >"$tiny/mmproj-tiny-F16.gguf"
echo "# tiny" >"$tiny/README.md"
# The split model is the Q8_0 model (the same seed: the same weights) in two files.
split_dir=$dir/hub/test/split-GGUF/Q8_0
"$herd" synth --arch llama --embd 256 --ff 512 --layers 2 --heads 4 --kv-heads 2 --type q8_0 \
  --split 2 --out "$split_dir/big-Q8_0.gguf" 2>/dev/null
[ -f "$split_dir/big-Q8_0-00002-of-00002.gguf" ] && [ ! -e "$split_dir/big-Q8_0.gguf" ] ||
  fail "synth --split 2 wrote: $(ls "$split_dir")"
size_q8=$(wc -c <"$tiny/tiny-Q8_0.gguf")
[ "$size_q8" -gt 600000 ] || fail "the synthesized model is smaller than the test assumes ($size_q8)"

python3 "$here/hf_fixture.py" --root "$dir/hub" --log "$dir/log" --port-file "$dir/port" &
pids+=($!)
for _ in $(seq 100); do [ -s "$dir/port" ] && break; sleep 0.05; done
[ -s "$dir/port" ] || fail "the hub fixture did not start"
port=$(cat "$dir/port")
hub=http://127.0.0.1:$port
export HF_ENDPOINT=$hub HERD_MODELS_DIR=$dir/store
export XDG_CACHE_HOME=$dir/cache XDG_CONFIG_HOME=$dir/config  # never the user's
unset HF_TOKEN HERD_MODEL_PATH XDG_DATA_HOME
store=$dir/store/test/tiny-GGUF

control() { curl -sf -X POST --data "$1" "$hub/_control" >/dev/null; : >"$dir/log"; }
log_has() { grep -q "$1" "$dir/log" || fail "${2:-log}: no '$1' in the hub's log: $(cat "$dir/log")"; }
expect_error() {  # expect_error <needle> <args...>
  local needle=$1; shift
  set +e
  err=$("$herd" "$@" 2>&1 >/dev/null)
  code=$?
  set -e
  [ "$code" -eq 1 ] || fail "herd $* exited $code, expected 1: $err"
  grep -q "herd: error:" <<<"$err" || fail "herd $*: no 'herd: error:' in: $err"
  grep -qF -- "$needle" <<<"$err" || fail "herd $*: expected '$needle' in: $err"
}
no_partials() { ! find "$dir/store" -name '*.partial' 2>/dev/null | grep -q . || fail "$1: a .partial file is left"; }

# 1. The default pick is Q4_K_M (not the projector); stdout is the path; identical bytes.
control '{}'
out=$("$herd" pull test/tiny-GGUF 2>"$dir/err")
[ "$out" = "$store/tiny-Q4_K_M.gguf" ] || fail "pull printed '$out'"
cmp -s "$store/tiny-Q4_K_M.gguf" "$tiny/tiny-Q4_K_M.gguf" || fail "pull: the bytes differ"
[ ! -e "$store/mmproj-tiny-F16.gguf" ] || fail "pull fetched the projector"
no_partials "pull"
# Non-terminal progress: plain lines, the last at 100%.
grep -q "herd: pull tiny-Q4_K_M.gguf: 100%" "$dir/err" || fail "no progress lines: $(cat "$dir/err")"
# Pulled again: nothing downloaded.
control '{}'
"$herd" pull test/tiny-GGUF 2>"$dir/err" >/dev/null
! grep -q cdn "$dir/log" || fail "a second pull downloaded again"
grep -q "already at" "$dir/err" || fail "a second pull did not say the model is there"

# 2. A quant tag, case-insensitive, with the connection cut mid-file: resumed with a Range.
control '{"cut": {"tiny-Q8_0.gguf": 250000}}'
out=$("$herd" pull test/tiny-GGUF:q8_0 2>"$dir/err")
[ "$out" = "$store/tiny-Q8_0.gguf" ] || fail "pull :q8_0 printed '$out'"
cmp -s "$out" "$tiny/tiny-Q8_0.gguf" || fail "resumed download: the bytes differ"
log_has '"range": "bytes=250000-"' "cut connection"
grep -q "resuming at" "$dir/err" || fail "the cut was not reported: $(cat "$dir/err")"
no_partials "resume"

# 3. A partial file from an earlier run: only the rest is fetched.
rm "$store/tiny-Q8_0.gguf"
head -c 400000 "$tiny/tiny-Q8_0.gguf" >"$store/tiny-Q8_0.gguf.partial"
control '{}'
"$herd" pull test/tiny-GGUF:Q8_0 >/dev/null 2>&1 || fail "pull after an interrupted run"
log_has '"range": "bytes=400000-"' "earlier partial file"
cmp -s "$store/tiny-Q8_0.gguf" "$tiny/tiny-Q8_0.gguf" || fail "resumed partial: the bytes differ"

# 4. A wrong hash: refused, nothing under the final name, the bad data deleted.
"$herd" rm test/tiny-GGUF:Q8_0 2>/dev/null
control '{"wrong_hash": ["tiny-Q8_0.gguf"]}'
expect_error "SHA-256" pull test/tiny-GGUF:Q8_0
grep -qF "the downloaded data was deleted" <<<"$err" || fail "wrong hash: $err"
[ ! -e "$store/tiny-Q8_0.gguf" ] || fail "a file with the wrong hash was stored"
no_partials "wrong hash"

# 5. 429 with Retry-After, then success; the listing in pages.
control '{"busy": 1, "page_size": 2}'
"$herd" pull test/tiny-GGUF:Q8_0 >/dev/null 2>"$dir/err" || fail "pull after 429: $(cat "$dir/err")"
grep -q "HTTP 429.* in 1 s" "$dir/err" || fail "the 429 was not reported: $(cat "$dir/err")"
log_has '"status": 429' "429"
log_has 'cursor=2' "pages"
cmp -s "$store/tiny-Q8_0.gguf" "$tiny/tiny-Q8_0.gguf" || fail "after 429: the bytes differ"

# 6. Split files come together, in their folder.
control '{}'
out=$("$herd" pull test/split-GGUF:Q8_0 2>/dev/null)
[ "$out" = "$dir/store/test/split-GGUF/Q8_0/big-Q8_0-00001-of-00002.gguf" ] || fail "split printed '$out'"
for part in big-Q8_0-0000{1,2}-of-00002.gguf; do
  cmp -s "$dir/store/test/split-GGUF/Q8_0/$part" "$split_dir/$part" || fail "split: $part differs"
done

# 7. ls and rm.
out=$("$herd" ls)
grep -q "^test/tiny-GGUF *Q4_K_M .*$store/tiny-Q4_K_M.gguf$" <<<"$out" || fail "ls: $out"
grep -q "^test/tiny-GGUF *Q8_0 " <<<"$out" || fail "ls Q8_0: $out"
grep -q "^test/split-GGUF *Q8_0 .*/2 " <<<"$out" || fail "ls split: $out"
"$herd" rm test/split-GGUF 2>/dev/null
[ ! -e "$dir/store/test/split-GGUF" ] || fail "rm left the split model's folder"
! "$herd" ls | grep -q split || fail "ls after rm"
expect_error "not in the store" rm test/split-GGUF

# 8. --model org/repo:QUANT: from the store, and pulled when missing.
control '{}'
"$herd" run --model test/tiny-GGUF:Q4_K_M -t 1 -p hello -n 2 --temp 0 >/dev/null 2>"$dir/err" ||
  fail "run --model test/tiny-GGUF:Q4_K_M: $(cat "$dir/err")"
! grep -q pulling "$dir/err" || fail "run pulled a model the store has"
[ ! -s "$dir/log" ] || fail "run asked the hub for a model the store has: $(cat "$dir/log")"
"$herd" rm test/tiny-GGUF:q8_0 2>/dev/null
"$herd" run --model test/tiny-GGUF:Q8_0 -t 1 -p hello -n 2 --temp 0 >/dev/null 2>"$dir/err" ||
  fail "run pulling the model: $(cat "$dir/err")"
grep -q "test/tiny-GGUF:Q8_0 is not in the store .*: pulling it" "$dir/err" || fail "run: $(cat "$dir/err")"
[ -f "$store/tiny-Q8_0.gguf" ] || fail "run did not pull into the store"
"$herd" inspect --model test/tiny-GGUF:Q8_0 | grep -q 'general.architecture *"llama"' || fail "inspect by name"
expect_error "cannot open" inspect --model "$dir/missing.gguf"

# 9. HF_TOKEN: refused without, sent with; not to the CDN on another host.
control '{"token": "s3cret"}'
expect_error "HF_TOKEN" pull test/tiny-GGUF:Q8_0 --models-dir "$dir/store2"
control '{"token": "s3cret"}'
HF_TOKEN=s3cret "$herd" pull test/tiny-GGUF:Q8_0 --models-dir "$dir/store2" >/dev/null 2>&1 ||
  fail "pull with HF_TOKEN"
log_has '"path": "/api/models/test/tiny-GGUF/tree/main?recursive=true", "status": 200, "range": "", "authorization": "Bearer s3cret"' "token"
grep '/cdn/' "$dir/log" | grep -q '"authorization": ""' || fail "the CDN got the token: $(cat "$dir/log")"
! grep '/cdn/' "$dir/log" | grep -q s3cret || fail "the CDN got the token"

# 10. A copy in HERD_MODEL_PATH (matched by file name): used, nothing downloaded.
mkdir -p "$dir/nas"
cp "$tiny/tiny-Q8_0.gguf" "$dir/nas/"
control '{}'
out=$(HERD_MODEL_PATH=$dir/nas "$herd" pull test/tiny-GGUF:Q8_0 --models-dir "$dir/store3" 2>/dev/null)
[ "$out" = "$dir/nas/tiny-Q8_0.gguf" ] || fail "HERD_MODEL_PATH: pull printed '$out'"
! grep -q cdn "$dir/log" || fail "HERD_MODEL_PATH: downloaded anyway"

# 11. Errors: a missing repository, a missing quant (with the choices).
control '{}'
expect_error "no repository test/nope" pull test/nope
expect_error "has no Q2_K model; available: Q4_K_M" pull test/tiny-GGUF:Q2_K
expect_error "is not a model name" pull not-a-name

# 11b. A split model runs, by name and from any of its files, as the one file it was cut
# from; one of its files missing is a clear error.
"$herd" pull test/split-GGUF:Q8_0 >/dev/null 2>&1
want=$("$herd" run --model "$tiny/tiny-Q8_0.gguf" -t 1 -p hello -n 4 --temp 0 2>/dev/null)
[ -n "$want" ] || fail "run of the one-file model printed nothing"
got=$("$herd" run --model test/split-GGUF:Q8_0 -t 1 -p hello -n 4 --temp 0 2>"$dir/err") ||
  fail "run --model test/split-GGUF:Q8_0: $(cat "$dir/err")"
[ "$got" = "$want" ] || fail "the split model said '$got', the one file '$want'"
split_store=$dir/store/test/split-GGUF/Q8_0
got=$("$herd" run --model "$split_store/big-Q8_0-00002-of-00002.gguf" -t 1 -p hello -n 4 --temp 0 \
  2>/dev/null) || fail "run from the split model's second file"
[ "$got" = "$want" ] || fail "from its second file the split model said '$got'"
"$herd" inspect --model test/split-GGUF:Q8_0 | grep -q "split in 2 files" || fail "inspect of a split model"
mv "$split_store/big-Q8_0-00002-of-00002.gguf" "$dir/part2"
expect_error "missing: file 2 of the 2 of the split model" run --model \
  "$split_store/big-Q8_0-00001-of-00002.gguf" -p hi -n 1
mv "$dir/part2" "$split_store/big-Q8_0-00002-of-00002.gguf"

# 12. A pod of three: the coordinator pulls the model once. Node n1 holds the model in its
# own store (another folder than the coordinator's) and maps that copy, found by the name
# LOAD gives and checked by its content hash; n2 (a store of its own, empty, and no use of
# the coordinator's file) is sent only its layers' tensors. The output is one process's.
own_copy=$dir/store-n1/test/tiny-GGUF/tiny-Q8_0.gguf
mkdir -p "$(dirname "$own_copy")"
cp "$tiny/tiny-Q8_0.gguf" "$own_copy"
for n in n1 n2; do
  flags=()
  [ "$n" = n2 ] && flags=(--no-model-files)
  HERD_MODELS_DIR=$dir/store-$n "$herd" node --listen 127.0.0.1:0 --threads 1 --name "$n" \
    "${flags[@]}" --cache-dir "$dir/cache-$n" --bandwidth 10 --matmul 10 --no-advertise \
    2>"$dir/$n.log" &
  pids+=($!)
done
peers=
for n in n1 n2; do
  line=
  for _ in $(seq 200); do
    line=$(grep -o "listening on 127\.0\.0\.1:[0-9]*" "$dir/$n.log" || true)
    [ -n "$line" ] && break
    sleep 0.05
  done
  [ -n "$line" ] || fail "node $n did not start: $(cat "$dir/$n.log")"
  peers+=${peers:+,}${line#listening on }
done
control '{}'
got=$(HERD_MODELS_DIR=$dir/store-pod "$herd" run --model test/tiny-GGUF:Q8_0 --peers "$peers" \
  --no-local --parallel pipeline:2 -t 1 -p hello -n 4 --temp 0 2>"$dir/err") ||
  fail "run on a pod: $(cat "$dir/err")"
[ "$got" = "$want" ] || fail "the pod said '$got', one process '$want'"
[ "$(grep -c '"path": "/cdn/' "$dir/log")" -eq 1 ] || fail "the pod downloaded more than once: $(cat "$dir/log")"
grep -q "loaded layers .* from this node's store ($own_copy)" "$dir/n1.log" ||
  fail "node n1 did not map its own copy: $(cat "$dir/n1.log")"
! grep -q "received .* MB" "$dir/n1.log" || fail "node n1 was sent tensors: $(cat "$dir/n1.log")"
grep -q "received .* MB" "$dir/n2.log" || fail "node n2 was not sent its tensors: $(cat "$dir/n2.log")"
[ "$(find "$dir/store-n1" -type f)" = "$own_copy" ] || fail "node n1 pulled: $(find "$dir/store-n1")"
[ ! -e "$dir/store-n2" ] || fail "node n2 pulled the model"
# herd serve resolves the name itself (its API's model id) and still tells the nodes it.
own_loads=$(grep -c "from this node's store" "$dir/n1.log")
HERD_MODELS_DIR=$dir/store-pod "$herd" serve --model test/tiny-GGUF:Q8_0 --peers "$peers" \
  --no-local --parallel pipeline:2 -t 1 --host 127.0.0.1 --port 0 2>"$dir/serve.log" &
serve_pid=$!
pids+=($serve_pid)
for _ in $(seq 400); do
  grep -q "^serve: ready" "$dir/serve.log" && break
  kill -0 "$serve_pid" 2>/dev/null || fail "serve on a pod exited: $(cat "$dir/serve.log")"
  sleep 0.05
done
grep -q "^serve: ready" "$dir/serve.log" || fail "serve on a pod did not start: $(cat "$dir/serve.log")"
[ "$(grep -c "from this node's store" "$dir/n1.log")" -gt "$own_loads" ] ||
  fail "node n1 did not map its own copy for serve: $(cat "$dir/n1.log")"
kill -TERM "$serve_pid"
wait "$serve_pid" || fail "serve on a pod exited badly after SIGTERM: $(cat "$dir/serve.log")"
# The split model on the same pod: n2 is sent its tensors from its two files.
before=$(grep -c "received .* MB" "$dir/n2.log")
"$herd" run --model test/split-GGUF:Q8_0 --peers "$peers" --no-local --parallel pipeline:2 -t 1 \
  -p hello -n 2 --temp 0 >/dev/null 2>"$dir/err" || fail "split model on a pod: $(cat "$dir/err")"
[ "$(grep -c "received .* MB" "$dir/n2.log")" -gt "$before" ] ||
  fail "node n2 was not sent the split model: $(cat "$dir/n2.log")"
echo "pull_e2e_test: ok"
