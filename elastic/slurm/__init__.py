"""The Slurm elastic client (Part-Time Cloud §3.2): Slurm grows and shrinks through its
power-save hooks, reports preemption vectors, and gives nodes back under graceful preemption.

- ``commands``: every Slurm command, through an injected runner (unit tests fake it).
- ``queue``: ``squeue -o`` -> running jobs -> ``elastic.policies`` Snapshot -> PV.
- ``client.SlurmElasticClient``: ResumeProgram/SuspendProgram/ResumeFailProgram logic, the PV
  report, NotifyDeletePending (drain, release when idle, requeue at the deadline); the
  testbed's power and playbook steps behind ``client.Provisioner``.
- ``sites``, ``rebalance``: a pool across sites with prices and desired counts, and one round
  of the thesis's Ch. 2 downscaling (OI, FO, AP-X) done through Slurm
  (``python -m elastic.slurm rebalance --sites FILE --policy AP-100``).
- ``service``: configuration, the client's HTTP endpoint and loop, ``python -m elastic.slurm``.
"""
