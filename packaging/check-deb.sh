#!/usr/bin/env bash
# Builds tenure's Debian package from target/release/tenure (cargo-deb),
# installs it on this machine with dpkg, and checks what it installed: the
# binary runs, the unit and the sample config are in place, the system user
# exists, and a one-node server started from the installed binary as that
# user, with a config in /etc/tenure and its data in /var/lib/tenure, elects
# itself and stops cleanly on SIGTERM. Then it purges the package again.
# Needs root (dpkg). Run by .ci/run after the release build.
set -euo pipefail
cd "$(dirname "$0")/.."

cargo deb -p tenure --no-build --output target/debian/
deb=$(ls -t target/debian/tenure_*.deb | head -n 1)
echo "built $deb ($(du -h "$deb" | cut -f1))"
contents=$(dpkg-deb --contents "$deb")
for path in ./usr/bin/tenure ./lib/systemd/system/tenure@.service \
    ./usr/share/doc/tenure/examples/node.toml ./usr/share/doc/tenure/README.md; do
  grep -q " $path\$" <<<"$contents" || { echo "the package lacks $path"; exit 1; }
done

server=""
work=""
cleanup() {
  if [ -n "$server" ]; then kill -9 "$server" 2>/dev/null || true; fi
  rm -rf /etc/tenure/pkgcheck /var/lib/tenure/pkgcheck
  if [ -n "$work" ]; then rm -rf "$work"; fi
  dpkg --purge tenure >/dev/null 2>&1 || true
}
trap cleanup EXIT

dpkg -i "$deb"
/usr/bin/tenure --version
getent passwd tenure >/dev/null || { echo "no user tenure after the install"; exit 1; }
test -d /etc/tenure
if command -v systemd-analyze >/dev/null; then
  systemd-analyze verify /lib/systemd/system/tenure@.service || true
fi

# A one-node cluster from the installed paths, as the tenure user.
conf=/etc/tenure/pkgcheck
install -d -o tenure -g tenure -m 0750 "$conf"
setpriv --reuid tenure --regid tenure --init-groups /usr/bin/tenure cert --out "$conf" --nodes 1 --cluster-id pkgcheck >/dev/null
test -d /var/lib/tenure || { echo "no /var/lib/tenure after the install"; exit 1; }
install -d -o tenure -g tenure -m 0700 /var/lib/tenure/pkgcheck
read -r peer http < <(python3 -c 'import socket
s=[socket.socket() for _ in range(2)]
[x.bind(("127.0.0.1",0)) for x in s]
print(*[x.getsockname()[1] for x in s])')
cat > "$conf/node-1.toml" <<TOML
id = 1
cluster_id = "pkgcheck"
listen = "127.0.0.1:$peer"
http = "127.0.0.1:$http"
peers = ["1=127.0.0.1:$peer"]
single_node = true
data_dir = "/var/lib/tenure/pkgcheck/node-1"
tls_cert = "$conf/node-1.pem"
tls_key = "$conf/node-1-key.pem"
tls_ca = "$conf/ca.pem"
[[api_tokens]]
name = "ops"
role = "admin"
token_file = "$conf/admin.token"
TOML
chown tenure:tenure "$conf/node-1.toml"
work=$(mktemp -d)
setpriv --reuid tenure --regid tenure --init-groups /usr/bin/tenure server --config "$conf/node-1.toml" 2>"$work/server.log" &
server=$!
export TENURE_CACERT="$conf/ca.pem" TENURE_ENDPOINTS="127.0.0.1:$http"
for _ in $(seq 1 100); do
  if /usr/bin/tenure status --token-file "$conf/admin.token" --json 2>/dev/null \
      | grep -q '"role": *"leader"'; then
    echo "the installed one-node server leads"
    break
  fi
  sleep 0.1
done
/usr/bin/tenure status --token-file "$conf/admin.token"
/usr/bin/tenure status --token-file "$conf/admin.token" --json | grep -q '"role": *"leader"' || {
  echo "the installed server did not elect itself"; cat "$work/server.log"; exit 1; }
kill -TERM "$server"
wait "$server" || { echo "the server did not stop cleanly on SIGTERM"; cat "$work/server.log"; exit 1; }
server=""
echo "the installed server stopped cleanly"
