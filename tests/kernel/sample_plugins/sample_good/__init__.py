"""Sample plugin sample_good for kernel tests."""
