"""Adapters between kernelgate and the outside: KernelBench problems and candidates."""
