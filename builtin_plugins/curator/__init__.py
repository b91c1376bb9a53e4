"""The builtin ``curator`` plugin: distils durable facts from settled owner exchanges into the
``memory`` service, through a cheap model, behind a taint gate."""
