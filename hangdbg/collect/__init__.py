"""Collectors: find the ranks of a job, take their stacks (py-spy), fan out to other nodes."""
