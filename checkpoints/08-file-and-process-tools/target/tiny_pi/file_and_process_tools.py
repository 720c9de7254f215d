"""TODO chapter 08: Tools that touch files and processes, safely. The finished code the learner writes."""
