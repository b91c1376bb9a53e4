"""Sample plugin sample_badmanifest for kernel tests."""
