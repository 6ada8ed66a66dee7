"""Histories of concurrent operations on a shared object, and whether they are linearizable.

``ops`` reads a recorded history (Jepsen's shape: each process's invocations and completions,
``ok``, ``fail`` or ``info`` for an outcome not known); ``models`` are the sequential objects a
history is checked against (a register, a counter, a register with compare-and-swap);
``linearizable`` is the check (Wing and Gong's search with Lowe's memoisation).
"""
