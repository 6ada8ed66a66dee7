"""The control plane at scale: Debian's real slurmctld, ptc's client, manager and policies
against 100 to 10,000 power-save CLOUD nodes emulated by slurmd processes on loopback.

``budget`` refuses sizes the machine cannot hold, ``cleanup`` owns everything a run starts,
``cluster`` brings Slurm up from Debian's packages unpacked under the run's directory, ``hook``
is the ResumeProgram and SuspendProgram (ptc's real client with an emulating provisioner),
``rounds`` times the client's round, a reclamation and the store without Slurm, ``etcd``
runs the etcd member the manager's etcd store is measured on, and ``dbd`` slurmdbd and its
MariaDB for slurmctld's accounting.
"""
