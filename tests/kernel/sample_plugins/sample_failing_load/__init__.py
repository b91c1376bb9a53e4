"""Sample plugin sample_failing_load for kernel tests."""
