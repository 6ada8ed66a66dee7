"""The elastic-partition simulator of the Part-Time Cloud paper (§4).

Pipeline: ``workload.prepare`` (load, filter, replicate, prioritise) -> ``schedule.simulate``
(FCFS + EASY backfilling on N identical nodes) -> ``snapshots`` (every completion and every T
seconds) -> ``sweep.run_sweep`` (every policy x grace period: preempt the P lowest-valued
nodes, count wasted cycles) -> ``results`` (Parquet + summary) and ``plots``. ``run`` does all
of it here; ``cluster`` runs the sweep as a Slurm job array (``parts``: blocks of policies x
grace periods, each run by ``worker`` on a node) and merges the pieces.

Event conventions, fixed because they change results:

- at equal timestamps, completions are handled before arrivals, and one scheduling pass
  follows every single event;
- EASY reservations use the requested time, jobs end at their actual runtime;
- a snapshot shows the state after every event at its timestamp (a job ending at t is gone,
  a job starting at t runs with elapsed 0);
- in batch mode (the paper's) the whole trace arrives at t = 0 in trace order.

See ``elastic.sim.schedule`` for the backfill details.
"""
