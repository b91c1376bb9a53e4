"""Sample plugin sample_broken_import for kernel tests."""
