"""Sample plugin sample_mutator for kernel tests."""
