"""elowen-webhook-platform: a reference Elowen chat platform over HTTP webhooks."""
