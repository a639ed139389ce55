"""Benchmarks: each script prints ratios against a baseline measured in the same run."""
