"""The Ray layer: the only package that imports ray. Each actor wraps one core object."""
