"""Sample plugin contributing one of everything."""
