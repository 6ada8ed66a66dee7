"""Benchmark campaigns: jobs submitted through Slurm, parsed, and recorded in a dataset."""
