"""What pages and the CLI render from a run's events: timeline, digest, comparison, regrade, reasons."""
