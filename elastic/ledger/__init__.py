"""The ledger of an elastic cluster: who used, lost and lent what, and what each site cost.

Data flows one way through small modules, each with one job:

- :mod:`elastic.ledger.period` reads ``--since``;
- :mod:`elastic.ledger.runs` reads each run of each job from Slurm's accounting (``sacct -D``,
  through the one parser of sacct's parsable form, :mod:`elastic.sacct`);
- :mod:`elastic.ledger.pool` folds the elastic manager's event log into who held each pool node
  when, and which jobs each reclamation killed;
- :mod:`elastic.ledger.records` folds both into the ledger's rows (runs, loans, instances) and
  sums them by job, user, site or experiment: pure functions, no I/O;
- :mod:`elastic.ledger.fetch` gathers the inputs from a live cluster (sacct on the controller
  over SSH, ``GET /v1/events`` from the manager);
- :mod:`elastic.ledger.frames` turns a ledger into pandas frames, Parquet files and a plot.

Only ``elastic.cli`` prints; these modules return values and raise typed errors.
"""
