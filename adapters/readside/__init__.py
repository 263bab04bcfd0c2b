"""The read side: the projector, the read-model tables it writes, and subscriptions."""
