"""The `course` tool: move between a chapter's parent and target and prove each step."""
