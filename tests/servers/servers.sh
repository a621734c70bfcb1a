# Shell helpers to run the emulators of tests/servers from a script (the demo, benchmarks). Source
# it, then:
#   start_test_server NAME ARGS...   starts `node tests/servers/launch.mjs ARGS...`, waits for
#                                    "READY <port>" and sets $port; not in a subshell, as the
#                                    descriptor that keeps the launcher's stdin open must live as
#                                    long as the calling script
#   stop_test_servers                stops them all (also run on EXIT)
#   azurite_connection_string PORT   the connection string of Azurite's development account
# Run from the repository root.
test_servers_dir=$(mktemp -d)
stop_test_servers() {
  for p in "$test_servers_dir"/*.pid; do [ -f "$p" ] && kill "$(cat "$p")" 2>/dev/null || true; done
  rm -rf "$test_servers_dir"
}
trap stop_test_servers EXIT
start_test_server() {
  local name=$1 hold
  shift
  mkfifo "$test_servers_dir/$name.in"
  node tests/servers/launch.mjs "$@" <"$test_servers_dir/$name.in" >"$test_servers_dir/$name.out" \
    2>"$test_servers_dir/$name.err" &
  echo $! >"$test_servers_dir/$name.pid"
  exec {hold}>"$test_servers_dir/$name.in"
  for _ in $(seq 1 300); do
    grep -q '^READY' "$test_servers_dir/$name.out" 2>/dev/null && break
    sleep 0.1
  done
  if ! grep -q '^READY' "$test_servers_dir/$name.out"; then
    cat "$test_servers_dir/$name.err" >&2
    echo "$name did not start" >&2
    return 1
  fi
  port=$(awk '/^READY/ {print $2}' "$test_servers_dir/$name.out")
}
azurite_connection_string() {
  # Azurite's published development account key (not a secret).
  echo "DefaultEndpointsProtocol=http;AccountName=devstoreaccount1;AccountKey=Eby8vdM02xNOcqFlqUwJPLlmEtlCDXJ1OUzFT50uSRZ6IFsuFq2UVErCz4I6tq/K1SZFPTOtr/KBHBeksoGMGw==;BlobEndpoint=http://127.0.0.1:$1/devstoreaccount1;"
}
