#!/usr/bin/env bash
# The hub's keys against a curious client (issue 28): a real `herd hub` whose client and
# operator keys come from private files, never its command line; GET /api/ledger refused
# without the operator key (401) and with a client key (403), except a client's own
# account's history; one client cannot read another's; account names are HMACs under the
# hub's secret (created 0600), so no one finds an account from a key alone; key files every
# user may read, empty ones, and a shared database without a secret file are refused.
set -euo pipefail
herd=$(realpath "${1:?usage: hostile_hub_keys_test.sh path/to/herd}")
here=$(cd "$(dirname "$0")" && pwd)
source "$here/hub_lib.sh"
hub_lib_init

# keys FILE KEY...: a private key file, with a comment and a blank line.
keys() {
  local file=$1
  shift
  { echo "# keys for the test"; echo; printf '%s\n' "$@"; } >"$file"
  chmod 600 "$file"
}
keys "$dir/clients" client-a client-b
keys "$dir/operators" operator-1
# status PATH [KEY]: the status of GET PATH; its body lands in $dir/body.
status() {
  local auth=()
  [ $# -lt 2 ] || auth=(-H "Authorization: Bearer $2")
  curl -s -o "$dir/body" -w '%{http_code}' "${auth[@]}" "$hub_url$1"
}
js() { node -e "const j = JSON.parse(require('fs').readFileSync('$dir/body', 'utf8')); console.log($1)"; }

hub_start hub --db "$dir/hub.db" --secret-file "$dir/hub.secret" --api-key-file "$dir/clients" \
  --operator-key-file "$dir/operators" --credits 5000
grep -q "(2 API keys)" "$dir/hub.log" || fail "the hub did not count the file's keys"
grep -q "1 operator key;" "$dir/hub.log" || fail "the hub did not count its operator key"
# No key on the command line (/proc/PID/cmdline where there is one).
if [ -r "/proc/$hub_pid/cmdline" ]; then args=$(tr '\0' ' ' <"/proc/$hub_pid/cmdline"); else
  args=$(ps -ww -o args= -p "$hub_pid"); fi
[ -n "$args" ] || fail "no command line read"
for key in client-a client-b operator-1; do
  case "$args" in *"$key"*) fail "key $key is on the hub's command line: $args" ;; esac
done
# The secret: created private, in the file format.
[ "$(stat -c %a "$dir/hub.secret" 2>/dev/null || stat -f %Lp "$dir/hub.secret")" = 600 ] ||
  fail "the secret file is not mode 600"
secret=$(sed -n 's/^herd-hub-secret-v1 \([0-9a-f]\{64\}\)$/\1/p' "$dir/hub.secret")
[ -n "$secret" ] || fail "no secret in $(cat "$dir/hub.secret")"

# Clients use their keys; an operator key is not a client's.
[ "$(status /v1/models client-a)" = 200 ] || fail "client-a: /v1/models $(cat "$dir/body")"
[ "$(status /v1/models operator-1)" = 401 ] || fail "the operator key passed as a client's"

# The ledger: nobody's without a key or with a wrong one; the whole of it the operator's.
[ "$(status /api/ledger)" = 401 ] || fail "/api/ledger without a key: $(cat "$dir/body")"
[ "$(status /api/ledger operator-2)" = 401 ] || fail "/api/ledger with a wrong key"
[ "$(status /api/ledger operator-1)" = 200 ] || fail "/api/ledger for the operator: $(cat "$dir/body")"
[ "$(js 'j.sum')" = 0 ] || fail "the ledger does not sum to 0: $(cat "$dir/body")"
accounts=$(js "Object.keys(j.balances).filter((a) => a.startsWith('client:')).sort().join(' ')")
[ "$(echo "$accounts" | wc -w)" = 2 ] || fail "client accounts: $accounts"
# A client key: 403, the message naming the client's own account (and so the test learns it).
[ "$(status /api/ledger client-a)" = 403 ] || fail "/api/ledger with a client key: $(cat "$dir/body")"
account_a=$(grep -o 'client:[0-9a-f]\{32\}' "$dir/body" | head -1)
[ "$(status /api/ledger client-b)" = 403 ] || fail "/api/ledger with client-b's key"
account_b=$(grep -o 'client:[0-9a-f]\{32\}' "$dir/body" | head -1)
[ -n "$account_a" ] && [ -n "$account_b" ] && [ "$account_a" != "$account_b" ] ||
  fail "accounts '$account_a' '$account_b'"
[ "$accounts" = "$(printf '%s\n' "$account_a" "$account_b" | sort | tr '\n' ' ' | sed 's/ $//')" ] ||
  fail "the 403s named '$account_a' '$account_b', the ledger has $accounts"
# Its own history: its grant. Another client's, or a hub account: refused.
[ "$(status "/api/ledger?account=$account_a" client-a)" = 200 ] || fail "own history: $(cat "$dir/body")"
[ "$(js 'j.history.length + " " + j.history[0].amount')" = "1 5000" ] || fail "history: $(cat "$dir/body")"
[ "$(status "/api/ledger?account=$account_b" client-a)" = 403 ] || fail "client-a read client-b's history"
grep -q "$account_b" "$dir/body" && fail "the refusal names the other client's account"
[ "$(status "/api/ledger?account=$account_a" client-b)" = 403 ] || fail "client-b read client-a's history"
[ "$(status "/api/ledger?account=fee" client-a)" = 403 ] || fail "a client read the fee account"
[ "$(status "/api/ledger?account=$account_a")" = 401 ] || fail "a history read without a key"
[ "$(status "/api/ledger?account=$account_b" operator-1)" = 200 ] || fail "the operator's history read"

# The names are HMAC-SHA256(secret, key), not a hash anyone holding the key can compute.
node - "$secret" "$account_a" <<'JS' || fail "the account name is not the key's HMAC under the secret"
const crypto = require('crypto');
const [secret, account] = process.argv.slice(2);
const hmac = crypto.createHmac('sha256', Buffer.from(secret, 'hex')).update('client-a').digest('hex');
if (account !== 'client:' + hmac.slice(0, 32)) throw new Error(`${account} is not the HMAC ${hmac}`);
for (const name of ['sha256', 'sha512', 'blake2b512', 'md5']) {
  const hash = crypto.createHash(name).update('client-a').digest('hex');
  if (account.includes(hash.slice(0, 32))) throw new Error(`${account} is ${name} of the key`);
}
JS
kill "$hub_pid"
wait "$hub_pid" 2>/dev/null || true

# The same keys under another secret: other account names (granted anew).
keys "$dir/clients-a" client-a
hub_start other --db "$dir/other.db" --secret-file "$dir/other.secret" --api-key-file "$dir/clients-a" \
  --operator-key-file "$dir/operators"
[ "$(status /api/ledger client-a)" = 403 ] || fail "the second hub's 403"
other_a=$(grep -o 'client:[0-9a-f]\{32\}' "$dir/body" | head -1)
[ -n "$other_a" ] && [ "$other_a" != "$account_a" ] || fail "one key, one name under two secrets"
kill "$hub_pid"
wait "$hub_pid" 2>/dev/null || true

# Refused at start: key files others may read or that hold no key; replicas on a shared
# database with no secret file named (each would name accounts its own way).
refused() {  # refused MESSAGE ARGS...: `herd hub ARGS` exits non-zero saying MESSAGE
  local message=$1
  shift
  if "$herd" hub --port 0 "$@" 2>"$dir/refused.log"; then
    fail "herd hub $* started"
  fi
  grep -q "$message" "$dir/refused.log" || fail "herd hub $*: $(cat "$dir/refused.log")"
}
cp "$dir/clients" "$dir/open-clients"
chmod 644 "$dir/open-clients"
refused "readable by every user" --db "$dir/refused.db" --api-key-file "$dir/open-clients"
keys "$dir/empty"
refused "holds no key" --db "$dir/refused.db" --operator-key-file "$dir/empty"
refused "cannot be read" --db "$dir/refused.db" --api-key-file "$dir/missing"
refused "needs --secret-file" --db postgresql://127.0.0.1:1/herd --api-key-file "$dir/clients"
echo PASS
