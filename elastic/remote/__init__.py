"""The one place ptc reaches into nodes: commands, copies and port forwards over SSH.

- :mod:`elastic.remote.ssh`: one command on one node, a copy to a node, and local forwards
  through a node, with the system's OpenSSH client (``ssh -F SSH_CONFIG``), so every option
  the experiment's ssh_config carries (keys, host-key pinning, proxies) applies as it does to
  Ansible and to ``ptc ssh``;
- :mod:`elastic.remote.group`: one command (or a copy) on many nodes at once, with a cap on
  how many run together, on fabric;
- :mod:`elastic.remote.select`: which inventory hosts a selector (groups, names, globs) means.

Failures are :class:`~elastic.errors.RemoteError` and, when a deadline passed,
:class:`~elastic.errors.RemoteTimeout`; both name the host and the command. This package
imports nothing of ``elastic`` but its errors, so every other concern may use it.
"""
