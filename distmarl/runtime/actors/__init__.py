"""The Ray actors that carry out the coordinator's calls: learners and rollout workers."""
