"""Sample plugin sample_flaky for kernel tests."""
