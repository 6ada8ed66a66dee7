"""Active learning over performance datasets: Gaussian-process models and selection rules (Ch6-7)."""
