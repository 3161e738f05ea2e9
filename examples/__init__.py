"""Worked examples (a team's own kernels as qconform targets, device profiles)."""
