"""What both families use: the network set with its optimisers and evolution glue, the joint
optimiser step, space <-> tensor encoding and per-group ``net_config`` for shared parameters."""
