"""Author tools: scripts that write course files, each runnable as `python -m tools.NAME`."""
