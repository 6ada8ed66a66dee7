#!/bin/bash
# Boot-time preparation of one ptc cluster node (CloudLab and the local testbed alike).
#
#   sudo bash /local/repository/profiles/startup.sh --groups GROUP[,GROUP...]
#
# GROUPS are the node's Ansible groups. The profile puts them on this command line because an
# Execute service reaches the manifest unchanged: that is how `ptc inventory` (on a workstation
# or on the head, from `geni-get manifest`) learns them. This script only shows them.
# Runs as root at every boot, so every step is idempotent. It does NOT run the playbooks:
# that stays a separate, deliberate user step (ptc deploy), as in the Chef-Cluster profile.
# Node names in /etc/hosts are the testbed's business (CloudLab writes them; so does the local
# testbed), not this script's.
#
#  1. SSH key mesh: `geni-get key` is the experiment's private key, identical on every node;
#     install it for root, derive its public key and authorise it, so the head (and Ansible
#     running there) can reach every node as root.
#  2. Announce readiness: /etc/motd line, wall.
#
# PTC_ROOT (default empty) prefixes every path written, so tests can run this in a sandbox.
set -euo pipefail

ROOT="${PTC_ROOT:-}"
LOG="$ROOT/var/log/ptc-startup.log"
mkdir -p "$(dirname "$LOG")"
exec >>"$LOG" 2>&1
echo "=== ptc startup $(date -u +%Y-%m-%dT%H:%M:%SZ) args: $* ==="

GROUPS_ARG=""
while [ $# -gt 0 ]; do
  case "$1" in
    --groups) GROUPS_ARG="${2:-}"; shift 2 || shift ;;
    --groups=*) GROUPS_ARG="${1#--groups=}"; shift ;;
    *)
      echo "usage: startup.sh --groups GROUP[,GROUP...] (unexpected argument '$1')" >&2
      exit 2
      ;;
  esac
done
if ! [[ "$GROUPS_ARG" =~ ^[a-z][a-z0-9_]*(,[a-z][a-z0-9_]*)*$ ]]; then
  echo "startup.sh: --groups needs comma-separated group names (got '${GROUPS_ARG}')" >&2
  exit 2
fi

GENI_GET="${GENI_GET:-geni-get}"
SSH_DIR="$ROOT/root/.ssh"
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
Host head node-* cfg-* 10.10.*
    StrictHostKeyChecking accept-new
    UserKnownHostsFile /root/.ssh/known_hosts.ptc
EOF
    chmod 600 "$SSH_DIR/config"
  fi
  echo "installed experiment key $SSH_DIR/$keyfile ($keytype)"
}

announce_ready() {
  local msg="ptc: cluster node ready (groups: ${GROUPS_ARG//,/, }). Run the playbooks with 'ptc deploy'."
  mkdir -p "$ROOT/etc"
  touch "$ROOT/etc/motd"
  sed -i '/^ptc: cluster node ready/d' "$ROOT/etc/motd"
  printf '%s\n' "$msg" >>"$ROOT/etc/motd"
  if [ -z "$ROOT" ] && command -v wall >/dev/null; then
    wall "$msg" || true
  fi
  echo "$msg"
}

install_key_mesh
announce_ready
