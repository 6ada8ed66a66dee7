"""Configuring an experiment's nodes: playbooks through ansible-runner, checks through testinfra."""
