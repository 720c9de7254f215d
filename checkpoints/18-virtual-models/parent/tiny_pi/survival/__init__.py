"""Python survival: the few language and library tools chapters 02-07 lean on, one module each.

streams (async generators), tasks (nurseries, cancel scopes, checkpoints),
channels (memory channels), records (attrs), protocols (Protocol and generics).
"""
