"""TODO chapter 16: Codemode: scripts that call tools in a sandbox. The finished code the learner writes."""
