#!/bin/bash
# Boot-time preparation of one ptc cluster node (CloudLab and the local testbed alike).
#
#   sudo bash /local/repository/profiles/startup.sh ROLE [ROLES]
#
# ROLE is "head" or "compute"; ROLES the comma-separated Ansible roles this node takes.
# Runs as root at every boot, so every step is idempotent. It does NOT run the playbooks:
# that stays a separate, deliberate user step (ptc deploy), as in the Chef-Cluster profile.
#
#  1. SSH key mesh: `geni-get key` is the experiment's private key, identical on every node;
#     install it for root, derive its public key and authorise it, so the head (and Ansible
#     running there) can reach every node as root.
#  2. Record the node's role(s) in /etc/ptc/role and /etc/ptc/roles, and the parameters the
#     playbooks need in /etc/ptc/params.env.
#  3. Map the experiment LAN names (from `geni-get manifest`) in /etc/hosts.
#  4. Announce readiness: /etc/motd line, /var/lib/ptc/startup.done, wall.
#
# PTC_ROOT (default empty) prefixes every path written, so tests can run this in a sandbox.
set -euo pipefail

ROOT="${PTC_ROOT:-}"
LOG="$ROOT/var/log/ptc-startup.log"
mkdir -p "$(dirname "$LOG")"
exec >>"$LOG" 2>&1
echo "=== ptc startup $(date -u +%Y-%m-%dT%H:%M:%SZ) args: $* ==="

ROLE="${1:-}"
ROLES="${2:-}"
case "$ROLE" in
  head | compute) ;;
  *)
    echo "usage: startup.sh head|compute [ROLE,ROLE...] (got role '${ROLE}')" >&2
    exit 2
    ;;
esac

GENI_GET="${GENI_GET:-geni-get}"
SSH_DIR="$ROOT/root/.ssh"
PTC_ETC="$ROOT/etc/ptc"
STATE="$ROOT/var/lib/ptc"

install_key_mesh() {
  local tmp pub keytype keyfile
  tmp="$(mktemp)"
  # The private key must never be world-readable, not even briefly.
  chmod 600 "$tmp"
  if ! "$GENI_GET" key >"$tmp" || ! grep -q "PRIVATE KEY" "$tmp"; then
    rm -f "$tmp"
    echo "geni-get key returned no private key; cannot build the SSH key mesh" >&2
    return 1
  fi
  # Keep only "type base64": the comment ssh-keygen prints varies between key formats.
  pub="$(ssh-keygen -y -f "$tmp" | awk '{print $1" "$2}')"
  keytype="${pub%% *}"
  case "$keytype" in
    ssh-ed25519) keyfile=id_ed25519 ;;
    ssh-rsa) keyfile=id_rsa ;;
    ecdsa-sha2-*) keyfile=id_ecdsa ;;
    *) keyfile=id_ptc ;;
  esac
  mkdir -p "$SSH_DIR"
  chmod 700 "$SSH_DIR"
  install -m 600 "$tmp" "$SSH_DIR/$keyfile"
  rm -f "$tmp"
  printf '%s ptc-experiment-key\n' "$pub" >"$SSH_DIR/$keyfile.pub"
  chmod 644 "$SSH_DIR/$keyfile.pub"
  touch "$SSH_DIR/authorized_keys"
  chmod 600 "$SSH_DIR/authorized_keys"
  # Compare on the key material only, so a changed comment does not add a second copy.
  if ! grep -qF "${pub#* }" "$SSH_DIR/authorized_keys"; then
    printf '%s ptc-experiment-key\n' "$pub" >>"$SSH_DIR/authorized_keys"
  fi
  # Nodes are reborn with new host keys on every experiment: do not pin them.
  mkdir -p "$SSH_DIR"
  if ! grep -q "# ptc experiment nodes" "$SSH_DIR/config" 2>/dev/null; then
    cat >>"$SSH_DIR/config" <<'EOF'
# ptc experiment nodes
Host head node-* 10.10.*
    StrictHostKeyChecking accept-new
    UserKnownHostsFile /root/.ssh/known_hosts.ptc
EOF
    chmod 600 "$SSH_DIR/config"
  fi
  echo "installed experiment key $SSH_DIR/$keyfile ($keytype)"
}

shell_quote() {
  # Single-quoted, so the file can be sourced by sh and read by simple KEY='value' parsers.
  printf "'%s'" "${1//\'/\'\\\'\'}"
}

param() {
  # Missing parameters (older profiles, testbeds without them) are not fatal.
  "$GENI_GET" param "$1" 2>/dev/null || true
}

record_role() {
  mkdir -p "$PTC_ETC"
  printf '%s\n' "$ROLE" >"$PTC_ETC/role"
  printf '%s\n' "${ROLES//,/$'\n'}" | sed '/^$/d' >"$PTC_ETC/roles"
  local client_id
  client_id="$("$GENI_GET" client_id 2>/dev/null || hostname -s)"
  {
    printf 'PTC_CLIENT_ID=%s\n' "$(shell_quote "$client_id")"
    printf 'PTC_ROLE=%s\n' "$(shell_quote "$ROLE")"
    printf 'PTC_ROLES=%s\n' "$(shell_quote "$ROLES")"
    printf 'PTC_IAC_REPO=%s\n' "$(shell_quote "$(param iacRepo)")"
    printf 'PTC_IAC_BRANCH=%s\n' "$(shell_quote "$(param iacBranch)")"
    printf 'PTC_COMPUTE_NODE_COUNT=%s\n' "$(shell_quote "$(param computeNodeCount)")"
  } >"$PTC_ETC/params.env"
  echo "recorded role $ROLE ($ROLES) for $client_id"
}

map_lan_hosts() {
  # Address -> client_id lines for every experiment interface; needs python3 to read the XML.
  local manifest hosts="$ROOT/etc/hosts" lines
  command -v python3 >/dev/null || { echo "no python3: /etc/hosts left alone"; return 0; }
  manifest="$("$GENI_GET" manifest 2>/dev/null)" || { echo "no manifest: /etc/hosts left alone"; return 0; }
  lines="$(printf '%s' "$manifest" | python3 -c '
import sys, xml.etree.ElementTree as ET
G = "{http://www.geni.net/resources/rspec/3}"
try:
    root = ET.fromstring(sys.stdin.read())
except ET.ParseError:
    sys.exit(0)
for node in root.iter(G + "node"):
    ips = [ip.get("address") for ip in node.iter(G + "ip") if ip.get("address")]
    if ips:
        print("%s %s" % (ips[0], node.get("client_id")))
')"
  [ -n "$lines" ] || return 0
  touch "$hosts"
  # Replace our block as a whole so a re-run after a change leaves no stale lines.
  sed -i '/# ptc-lan-begin/,/# ptc-lan-end/d' "$hosts"
  { echo "# ptc-lan-begin"; printf '%s\n' "$lines"; echo "# ptc-lan-end"; } >>"$hosts"
  echo "mapped $(printf '%s\n' "$lines" | wc -l) LAN host name(s) in $hosts"
}

announce_ready() {
  local msg="ptc: cluster node ready (role: $ROLE${ROLES:+; roles: $ROLES}). Run the playbooks with 'ptc deploy'."
  mkdir -p "$STATE" "$ROOT/etc"
  touch "$ROOT/etc/motd"
  sed -i '/^ptc: cluster node ready/d' "$ROOT/etc/motd"
  printf '%s\n' "$msg" >>"$ROOT/etc/motd"
  date -u +%Y-%m-%dT%H:%M:%SZ >"$STATE/startup.done"
  if [ -z "$ROOT" ] && command -v wall >/dev/null; then
    wall "$msg" || true
  fi
  echo "$msg"
}

install_key_mesh
record_role
map_lan_hosts
announce_ready
