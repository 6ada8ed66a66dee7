"""The local testbed: an RSpec instantiated as systemd-booted podman containers on this machine."""
