"""elowen-hello: an example Elowen plugin."""
