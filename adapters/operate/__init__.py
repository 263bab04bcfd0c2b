"""What someone on call does to a store: find runs, look into one, act on it, audited."""
