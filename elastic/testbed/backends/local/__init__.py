"""The local testbed: an RSpec instantiated as systemd-booted podman containers on this machine."""

# The authority in the URNs of local manifests: how a manifest says it came from this testbed.
DOMAIN = "ptc.local"
