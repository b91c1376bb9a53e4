"""Sample plugin sample_async for kernel tests."""
