"""The engines several commands share, between the simulation (`sim`) and the commands: the
check of wheels before installing (`check`), the doctor of an environment and the run kept for
it (`doctor`, `kept`), the import plans (`plans`), one extension against one host wheel
(`pairs`, `pairwise`), the first NumPy 2 release of a package (`numpyfix`), this machine's GPUs
(`gpus`). They take values and return report values; the commands (`abifit.commands`) build
their inputs from options and a session."""
