"""Elowen's builtin plugins, one package each, registered by entry point."""
