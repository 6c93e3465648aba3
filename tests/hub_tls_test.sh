#!/usr/bin/env bash
# herd hub over TLS with a self-signed certificate, and its rate limit per key: the hub
# answers HTTPS to a client that trusts the certificate and not to one that does not (nor
# to plain HTTP); a `herd serve` pod registers over HTTPS trusting it (--hub-ca) and answers
# through it; a key's requests beyond --rate-limit get 429 with Retry-After while another
# key's still pass; a missing or wrong certificate stops the hub with a message.
set -euo pipefail
herd=$(realpath "${1:?usage: hub_tls_test.sh path/to/herd}")
source "$(dirname "$0")/hub_lib.sh"
hub_lib_init
command -v openssl >/dev/null || fail "no openssl: run scripts/install-deps"

openssl req -x509 -newkey rsa:2048 -nodes -days 2 -subj "/CN=herd test hub" \
  -addext "subjectAltName=IP:127.0.0.1" -keyout "$dir/key.pem" -out "$dir/cert.pem" \
  2>/dev/null || fail "openssl could not make a certificate"

# A certificate that does not fit: a clear error, no hub.
code=0
"$herd" hub --port 0 --tls-cert "$dir/cert.pem" --tls-key "$dir/cert.pem" 2>"$dir/bad.txt" || code=$?
[ "$code" -ne 0 ] && grep -q "TLS: cannot serve with certificate" "$dir/bad.txt" ||
  fail "a key that is not one was accepted: $(cat "$dir/bad.txt")"

hub_start hub --tls-cert "$dir/cert.pem" --tls-key "$dir/key.pem" --api-key k1 --api-key k2 \
  --rate-limit 3 --heartbeat 1 --pod-timeout 5
url=$hub_url
[[ $url == https://* ]] || fail "the hub did not say it listens on https: $url"

status() { curl -s -o "$dir/body" -w '%{http_code}' "$@" || true; }
[ "$(status --cacert "$dir/cert.pem" "$url/health")" = 200 ] || fail "/health over https"
[ "$(status "$url/health")" = 000 ] || fail "a client that does not trust the certificate got in"
[ "$(status "${url/https/http}/health")" != 200 ] || fail "plain http answered"

# A pod registers over https, trusting the hub's certificate.
synth_model "$dir/m.gguf"
pod_start serve "$dir/m.gguf" --alias tls-model --threads 1 --hub "$url" --hub-ca "$dir/cert.pem" \
  --hub-name tls-pod
wait_registered serve "$url"

ask() {
  status --cacert "$dir/cert.pem" -H "Authorization: Bearer $1" -H 'Content-Type: application/json' \
    -D "$dir/headers" -d '{"model": "tls-model", "prompt": "Hello", "max_tokens": 4, "temperature": 0}' \
    "$url/v1/completions"
}
for i in 1 2 3; do
  [ "$(ask k1)" = 200 ] || fail "request $i with k1: $(cat "$dir/body")"
done
[ "$(ask k1)" = 429 ] || fail "k1's fourth request within the minute was not limited: $(cat "$dir/body")"
grep -qi "^retry-after: [0-9]" "$dir/headers" || fail "429 without Retry-After: $(cat "$dir/headers")"
grep -q "too many requests for this key" "$dir/body" || fail "429 body: $(cat "$dir/body")"
[ "$(ask k2)" = 200 ] || fail "another key was limited too: $(cat "$dir/body")"
echo PASS
