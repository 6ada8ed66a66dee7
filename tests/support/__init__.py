"""Tools that tests and benchmarks run, here and on nodes, which production code never imports:
the configuration server's fault workload and checker (:mod:`support.faults`) and the manager
failover probe (:mod:`support.probe`). Kept out of ``elastic`` so that changing them does not
restart every deployed manager (the elastic role's code digest covers ``elastic`` only).

Tests import them as ``support.*`` (pytest puts ``tests/`` on the path); benchmarks put
``tests/`` on ``sys.path`` themselves; on a node they run as files, with the repository on
``PYTHONPATH`` for the ``elastic`` imports.
"""
