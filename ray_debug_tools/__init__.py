"""Attach to Ray's debuggers from a machine that is not a Ray node."""

PROGRAM = "verl-debug"
